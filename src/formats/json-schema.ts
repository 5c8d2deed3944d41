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

export function jsonSchema(text: string): JsonSchema {
  const schema = JSON.parse(text) as Record<string, unknown>;
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
