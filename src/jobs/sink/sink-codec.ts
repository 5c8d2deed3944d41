/**
 * What a sink record becomes (src/jobs/sink/sink-job.ts writes it): the record's value (and key, headers,
 * metadata) decoded by the config's format and mapped to the columns, converted to their CQL types,
 * or the reason it is quarantined. A pure function of the record, so a replay, `verify --job` and a
 * zombie all see the same row.
 */
import { isLosslessNumber, LosslessNumber, parse } from 'lossless-json';
import { toLong, types } from '../../cassandra/session.js';
import type { SchemaRegistryConfig } from '../../config.js';
import { createDecoder, decoderLookup, isRegistryFormat, schemaCache, SchemaNotFetched, type Decoder } from '../../formats/decoder.js';
import { jsonTooDeep } from '../../formats/bounds.js';
import { parseFlatObject } from '../../formats/flat-json.js';
import type { Expectation } from '../../engine/job-audit.js';
import type { Decoded, DecodeLookup, SourceRecord } from '../../engine/job.js';
import { ExactlyOnceError } from '../../errors.js';
import { canonical, convert, cqlTypeName } from './cql-types.js';
import { canonicalKeyText } from './key-encoding.js';
import { headerBytes, headerValue, metaValue, type ColumnSource, type MetaField } from './column-source.js';
import { holds } from './filter.js';
import { change, unwrapSchema } from './debezium.js';
import { deriveColumns } from './derive-columns.js';
import { MAX_TTL_SECONDS, type SinkColumn, type SinkConfig } from './sink-config.js';
import { refusedKey, rowBytes } from './store-limits.js';

/** What one record becomes. `values` follow `config.columns`; `key` follows `config.key`. */
export type SinkRow =
  | { kind: 'row'; key: unknown[]; values: unknown[]; bytes: number; absent: number[]; expiresAtMs?: number; unknown?: string[] }
  | { kind: 'delete'; key: unknown[] }
  /** Filtered by the config's `where`: nothing is written (the checkpoint passes it). */
  | { kind: 'skip'; key: unknown[] };

/**
 * The TTL to write a row with so that it expires at `expiresAtMs` (record timestamp + TTL) whenever it
 * is written: the seconds left, rounded up (so it never expires before), at most Cassandra's longest.
 * 0 or less: already past, not written.
 */
export function ttlLeft(expiresAtMs: number, nowMs: number): number {
  return Math.min(MAX_TTL_SECONDS, Math.ceil((expiresAtMs - nowMs) / 1000));
}

/** A record's TTL in seconds from its raw field value, or why it is none. */
function ttlSeconds(v: unknown, spec: string): { ok: true; seconds: number } | { ok: false; detail: string } {
  if (v === undefined || v === null) return { ok: false, detail: `ttlField ${spec} is ${v === null ? 'null' : 'missing'}` };
  const text = isLosslessNumber(v) ? (v as { toString(): string }).toString() : typeof v === 'number' || typeof v === 'bigint' ? String(v) : undefined;
  if (text === undefined) return { ok: false, detail: `ttlField ${spec} is not a number of seconds: ${JSON.stringify(typeof v === 'string' ? v.slice(0, 80) : typeof v)}` };
  if (/^-/.test(text) && Number(text) !== 0) return { ok: false, detail: `ttlField ${spec} is negative: ${text}` };
  if (!/^-?\d+$/.test(text)) return { ok: false, detail: `ttlField ${spec} is not a whole number of seconds: ${text}` };
  const seconds = Number(text);
  if (seconds > MAX_TTL_SECONDS) return { ok: false, detail: `ttlField ${spec} is ${text} s, longer than the 20 years (${MAX_TTL_SECONDS} s) Cassandra allows` };
  return { ok: true, seconds };
}

/** A cell not written (onNull: unset): the driver's unset value, bound as no value at all (no tombstone). */
export const UNSET: unknown = types.unset;

const bad = (reason: string, detail: string): Decoded<SinkRow> => ({ ok: false, reason, detail });

function field(doc: Record<string, unknown>, path: readonly string[]): unknown {
  let v: unknown = doc;
  for (const p of path) {
    if (v === null || typeof v !== 'object' || Array.isArray(v) || isLosslessNumber(v)) return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

function isRecord(doc: unknown): doc is Record<string, unknown> {
  return doc !== null && typeof doc === 'object' && !Array.isArray(doc) && !isLosslessNumber(doc) && !(doc instanceof Date) && !Buffer.isBuffer(doc);
}

function parseObject(bytes: Buffer): Record<string, unknown> | string {
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

const WHOLE = /^-?(?:0|[1-9]\d*)$/;

/** A key's values as one text, equal for equal keys (a key's columns are required: never null). */
export function keyText(key: readonly unknown[]): string {
  if (key.length === 1) {
    const c = canonical(key[0]);
    return typeof c === 'string' ? c : JSON.stringify(c);
  }
  return JSON.stringify(canonical(key));
}

/** A column's value from its raw value (undefined: missing): converted, its default, null, or why not. */
function columnValue(col: SinkColumn, v: unknown): { ok: true; value: unknown } | { ok: false; reason: string; detail: string } {
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

/** A record's key as the column sources read it: undefined (no key), or the decoded key, or why it does not decode. */
type KeyView = { ok: true; text: string | undefined; value: unknown } | { ok: false; detail: string };

export class SinkCodec {
  private readonly keyColumns: SinkColumn[];
  /** The columns, a key's required (a key column is never null). */
  private readonly requiredColumns: SinkColumn[];
  /** Some column reads the record key (key, key.x). */
  private readonly readsKey: boolean;
  /** Some column leaves a missing field unset (no cell). */
  private readonly unsets: boolean;
  /** The value's and (for a registry key format) the key's decoders; undefined: JSON, decoded here. */
  private readonly values: Decoder | undefined;
  private readonly keys: Decoder | undefined;
  /** Fetches a batch's schemas before it is decoded (registry formats only). */
  readonly lookup: DecodeLookup | undefined;
  /** Derived columns: the schemas' fields no column stores, by schema id (see `unknownFields`). */
  private readonly unknownBySchema = new Map<number, string[]>();
  private readonly cache: ReturnType<typeof schemaCache> | undefined;

  /** `registry`: where the schemas are, for a registry format (the connection's --schema-registry-url). */
  constructor(readonly config: SinkConfig, registry?: SchemaRegistryConfig) {
    this.keyColumns = config.key.map((k) => config.columns.find((c) => c.name === k)!);
    this.requiredColumns = config.columns.map((c) => (config.key.includes(c.name) ? { ...c, required: true } : c));
    this.readsKey = config.columns.some((c) => c.source === 'key');
    this.unsets = config.columns.some((c) => c.onNull === 'unset');
    const keyDecoded = config.mode === 'upsert' || this.readsKey;
    const needs = isRegistryFormat(config.format) || (keyDecoded && isRegistryFormat(config.keyFormat));
    if (needs && registry === undefined) throw new ExactlyOnceError('EO_CONFIG_INVALID', `sink ${config.name}: format ${config.format} needs a Schema Registry (--schema-registry-url)`);
    const cache = needs ? schemaCache(registry!) : undefined;
    this.cache = cache;
    this.values = isRegistryFormat(config.format) ? createDecoder(config.format, cache) : undefined;
    this.keys = keyDecoded && isRegistryFormat(config.keyFormat) ? createDecoder(config.keyFormat, cache) : undefined;
    this.lookup = decoderLookup({ ...(this.values === undefined ? {} : { value: this.values }), ...(this.keys === undefined ? {} : { key: this.keys }) });
  }

  /** The key a Kafka record key names: one column's value as text (or JSON), or a JSON object of the key fields. */
  private kafkaKey(bytes: Buffer): { ok: true; key: unknown[] } | { ok: false; detail: string } {
    if (this.keys !== undefined) return this.decodedKey(bytes, this.keys);
    const text = bytes.toString('utf8');
    if (this.keyColumns.length === 1) {
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
  private debeziumKey(bytes: Buffer): { ok: true; key: unknown[] } | { ok: false; detail: string } {
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
  private keyView(bytes: Buffer | null): KeyView {
    if (bytes === null) return { ok: true, text: undefined, value: undefined };
    if (this.keys !== undefined) {
      const d = this.keys.decode(bytes);
      return d.ok ? { ok: true, text: undefined, value: d.value } : { ok: false, detail: `the record key cannot be decoded (${d.reason}): ${d.detail}` };
    }
    const text = bytes.toString('utf8');
    if (jsonTooDeep(text) !== undefined) return { ok: true, text, value: undefined };
    try {
      return { ok: true, text, value: parse(text) };
    } catch {
      return { ok: true, text, value: undefined }; // not JSON: its text (a uuid, a name)
    }
  }

  /** A column's raw value from its source (undefined: missing), or why the record cannot give it. */
  private sourceValue(col: SinkColumn, record: SourceRecord, doc: Record<string, unknown>, key: () => KeyView): { ok: true; value: unknown } | { ok: false; reason: string; detail: string } {
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
          return { ok: false, reason: 'bad_key', detail: `${col.name} (field ${col.spec}): the record key ${k.text === undefined ? '' : `${JSON.stringify(k.text.slice(0, 80))} `}is not ${this.keys === undefined ? 'a JSON object' : 'a record'}, so it has no field ${col.field.join('.')}` };
        }
        return { ok: true, value: field(k.value, col.field) };
      }
    }
  }

  /** A `where` field's raw value (undefined: missing), and whether it is text read from bytes (a header, a JSON key's text). */
  private predicateValue(f: ColumnSource, record: SourceRecord, doc: Record<string, unknown>, key: () => KeyView): { v: unknown; textual: boolean } {
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

  /** The record's value as a record of fields, or why not. */
  private valueDoc(bytes: Buffer): { ok: true; doc: Record<string, unknown>; schemaId?: number } | { ok: false; reason: string; detail: string } {
    if (this.values === undefined) {
      const doc = parseObject(bytes);
      return typeof doc === 'string' ? { ok: false, reason: 'bad_json', detail: doc } : { ok: true, doc };
    }
    const d = this.values.decode(bytes);
    if (!d.ok) return d;
    if (!isRecord(d.value)) return { ok: false, reason: 'not_a_record', detail: `schema id ${d.schemaId}: the value is a single ${typeof d.value}, not a record of fields the columns can name` };
    return { ok: true, doc: d.value, ...(d.schemaId === undefined ? {} : { schemaId: d.schemaId }) };
  }

  /**
   * Derived columns: the fields of a record's schema (those a column would be derived for,
   * src/jobs/sink/derive-columns.ts) that no column stores — a field added by a schema version newer than
   * the one the columns were derived from at start. A pure function of the schema id, so a replay and
   * `verify --job` judge the record the same way.
   */
  private unknownFields(schemaId: number | undefined): string[] {
    if (!this.config.derived || schemaId === undefined || this.cache === undefined) return [];
    let unknown = this.unknownBySchema.get(schemaId);
    if (unknown === undefined) {
      const schema = this.cache.get(schemaId);
      if (schema === undefined) return []; // not fetched: the decode above would have failed
      const stored = new Set(this.config.columns.filter((c) => c.source === 'value').map((c) => c.field.join('.')));
      unknown = deriveColumns(schema).columns.map((c) => c.field).filter((f) => !stored.has(f));
      this.unknownBySchema.set(schemaId, unknown);
    }
    return unknown;
  }

  /** Total: a record's bytes never make it throw (a thrown error would stop the partition on that record for good). */
  decode(record: SourceRecord): Decoded<SinkRow> {
    try {
      return this.decodeRecord(record);
    } catch (e) {
      if (e instanceof SchemaNotFetched || e instanceof ExactlyOnceError) throw e;
      return bad('bad_payload', `the record cannot be decoded: ${(e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 200)}`);
    }
  }

  private decodeRecord(record: SourceRecord): Decoded<SinkRow> {
    const { config } = this;
    let key: unknown[] = [];
    if (config.mode === 'upsert') {
      // Rule 1 (see above): the record key places the record on its partition; without one, records of a
      // key may be spread over partitions and the highest offset would mean nothing.
      if (record.key === null) return bad('missing_key', `mode upsert needs the Kafka record key (${config.key.join(', ')}) so that one key's records share a partition`);
      const k = config.envelope === 'debezium' ? this.debeziumKey(record.key) : this.kafkaKey(record.key);
      if (!k.ok) return bad('bad_key', k.detail);
      key = k.key;
      // A key Cassandra would refuse stops nothing: the record is quarantined (src/jobs/sink/store-limits.ts).
      const refused = refusedKey(this.keyColumns, key);
      if (refused !== undefined) return bad(refused.reason, refused.detail);
      // One key, one spelling, so one partition (src/jobs/sink/key-encoding.ts). Debezium's converter spells
      // a key one way (the key's fields in the table's order), so its keys are taken as it writes them.
      if (this.keys === undefined && config.envelope === undefined) {
        const want = canonicalKeyText(this.keyColumns, key);
        if (!record.key.equals(Buffer.from(want, 'utf8'))) {
          return bad('non_canonical_key', `the record key ${JSON.stringify(record.key.toString('utf8').slice(0, 80))} names the key ${JSON.stringify(want.slice(0, 80))}, whose one accepted spelling is that (another spelling may place the key's records on another partition)`);
        }
      }
      if (record.value === null) return { ok: true, value: { kind: 'delete', key } };
    } else if (record.value === null) {
      return bad('null_value', 'a record without a value (a tombstone) has no row in a log-mode table');
    }
    const v = this.valueDoc(record.value!);
    if (!v.ok) return bad(v.reason, v.detail);
    let doc = v.doc;
    if (config.envelope === 'debezium') {
      const c = change(doc);
      if (!c.ok) return bad(c.reason, c.detail);
      if (c.op === 'd' && config.mode === 'upsert') return { ok: true, value: { kind: 'delete', key } };
      if (c.row === null) return bad('bad_envelope', 'op d without before: a log-mode row needs the deleted row (Postgres: REPLICA IDENTITY FULL, or an upsert sink)');
      doc = c.row;
    }
    let keyView: KeyView | undefined;
    const keyOf = () => (keyView ??= this.keyView(record.key));
    if (config.where !== undefined && !holds(config.where, (f) => this.predicateValue(f, record, doc, keyOf))) return { ok: true, value: { kind: 'skip', key } };
    // A field of a newer schema version than the columns were derived from: never dropped without a count.
    const unknown = this.unknownFields(v.schemaId);
    if (unknown.length > 0 && config.onUnknown === 'quarantine') {
      return bad('unknown_field', `schema id ${v.schemaId} has ${unknown.length === 1 ? 'a field' : 'fields'} no column stores: ${unknown.join(', ')} (the columns were derived from an older version; run \`exactlyonce schema apply --job <config>\` to add them; onUnknown: quarantine)`);
    }
    const values: unknown[] = [];
    // Columns whose field path matched nothing in this record (src/jobs/sink/unmatched-columns.ts).
    const absent: number[] = [];
    const cols = this.requiredColumns;
    for (let i = 0; i < cols.length; i++) {
      const col = cols[i]!;
      let rawValue: unknown;
      if (col.source === 'value') rawValue = field(doc, col.field);
      else {
        const raw = this.sourceValue(col, record, doc, keyOf);
        if (!raw.ok) return bad(raw.reason, raw.detail);
        rawValue = raw.value;
      }
      if (rawValue === undefined) absent.push(values.length);
      const v = columnValue(col, rawValue);
      if (!v.ok) return bad(v.reason, v.detail);
      values.push(v.value);
    }
    if (config.mode === 'upsert') {
      const inValue = this.keyColumns.map((c) => values[config.columns.indexOf(c)]);
      if (keyText(inValue) !== keyText(key)) {
        return bad('key_mismatch', `the record key names ${JSON.stringify(canonical(key))}, the value ${JSON.stringify(canonical(inValue))}`);
      }
    }
    const size = rowBytes(config.columns, this.unsets ? values.map((v) => (v === UNSET ? null : v)) : values);
    if (size.refusal !== undefined) return bad(size.refusal.reason, size.refusal.detail);
    let expiresAtMs: number | undefined;
    if (config.ttl !== undefined) {
      let seconds: number;
      if ('seconds' in config.ttl) seconds = config.ttl.seconds;
      else {
        const src = config.ttl.field;
        const raw = this.sourceValue({ name: 'ttlField', type: { kind: 'scalar', name: 'bigint' }, source: src.source, field: src.path, spec: src.spec, required: false, default: undefined, onNull: 'null' }, record, doc, keyOf);
        const t = raw.ok ? ttlSeconds(raw.value, src.spec) : { ok: false as const, detail: raw.detail };
        if (!t.ok) return bad('bad_ttl', t.detail);
        seconds = t.seconds;
      }
      expiresAtMs = record.timestampMs + seconds * 1000;
    }
    return { ok: true, value: { kind: 'row', key, values, bytes: size.bytes, absent, ...(expiresAtMs === undefined ? {} : { expiresAtMs }), ...(unknown.length === 0 ? {} : { unknown }) } };
  }

  /** What the record must produce (for `verify --job`). */
  expect(record: SourceRecord, d: Decoded<SinkRow> = this.decode(record)): Expectation {
    if (!d.ok) return { kind: 'quarantine', reason: d.reason };
    if (d.value.kind === 'skip') return { kind: 'none', why: 'filtered' };
    const { config } = this;
    const expires = d.value.kind === 'row' && d.value.expiresAtMs !== undefined ? { expiresAtMs: d.value.expiresAtMs } : {};
    // An unset cell reads back as null in log mode; in upsert mode it keeps the key's earlier value.
    const shown = (v: unknown) => (v === UNSET ? null : v);
    if (config.mode === 'log') {
      return {
        kind: 'row',
        key: { partition: record.partition, offset: toLong(record.offset) },
        row: Object.fromEntries(config.columns.map((c, i) => [c.name, shown((d.value as { values: unknown[] }).values[i])])),
        ...expires,
      };
    }
    const key = Object.fromEntries(config.key.map((k, i) => [k, d.value.key[i]]));
    if (d.value.kind === 'delete') return { kind: 'delete', key };
    const values = d.value.values;
    const cols = config.columns.filter((c) => !config.key.includes(c.name));
    const unset = cols.filter((c) => values[config.columns.indexOf(c)] === UNSET).map((c) => c.name);
    return { kind: 'row', key, row: Object.fromEntries(cols.map((c) => [c.name, shown(values[config.columns.indexOf(c)])])), ...expires, ...(unset.length === 0 ? {} : { unset }) };
  }
}
