/**
 * A decoded record value or key as a document of fields, as the sink's columns read it: a JSON object
 * parsed (a flat one in one pass, any other losslessly and bounded in depth), a field by its path, and
 * whether a value is such a document. A file of its own because the value, the key and the column
 * sources all read documents the same way.
 */
import { isLosslessNumber, parse } from 'lossless-json';
import { jsonTooDeep } from '../../formats/bounds.js';
import { parseFlatObject } from '../../formats/flat-json.js';

/** The value at `path` in a document (undefined: missing). */
export function field(doc: Record<string, unknown>, path: readonly string[]): unknown {
  let v: unknown = doc;
  for (const p of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || isLosslessNumber(v)) return undefined;
    // Own fields only: a record without `constructor` has no such field (not Object's).
    v = Object.hasOwn(v, p) ? (v as Record<string, unknown>)[p] : undefined;
  }
  return v;
}

/** A document of fields: an object, not an array, a number, a date or bytes. */
export function isRecord(doc: unknown): doc is Record<string, unknown> {
  return doc !== null && typeof doc === 'object' && !Array.isArray(doc) && !isLosslessNumber(doc) && !(doc instanceof Date) && !Buffer.isBuffer(doc);
}

/** A JSON object from its bytes, or why they are none. */
export function parseObject(bytes: Buffer): Record<string, unknown> | string {
  const text = bytes.toString('utf8');
  // A flat object (the common record) in one pass; anything else as lossless-json reads it.
  const flat = parseFlatObject(text);
  if (flat !== undefined) return flat;
  const deep = jsonTooDeep(text);
  if (deep !== undefined) return deep;
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    return (e as Error).message;
  }
  if (!isRecord(doc)) return 'not a JSON object';
  return doc;
}
