/**
 * JSON Schema records: the payload after the wire header is JSON text, validated against the
 * registered schema with ajv (the validator @confluentinc/schemaregistry's JSON serde uses; drafts 7,
 * 2019-09 and 2020-12 by the schema's `$schema`). The value is parsed like a plain JSON record:
 * numbers losslessly (a 64-bit id or a decimal keeps its digits); validation reads the same text with
 * JSON.parse, whose float64 numbers are close enough to check types, ranges and required fields.
 * Formats (`"format": "uuid"`) are not validated: the sink's column types check the values they store.
 */
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { parse } from 'lossless-json';
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
 * The `pattern` and `patternProperties` regular expressions of a schema that can take exponential time
 * on a crafted string (nested repetition, `^(a+)+$`: safe-regex2's star height above 1). JavaScript's
 * regular expressions backtrack, and one record against such a pattern would hold the worker's only
 * thread for good, so a schema with one is not used: its records are quarantined as bad_schema, each
 * with this reason, and the rest flow.
 */
export function unsafePatterns(schema: unknown): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    if (v === null || typeof v !== 'object') return;
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      if (k === 'pattern' && typeof x === 'string' && !safeRegex(x, { limit: Number.MAX_SAFE_INTEGER })) out.push(x);
      if (k === 'patternProperties' && x !== null && typeof x === 'object') for (const p of Object.keys(x)) if (!safeRegex(p, { limit: Number.MAX_SAFE_INTEGER })) out.push(p);
      walk(x);
    }
  };
  walk(schema);
  return out;
}

export function jsonSchema(text: string): JsonSchema {
  const schema = JSON.parse(text) as Record<string, unknown>;
  const unsafe = unsafePatterns(schema);
  if (unsafe.length > 0) {
    throw new Error(`its pattern ${JSON.stringify(unsafe[0]!.slice(0, 80))} repeats a repetition, which can take exponential time on a crafted value; register the schema without nested quantifiers (e.g. ^a+$ for ^(a+)+$)`);
  }
  const draft = String(schema['$schema'] ?? '');
  const ajv = /2020-12/.test(draft) ? new Ajv2020(OPTIONS) : /2019-09/.test(draft) ? new Ajv2019(OPTIONS) : new Ajv(OPTIONS);
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
