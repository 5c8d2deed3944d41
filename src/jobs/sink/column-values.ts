/**
 * A sink column's value from a record (src/jobs/sink/sink-codec.ts): its raw value from its source
 * (the value's field, the record key, a header, the record's metadata), a `where` field's the same way,
 * and the raw value converted to the column's CQL type, its default, null or unset, or why the record
 * is quarantined. A file of its own so that the codec reads as the order of a record's checks.
 */
import { isLosslessNumber } from 'lossless-json';
import { types } from '../../cassandra/session.js';
import type { SourceRecord } from '../../engine/job.js';
import { convert, cqlTypeName } from './cql-types.js';
import { headerBytes, headerValue, metaValue, type ColumnSource, type MetaField } from './column-source.js';
import { field, isRecord } from './record-fields.js';
import type { SinkColumn } from './sink-config.js';

/** A record's key as the column sources read it: undefined (no key), or the decoded key, or why it does not decode. */
export type KeyView = { ok: true; text: string | undefined; value: unknown } | { ok: false; detail: string };

/** A cell not written (onNull: unset): the driver's unset value, bound as no value at all (no tombstone). */
export const UNSET: unknown = types.unset;

/** A column's value from its raw value (undefined: missing): converted, its default, null, or why not. */
export function columnValue(col: SinkColumn, v: unknown): { ok: true; value: unknown } | { ok: false; reason: string; detail: string } {
  if (v === undefined || v === null) {
    if (col.required) return { ok: false, reason: 'missing_field', detail: `${col.name}: field ${col.spec} is required and ${v === null ? 'null' : 'missing'}` };
    if (col.onNull === 'unset') return { ok: true, value: UNSET };
    if (col.default !== undefined) return { ok: true, value: col.default };
    return { ok: true, value: null };
  }
  const c = convert(col.type, v);
  if (c.ok) return c;
  return { ok: false, reason: col.source === 'header' ? 'bad_header' : 'bad_value', detail: `${col.name} (${cqlTypeName(col.type)}, field ${col.spec}): ${c.problem}` };
}

/**
 * A column's raw value from its source (undefined: missing), or why the record cannot give it.
 * `keysDecoded`: the record key is registry-encoded (a record), not JSON.
 */
export function sourceValue(col: SinkColumn, record: SourceRecord, doc: Record<string, unknown>, key: () => KeyView, keysDecoded: boolean): { ok: true; value: unknown } | { ok: false; reason: string; detail: string } {
  switch (col.source) {
    case 'value':
      return { ok: true, value: field(doc, col.field) };
    case 'meta':
      return { ok: true, value: metaValue(record, col.field[0] as MetaField) };
    case 'header': {
      const bytes = headerBytes(record, col.field[0]!);
      if (bytes === undefined) return { ok: true, value: undefined };
      const h = headerValue(bytes, col.type);
      return h.ok ? h : { ok: false, reason: 'bad_header', detail: `${col.name} (${cqlTypeName(col.type)}, field ${col.spec}): ${h.problem}` };
    }
    case 'key': {
      const k = key();
      if (!k.ok) return { ok: false, reason: 'bad_key', detail: `${col.name} (field ${col.spec}): ${k.detail}` };
      if (k.text === undefined && k.value === undefined) return { ok: true, value: undefined }; // no record key
      if (col.field.length === 0) {
        // The whole key: a JSON key's text for a text column (as the upsert key reads it), else its JSON scalar.
        if (k.text !== undefined && (col.type.kind !== 'scalar' || col.type.name === 'text' || k.value === undefined || (k.value !== null && typeof k.value === 'object' && !isLosslessNumber(k.value)))) return { ok: true, value: k.text };
        return { ok: true, value: k.value };
      }
      if (!isRecord(k.value)) {
        return { ok: false, reason: 'bad_key', detail: `${col.name} (field ${col.spec}): the record key ${k.text === undefined ? '' : `${JSON.stringify(k.text.slice(0, 80))} `}is not ${keysDecoded ? 'a record' : 'a JSON object'}, so it has no field ${col.field.join('.')}` };
      }
      return { ok: true, value: field(k.value, col.field) };
    }
  }
}

/** A `where` field's raw value (undefined: missing), and whether it is text read from bytes (a header, a JSON key's text). */
export function predicateValue(f: ColumnSource, record: SourceRecord, doc: Record<string, unknown>, key: () => KeyView): { v: unknown; textual: boolean } {
  switch (f.source) {
    case 'value':
      return { v: field(doc, f.path), textual: false };
    case 'meta':
      return { v: metaValue(record, f.path[0] as MetaField), textual: false };
    case 'header':
      return { v: headerBytes(record, f.path[0]!)?.toString('utf8'), textual: true };
    case 'key': {
      const k = key();
      if (!k.ok) return { v: undefined, textual: false };
      if (f.path.length === 0) return k.text !== undefined ? { v: k.text, textual: true } : { v: k.value, textual: false };
      return { v: isRecord(k.value) ? field(k.value, f.path) : undefined, textual: false };
    }
  }
}
