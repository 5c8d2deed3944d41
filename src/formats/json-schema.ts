/**
 * JSON Schema records: the payload after the wire header is JSON text, validated against the
 * registered schema with ajv (the validator @confluentinc/schemaregistry's JSON serde uses; drafts 7,
 * 2019-09 and 2020-12 by the schema's `$schema`). The value is parsed like a plain JSON record:
 * numbers losslessly (a 64-bit id or a decimal keeps its digits); validation reads the same text with
 * JSON.parse, whose float64 numbers are close enough to check types, ranges and required fields.
 * Formats (`"format": "uuid"`) are not validated: the sink's column types check the values they store.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import type { RegExpEngine } from 'ajv/dist/types/index.js';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'lossless-json';
import { RE2JS } from 're2js';
import safeRegex from 'safe-regex2';
import { DecodeBoundError, jsonTooDeep } from './bounds.js';

export interface JsonSchema {
  readonly validate: ValidateFunction;
  /** The schema itself (for deriving columns). */
  readonly schema: Record<string, unknown>;
}

const OPTIONS = { strict: false, validateFormats: false, allErrors: false, logger: false } as const;

/** A JSON value's text with object keys sorted: two values are equal for JSON Schema when these are. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o).sort().map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/**
 * `uniqueItems` in time linear in the array's text: ajv's own compares every pair of non-scalar items
 * (a 64 KiB record of 16,000 small arrays took seconds), which a stranger's record must not be able to
 * make it do.
 */
function uniqueItems(schema: unknown, data: unknown): boolean {
  if (schema !== true || !Array.isArray(data)) return true;
  return new Set(data.map(canonical)).size === data.length;
}

/**
 * The regular expressions of `pattern` and `patternProperties`, run in time linear in the value: a
 * stranger's record must not be able to hold the worker's only thread (JavaScript's own regular
 * expressions backtrack: `^(a+)+$` or `^(x|xx)*$` on forty characters and a wrong last one take
 * hours). RE2's engine (re2js, in JavaScript) runs every pattern it can parse in linear time. What it
 * cannot parse — lookarounds and backreferences, which no linear engine runs — is run by JavaScript
 * if safe-regex2 finds no nested repetition in it; otherwise the schema is not used: its records are
 * quarantined as bad_schema with this reason, and the rest flow.
 */
const linearRegExp: RegExpEngine = Object.assign(
  (pattern: string, flags: string) => {
    let re2: RE2JS;
    try {
      re2 = RE2JS.compile(pattern);
    } catch {
      if (!safeRegex(pattern, { limit: Number.MAX_SAFE_INTEGER })) {
        throw new Error(
          `its pattern ${JSON.stringify(pattern.slice(0, 80))} has a lookaround or a backreference (which no linear-time engine runs) and repeats a repetition, which can take exponential time on a crafted value; register the schema without one of them`,
        );
      }
      return new RegExp(pattern, flags);
    }
    // ajv keys its compiled patterns by toString(): each needs its own.
    return { test: (s: string) => re2.matcher(s).find(), toString: () => `re2:/${pattern}/${flags}` };
  },
  { code: 're2js' },
);

export function jsonSchema(text: string): JsonSchema {
  const schema = JSON.parse(text) as Record<string, unknown>;
  const draft = String(schema['$schema'] ?? '');
  const options = { ...OPTIONS, code: { regExp: linearRegExp } };
  const ajv = /2020-12/.test(draft) ? new Ajv2020(options) : /2019-09/.test(draft) ? new Ajv2019(options) : new Ajv(options);
  ajv.removeKeyword('uniqueItems');
  ajv.addKeyword({ keyword: 'uniqueItems', type: 'array', schemaType: 'boolean', validate: uniqueItems, errors: false });
  return { validate: ajv.compile(schema), schema };
}

/** The JSON value (numbers lossless); throws when it is not JSON or does not match the schema. */
export function decodeJsonSchema(schema: JsonSchema, payload: Buffer): unknown {
  const text = payload.toString('utf8');
  // Both parsers and ajv's validators recurse with the value's depth.
  const deep = jsonTooDeep(text);
  if (deep !== undefined) throw new DecodeBoundError('too_large', deep);
  const value = parse(text);
  if (!schema.validate(JSON.parse(text))) {
    const e = schema.validate.errors?.[0];
    throw new Error(`${e?.instancePath === '' || e?.instancePath === undefined ? 'the value' : e.instancePath} ${e?.message ?? 'does not match'}`);
  }
  return value;
}
