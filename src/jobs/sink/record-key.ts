/**
 * The Kafka record key as a sink reads it (src/jobs/sink/sink-codec.ts): an upsert's key columns from
 * the record key (JSON text or object, Debezium's key, or a registry-encoded key), the key as the
 * columns' `key` and `key.x` sources see it, and a key's values as one text. A file of its own so that
 * the codec reads as the order of a record's checks, apart from how each kind of key is spelled.
 */
import { isLosslessNumber, LosslessNumber, parse } from 'lossless-json';
import { Long } from '../../cassandra/session.js';
import { jsonTooDeep } from '../../formats/bounds.js';
import type { Decoder } from '../../formats/decoder.js';
import { canonical, convert, cqlTypeName } from './cql-types.js';
import { columnValue, type KeyView } from './column-values.js';
import { unwrapSchema } from './debezium.js';
import { scalarKey } from './column-source.js';
import { field, isRecord, parseObject } from './record-fields.js';
import type { SinkColumn } from './sink-config.js';

const WHOLE = /^-?(?:0|[1-9]\d*)$/;

/** Whether two keys' values are one key: their keyText is equal. */
export function sameKey(a: readonly unknown[], b: readonly unknown[]): boolean {
  // One bigint column (the common key): equal Longs have equal texts, without making them.
  if (a.length === 1 && b.length === 1 && a[0] instanceof Long && b[0] instanceof Long) return a[0].equals(b[0]);
  return keyText(a) === keyText(b);
}

/** A key's values as one text, equal for equal keys (a key's columns are required: never null). */
export function keyText(key: readonly unknown[]): string {
  if (key.length === 1) {
    const c = canonical(key[0]);
    return typeof c === 'string' ? c : JSON.stringify(c);
  }
  return JSON.stringify(canonical(key));
}

/** The key columns' values, and the key as the column sources see it, from a record's Kafka key. */
export class RecordKeys {
  constructor(
    private readonly keyColumns: readonly SinkColumn[],
    /** The key format's decoder (a registry format); undefined: JSON, decoded here. */
    private readonly keys: Decoder | undefined,
  ) {}

  /** The key a Kafka record key names: one column's value as text (or JSON), or a JSON object of the key fields. */
  kafkaKey(bytes: Buffer): { ok: true; key: unknown[] } | { ok: false; detail: string } {
    if (this.keys !== undefined) return this.decodedKey(bytes, this.keys);
    const text = bytes.toString('utf8');
    if (scalarKey(this.keyColumns)) {
      const col = this.keyColumns[0]!;
      let v: unknown = text;
      if (col.type.kind === 'scalar' && col.type.name !== 'text') {
        try {
          // A whole number (the common key) as lossless-json reads it, without its parser.
          const j = WHOLE.test(text) ? new LosslessNumber(text) : parse(text);
          if (j !== null && (typeof j !== 'object' || isLosslessNumber(j))) v = j;
        } catch {
          // not JSON: the text itself (a uuid, an ISO date)
        }
      }
      const c = convert(col.type, v);
      return c.ok ? { ok: true, key: [c.value] } : { ok: false, detail: `the record key "${text.slice(0, 80)}" is not a ${cqlTypeName(col.type)} for ${col.name}: ${c.problem}` };
    }
    const doc = parseObject(bytes);
    if (typeof doc === 'string') return { ok: false, detail: `the record key must be a JSON object of ${this.keyColumns.map((c) => c.field.join('.')).join(', ')} (${doc})` };
    return this.keyFields(doc, 'record key');
  }

  /** The key columns' values from a record key's fields (each column's field path), or why not (`where` begins the detail). */
  private keyFields(fields: Record<string, unknown>, where: string): { ok: true; key: unknown[] } | { ok: false; detail: string } {
    const key: unknown[] = [];
    for (const col of this.keyColumns) {
      const v = columnValue({ ...col, required: true }, field(fields, col.field));
      if (!v.ok) return { ok: false, detail: `${where}: ${v.detail}` };
      key.push(v.value);
    }
    return { ok: true, key };
  }

  /** Debezium's record key: the key's fields as a JSON object (under `payload` with schemas), or a registry record. */
  debeziumKey(bytes: Buffer): { ok: true; key: unknown[] } | { ok: false; detail: string } {
    if (this.keys !== undefined) return this.decodedKey(bytes, this.keys);
    const doc = parseObject(bytes);
    const fields = typeof doc === 'string' ? undefined : unwrapSchema(doc);
    if (!isRecord(fields)) return { ok: false, detail: `a Debezium record key is a JSON object of ${this.keyColumns.map((c) => c.field.join('.')).join(', ')}${typeof doc === 'string' ? ` (${doc})` : ''}` };
    return this.keyFields(fields, 'record key');
  }

  /** A registry-encoded key: a record's key fields (by each key column's field path), or one scalar for one key column. */
  private decodedKey(bytes: Buffer, decoder: Decoder): { ok: true; key: unknown[] } | { ok: false; detail: string } {
    const d = decoder.decode(bytes);
    if (!d.ok) return { ok: false, detail: `the record key cannot be decoded (${d.reason}): ${d.detail}` };
    if (!isRecord(d.value)) {
      if (this.keyColumns.length !== 1) return { ok: false, detail: `the record key (schema id ${d.schemaId}) is a single value; ${this.keyColumns.length} key columns need a record of ${this.keyColumns.map((c) => c.field.join('.')).join(', ')}` };
      const col = this.keyColumns[0]!;
      const c = convert(col.type, d.value);
      return c.ok ? { ok: true, key: [c.value] } : { ok: false, detail: `the record key (schema id ${d.schemaId}) is not a ${cqlTypeName(col.type)} for ${col.name}: ${c.problem}` };
    }
    return this.keyFields(d.value, `record key (schema id ${d.schemaId})`);
  }

  /** The record key as the columns' `key` and `key.x` read it (JSON: its text and, when it parses, its JSON). */
  view(bytes: Buffer | null): KeyView {
    if (bytes === null) return { ok: true, text: undefined, value: undefined };
    if (this.keys !== undefined) {
      const d = this.keys.decode(bytes);
      return d.ok ? { ok: true, text: undefined, value: d.value } : { ok: false, detail: `the record key cannot be decoded (${d.reason}): ${d.detail}` };
    }
    const text = bytes.toString('utf8');
    // A whole number (the common key) as lossless-json reads it, without its parser.
    if (WHOLE.test(text)) return { ok: true, text, value: new LosslessNumber(text) };
    if (jsonTooDeep(text) !== undefined) return { ok: true, text, value: undefined };
    try {
      return { ok: true, text, value: parse(text) };
    } catch {
      return { ok: true, text, value: undefined }; // not JSON: its text (a uuid, a name)
    }
  }
}
