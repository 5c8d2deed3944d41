/**
 * The declarative sink as a Job (`exactlyonce sink --config`): the records of one topic into one table,
 * in one of two modes. Records are decoded by the config's formats (src/formats/decoder.ts: JSON, or
 * Avro, Protobuf or JSON Schema through the Schema Registry, whose schemas the job's lookup fetches
 * before each batch is decoded); the column mapping does not care which.
 *
 * log: one row per record, keyed by (partition, offset) like the events job's `events` table (the seed
 * job's). A replay rewrites the same row with the same values.
 *
 * upsert: one row per key; the row equals the key's record with the highest offset, however often and
 * in whatever order writes land (a replay after a crash, a paused zombie writing late). A plain upsert
 * does not give that: the last write to arrive wins, and a zombie's late write of an older record would
 * overwrite a newer one. So every write carries `USING TIMESTAMP <offset>` and Cassandra keeps, per cell,
 * the write with the highest timestamp: the highest offset wins whatever the arrival order (the trick the
 * checkpoints use, src/engine/checkpoint-store.ts). A record without a value (a tombstone) deletes the
 * row `USING TIMESTAMP <offset>`: it hides every older write, and a later record of the key (a higher
 * offset) brings the row back. This holds only when:
 *   1. all records of a key are on one partition (offsets of two partitions are not comparable): the
 *      sink requires the Kafka record key and checks that it names the same key as the value;
 *      `verify --job` checks the whole log;
 *   2. nobody else writes the table with wall-clock timestamps (µs since 1970, far above any offset:
 *      such a write would win over every later record): the sink refuses to start on a table holding
 *      such writes, and `verify --job` checks every row's write time;
 *   3. the topic is not re-created under the table (offsets restart at 0 and would lose to the old
 *      rows): after `checkpoints reset --rebind`, truncate the table;
 *   4. the topic does not gain partitions: producers then place keys by the new count, so a key's
 *      newer records may sit on another partition at lower offsets. "Newest" is the highest offset
 *      within one partition layout; across a change no offset orders a key's records (producers
 *      learn the new count at different times), so the engine stops every partition before writing a
 *      batch that may hold a moved key (EO_PARTITIONS_ADDED, Job.keysStayOnPartition;
 *      docs/guarantees.md, "When the topic gains partitions").
 * A deletion's tombstone is kept gc_grace_seconds (10 days by default); a zombie write older than
 * that could only come from a worker paused for longer.
 */
import { Counter } from 'prom-client';
import { isLosslessNumber, LosslessNumber, parse } from 'lossless-json';
import { consistencies, toLong, types, type Client } from '../cassandra/session.js';
import type { SchemaRegistryConfig } from '../config.js';
import { createDecoder, decoderLookup, isRegistryFormat, schemaCache, SchemaNotFetched, type Decoder } from '../formats/decoder.js';
import { jsonTooDeep } from '../formats/bounds.js';
import { parseFlatObject } from '../formats/flat-json.js';
import type { DecodeLookup } from '../engine/job.js';
import type { Expectation, JobAudit } from '../engine/job-audit.js';
import type { Decoded, DecodedRecord, Job, JobContext, JobMigration, SourceRecord } from '../engine/job.js';
import { ExactlyOnceError } from '../errors.js';
import { BATCH_BYTES, cutBatches, ROWS_PER_BATCH } from '../cassandra/batches.js';
import { int32 } from '../cassandra/encode.js';
import { BatchRows, PreparedBatch } from '../cassandra/prepared-batch.js';
import { canonical, convert, cqlColumnType, cqlTypeName } from './cql-types.js';
import { canonicalKeyText } from './key-encoding.js';
import { headerBytes, headerValue, metaValue, sourceSetting as settingOf, type ColumnSource, type MetaField } from './column-source.js';
import { holds, predicateSetting } from './filter.js';
import { deriveColumns } from './derive-columns.js';

const sourceSetting = (c: SinkColumn) => settingOf({ source: c.source, path: c.field, spec: c.spec });
import { sampleRecords } from './sample.js';
import type { AvroSampleIds } from './sample-avro.js';
import { MAX_TTL_SECONDS, sinkConfig, valueSubject, type SinkColumn, type SinkConfig } from './sink-config.js';
import { valueFieldSpec } from './column-source.js';
import { SchemaRegistry } from '../registry/schema-registry.js';
import { refusedKey, rowBytes } from './store-limits.js';
import { UnmatchedReporter } from './unmatched-columns.js';
import { createLogger } from '../log.js';

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

/** Upsert batches in flight at once. */
const UPSERT_CONCURRENCY = 64;
/**
 * Keys (Cassandra partitions) and bytes of rows per upsert batch: Cassandra's defaults warn about an
 * unlogged batch over 10 partitions (unlogged_batch_across_partitions_warn_threshold) or 5 KiB
 * (batch_size_warn_threshold) and refuse one over 50 KiB (batch_size_fail_threshold); a batch of one
 * partition is exempt, so one key's records go in one batch up to ROWS_PER_BATCH and BATCH_BYTES.
 */
const UPSERT_KEYS_PER_BATCH = 10;
const UPSERT_BATCH_BYTES = 4096;
/** Write times at or above this are not offsets (2^44 µs is 1970-07-24: every wall clock is past it). */
export const WALL_CLOCK_FLOOR = 1n << 44n;

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
function keyText(key: readonly unknown[]): string {
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
    const key: unknown[] = [];
    for (const col of this.keyColumns) {
      const v = columnValue({ ...col, required: true }, field(doc, col.field));
      if (!v.ok) return { ok: false, detail: `record key: ${v.detail}` };
      key.push(v.value);
    }
    return { ok: true, key };
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
    const key: unknown[] = [];
    for (const col of this.keyColumns) {
      const v = columnValue({ ...col, required: true }, field(d.value, col.field));
      if (!v.ok) return { ok: false, detail: `record key (schema id ${d.schemaId}): ${v.detail}` };
      key.push(v.value);
    }
    return { ok: true, key };
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
   * src/sink/derive-columns.ts) that no column stores — a field added by a schema version newer than
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
      const k = this.kafkaKey(record.key);
      if (!k.ok) return bad('bad_key', k.detail);
      key = k.key;
      // A key Cassandra would refuse stops nothing: the record is quarantined (src/sink/store-limits.ts).
      const refused = refusedKey(this.keyColumns, key);
      if (refused !== undefined) return bad(refused.reason, refused.detail);
      // One key, one spelling, so one partition (src/sink/key-encoding.ts).
      if (this.keys === undefined) {
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
    const doc = v.doc;
    let keyView: KeyView | undefined;
    const keyOf = () => (keyView ??= this.keyView(record.key));
    if (config.where !== undefined && !holds(config.where, (f) => this.predicateValue(f, record, doc, keyOf))) return { ok: true, value: { kind: 'skip', key } };
    // A field of a newer schema version than the columns were derived from: never dropped without a count.
    const unknown = this.unknownFields(v.schemaId);
    if (unknown.length > 0 && config.onUnknown === 'quarantine') {
      return bad('unknown_field', `schema id ${v.schemaId} has ${unknown.length === 1 ? 'a field' : 'fields'} no column stores: ${unknown.join(', ')} (the columns were derived from an older version; run \`exactlyonce schema apply --job <config>\` to add them; onUnknown: quarantine)`);
    }
    const values: unknown[] = [];
    // Columns whose field path matched nothing in this record (src/sink/unmatched-columns.ts).
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

/** The CQL that creates the sink's table (`sink --print-cql`, and the job's migration 1). */
export function createTableCql(config: SinkConfig, keyspace = '{{keyspace}}'): string {
  const cols = config.columns.map((c) => `    ${c.name} ${cqlColumnType(c.type)}`);
  if (config.mode === 'log') {
    return [
      `-- Sink ${config.name}: topic ${config.topic}, log mode: one row per record, keyed by its Kafka partition and offset.`,
      `CREATE TABLE IF NOT EXISTS ${keyspace}.${config.table} (`,
      '    partition int,',
      '    offset bigint,',
      ...cols.map((c) => `${c},`),
      '    PRIMARY KEY (partition, offset)',
      ') WITH CLUSTERING ORDER BY (offset DESC);',
      '',
    ].join('\n');
  }
  return [
    `-- Sink ${config.name}: topic ${config.topic}, upsert mode: one row per ${config.key.join(', ')}, the record with the highest offset.`,
    '-- Every write is USING TIMESTAMP <offset>: never write this table with wall-clock timestamps.',
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${config.table} (`,
    ...cols.map((c) => `${c},`),
    `    PRIMARY KEY ((${config.key.join(', ')}))`,
    ');',
    '',
  ].join('\n');
}

export class SinkJob implements Job<SinkRow> {
  readonly name: string;
  readonly topic: string;
  readonly settings: Readonly<Record<string, string>>;
  readonly migrations: readonly JobMigration[];
  /** Its one table, bound to this sink alone (EO_TABLE_OWNED for a second job on it). */
  readonly tables: readonly string[];
  readonly audit: JobAudit;
  readonly lookup: DecodeLookup | undefined;
  /** Upsert: the highest offset of a key wins, which orders its records only while they share a partition (rule 4 above). */
  readonly keysStayOnPartition: boolean;
  private readonly codec: SinkCodec;
  /** The row writes' consistency (the config's, LOCAL_QUORUM by default). */
  private readonly consistency: number;
  private session: Client | undefined;
  private keyspace = '';
  /** The row writes, prepared in open(): log mode's insert; upsert's insert and delete. */
  private statements: { insert: PreparedBatch; del?: PreparedBatch } | undefined;
  /** Upsert: where each key column's value is among the insert's parameters (to route a key's batch). */
  private readonly keyIndexes: readonly number[];
  private readonly unmatched: UnmatchedReporter;
  /** exactlyonce_sink_unmatched_columns_total{column}: batches in which a column's field matched no record. */
  private unmatchedCount: Counter<'column'> | undefined;
  /** exactlyonce_sink_expired_total: records not written because their TTL had passed (record time + TTL). */
  private expiredCount: Counter | undefined;
  /** exactlyonce_sink_filtered_total: records the config's `where` left out. */
  private filteredCount: Counter | undefined;
  /** exactlyonce_sink_unknown_fields_total{field}: fields of stored records that no column stores (onUnknown: ignore). */
  private unknownCount: Counter<'field'> | undefined;

  /** `registry`: the Schema Registry of a registry format (the connection's). */
  constructor(
    readonly config: SinkConfig,
    private readonly registry?: SchemaRegistryConfig,
  ) {
    this.codec = new SinkCodec(config, registry);
    this.keyIndexes = config.key.map((k) => config.columns.findIndex((c) => c.name === k));
    this.consistency = { LOCAL_QUORUM: consistencies.localQuorum, QUORUM: consistencies.quorum, EACH_QUORUM: consistencies.eachQuorum }[config.consistency ?? 'LOCAL_QUORUM'];
    const log = createLogger('sink');
    this.unmatched = new UnmatchedReporter(
      config.columns.map((c) => ({ name: c.name, field: [c.spec] })),
      (column, line) => log.warn({ column, sink: config.name }, line),
      (column) => this.unmatchedCount?.inc({ column }),
    );
    this.lookup = this.codec.lookup;
    this.name = config.name;
    this.topic = config.topic;
    this.keysStayOnPartition = config.mode === 'upsert';
    // What changes what a record becomes: a worker with another mapping refuses (EO_JOB_CONFIG_MISMATCH).
    // The formats only when not JSON, so a JSON sink's stored settings are what they always were.
    this.settings = {
      table: config.table,
      mode: config.mode,
      key: config.key.join(','),
      columns: JSON.stringify(config.columns.map((c) => [c.name, cqlTypeName(c.type), sourceSetting(c), c.required, canonical(c.default), ...(c.onNull === 'unset' ? ['unset'] : [])])),
      ...(config.format === 'json' ? {} : { format: config.format }),
      ...(config.mode === 'upsert' && config.keyFormat !== 'json' ? { keyFormat: config.keyFormat } : {}),
      ...(config.where === undefined ? {} : { where: JSON.stringify(predicateSetting(config.where)) }),
      ...(config.onUnknown === 'quarantine' ? { onUnknown: 'quarantine' } : {}),
      ...(config.ttl === undefined ? {} : 'seconds' in config.ttl ? { ttl: `${config.ttl.seconds}s` } : { ttlField: settingOf(config.ttl.field) }),
    };
    this.migrations = [{ version: 1, name: config.table, cql: createTableCql(config) }];
    this.tables = [config.table];
    const codec = this.codec;
    // Which columns' fields some record of this audit had (src/sink/unmatched-columns.ts): one that
    // none had stored null for every row, which `verify --job` says under its report.
    const matched = new Set<number>();
    let rows = 0;
    this.audit = {
      table: config.table,
      mode: config.mode,
      keyColumns: config.mode === 'log' ? ['partition', 'offset'] : config.key,
      columns: config.columns.map((c) => c.name).filter((c) => !config.key.includes(c)),
      writeTimestamp: config.mode === 'upsert' ? (offset) => offset : undefined,
      expect: (record) => {
        const d = codec.decode(record);
        if (d.ok && d.value.kind === 'row') {
          rows++;
          const absent = new Set(d.value.absent);
          for (let i = 0; i < config.columns.length; i++) if (!absent.has(i)) matched.add(i);
        }
        return codec.expect(record, d);
      },
      notes: () =>
        rows === 0
          ? []
          : config.columns.flatMap((c, i) =>
              matched.has(i) ? [] : [`column ${c.name}: field ${c.spec} matched none of the ${rows.toLocaleString('en-US')} records checked; every row stores null for it (check the column's field path)`],
            ),
      ...this.samples(config, registry),
    } as JobAudit;
  }

  decode(record: SourceRecord): Decoded<SinkRow> {
    return this.codec.decode(record);
  }

  /**
   * This sink with the columns of the job's stored settings, when its columns are derived and the
   * registry's latest schema now gives others (a newer version added fields): `verify --job` judges
   * with the columns the workers run with, which derived theirs when they started. Otherwise itself.
   */
  withStoredColumns(stored: Readonly<Record<string, unknown>>): SinkJob {
    const columns = stored['columns'];
    if (!this.config.derived || typeof columns !== 'string' || columns === this.settings['columns']) return this;
    let list: unknown[][];
    try {
      list = JSON.parse(columns) as unknown[][];
    } catch {
      return this;
    }
    // Derived columns read the value's fields, never required, never unset: anything else is no derived set.
    if (!Array.isArray(list) || !list.every((c) => Array.isArray(c) && c.length === 5 && typeof c[0] === 'string' && typeof c[1] === 'string' && typeof c[2] === 'string' && !/^(key|header):|^\$/.test(c[2]) && c[3] === false)) return this;
    const raw = JSON.parse(this.config.source) as Record<string, unknown>;
    const spec = Object.fromEntries(list.map(([name, type, field, , dflt]) => [name, { type, ...(field === name ? {} : { field: valueFieldSpec(field as string) }), ...(dflt === null || dflt === undefined ? {} : { default: dflt }) }]));
    const config = sinkConfig({ ...raw, columns: spec }, `sink ${this.config.name} (the columns stored with the job)`, true);
    return new SinkJob(Object.freeze({ ...config, derived: true }), this.registry);
  }

  /**
   * The audit's samples (`chaos --job`): JSON, or Avro under a schema made from the columns and
   * registered for the topic first (src/sink/sample-avro.ts). Protobuf and JSON Schema sinks can be
   * verified, not sampled.
   */
  private samples(config: SinkConfig, registry: SchemaRegistryConfig | undefined): Pick<JobAudit, 'sample' | 'prepareSample'> {
    // The samples are values (and keys) only: columns read from headers, metadata or the key are not sampled.
    if (config.columns.some((c) => c.source !== 'value')) return {};
    if (config.format === 'json' && (config.mode === 'log' || config.keyFormat === 'json')) return { sample: (o) => sampleRecords(config, o) };
    const avroKey = config.mode === 'upsert' && config.keyFormat === 'avro' && config.key.length === 1;
    if (config.format !== 'avro' || registry === undefined || (config.mode === 'upsert' && config.keyFormat !== 'json' && !avroKey)) return {};
    let ids: AvroSampleIds | undefined;
    let avro: typeof import('./sample-avro.js') | undefined;
    return {
      prepareSample: async () => {
        avro = await import('./sample-avro.js');
        const { sampleKeySchema, sampleValueSchema } = avro;
        const r = new SchemaRegistry(registry);
        ids = { value: await r.register(valueSubject(config.topic), 'AVRO', JSON.stringify(sampleValueSchema(config))) };
        if (avroKey) ids.key = await r.register(`${config.topic}-key`, 'AVRO', JSON.stringify(sampleKeySchema(config)));
      },
      sample: (o) => {
        if (ids === undefined || avro === undefined) throw new Error('prepareSample() must run before sample()');
        return avro.sampleAvroRecords(config, ids, o);
      },
    };
  }

  async open(context: JobContext): Promise<void> {
    this.session = context.session;
    this.keyspace = context.keyspace;
    if (context.metrics !== undefined) {
      const name = 'exactlyonce_sink_unmatched_columns_total';
      this.unmatchedCount =
        (context.metrics.getSingleMetric(name) as Counter<'column'> | undefined) ??
        new Counter({ name, help: "Batches in which a column's field path matched no record (it stored null for each: check the path)", labelNames: ['column'], registers: [context.metrics] });
      const filtered = 'exactlyonce_sink_filtered_total';
      this.filteredCount =
        (context.metrics.getSingleMetric(filtered) as Counter | undefined) ??
        new Counter({ name: filtered, help: "Records the sink's where: left out (no row; the checkpoint passes them; counted again when a batch is written again)", registers: [context.metrics] });
      const unknown = 'exactlyonce_sink_unknown_fields_total';
      this.unknownCount =
        (context.metrics.getSingleMetric(unknown) as Counter<'field'> | undefined) ??
        new Counter({ name: unknown, help: "Fields of stored records that no column stores: a newer schema version's, with columns derived from an older one (onUnknown: ignore; run schema apply --job and restart; counted again when a batch is written again)", labelNames: ['field'], registers: [context.metrics] });
      const expired = 'exactlyonce_sink_expired_total';
      this.expiredCount =
        (context.metrics.getSingleMetric(expired) as Counter | undefined) ??
        new Counter({ name: expired, help: 'Records not written because their TTL had passed when their batch was written (record timestamp + TTL; counted again when a batch is written again)', registers: [context.metrics] });
    }
    const { config } = this;
    const r = await context.session.execute('SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [context.keyspace, config.table], { prepare: true });
    const have = new Set(r.rows.map((row) => row['column_name'] as string));
    const want = [...(config.mode === 'log' ? ['partition', 'offset'] : []), ...config.columns.map((c) => c.name)];
    const missing = want.filter((c) => !have.has(c));
    if (missing.length > 0) {
      throw new ExactlyOnceError(
        'EO_SINK_TABLE_INVALID',
        have.size === 0
          ? `table ${context.keyspace}.${config.table} does not exist; run \`exactlyonce schema apply --job <this config>\` (or create it with \`exactlyonce sink --config <file> --print-cql\`)`
          : `table ${context.keyspace}.${config.table} lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')} the sink writes`,
      );
    }
    if (config.mode === 'upsert') await this.checkNoWallClockWrites();
    this.statements = this.rowStatements(context.session, context.keyspace);
  }

  /** The row writes: log mode's insert; upsert's insert and delete. */
  private rowStatements(session: Client, keyspace: string): { insert: PreparedBatch; del?: PreparedBatch } {
    const { config } = this;
    const table = `${keyspace}.${config.table}`;
    const names = config.columns.map((c) => c.name).join(', ');
    const marks = config.columns.map(() => '?').join(', ');
    const ttl = config.ttl !== undefined;
    const statement = (cql: string) => new PreparedBatch(session, cql, this.consistency);
    return config.mode === 'log'
      ? { insert: statement(`INSERT INTO ${table} (partition, offset, ${names}) VALUES (?, ?, ${marks})${ttl ? ' USING TTL ?' : ''}`) }
      : {
          insert: statement(`INSERT INTO ${table} (${names}) VALUES (${marks}) USING TIMESTAMP ?${ttl ? ' AND TTL ?' : ''}`),
          del: statement(`DELETE FROM ${table} USING TIMESTAMP ? WHERE ${config.key.map((k) => `${k} = ?`).join(' AND ')}`),
        };
  }

  /** Rule 2 (see above), on a sample: a cell written at wall-clock time would win over every later record. */
  private async checkNoWallClockWrites(): Promise<void> {
    const { config } = this;
    // A scalar column (a collection's WRITETIME is one per element, and refused before Cassandra 5).
    const col = config.columns.find((c) => c.type.kind === 'scalar' && !config.key.includes(c.name))?.name;
    if (col === undefined) return;
    const r = await this.session!.execute(`SELECT ${config.key.join(', ')}, WRITETIME(${col}) AS wt FROM ${this.keyspace}.${config.table} LIMIT 1000`, [], { prepare: true });
    const foreign = r.rows.find((row) => row['wt'] !== null && BigInt(String(row['wt'])) >= WALL_CLOCK_FLOOR);
    if (foreign !== undefined) {
      throw new ExactlyOnceError(
        'EO_SINK_TABLE_INVALID',
        `table ${this.keyspace}.${config.table} holds a write at wall-clock time (${config.key.map((k) => `${k}=${String(foreign[k])}`).join(', ')}, ${col} written at ${String(foreign['wt'])} µs): ` +
          'an upsert sink writes USING TIMESTAMP <offset>, and such a write would win over every later record of its key. Only the sink may write this table; truncate it and let the sink replay the topic.',
      );
    }
  }

  async write(partition: number, all: readonly DecodedRecord<SinkRow>[], signal: AbortSignal): Promise<void> {
    const records = this.config.where === undefined ? all : all.filter((r) => r.value.kind !== 'skip');
    if (records.length < all.length) this.filteredCount?.inc(all.length - records.length);
    this.unmatched.batch(partition, records.map((r) => r.value), records.length);
    if (this.unknownCount !== undefined) for (const r of records) if (r.value.kind === 'row' && r.value.unknown !== undefined) for (const f of r.value.unknown) this.unknownCount.inc({ field: f });
    if (records.length === 0) return;
    if (this.config.mode === 'log') return this.writeLog(partition, records);
    return this.writeUpsert(records, signal);
  }

  /** Log mode: rows keyed by (partition, offset), values a pure function of the record: a replay rewrites them. */
  private async writeLog(partition: number, all: readonly DecodedRecord<SinkRow>[]): Promise<void> {
    const { config } = this;
    const ttl = config.ttl !== undefined;
    // A TTL: each row expires at its record's time + TTL whenever it is (re)written; one past it is not written.
    const now = Date.now();
    const left = new Map<DecodedRecord<SinkRow>, number>();
    const records = !ttl
      ? all
      : all.filter((r) => {
          const t = ttlLeft((r.value as { expiresAtMs: number }).expiresAtMs, now);
          left.set(r, t);
          return t > 0;
        });
    if (records.length < all.length) this.expiredCount?.inc(all.length - records.length);
    const insert = this.statements!.insert;
    const b = await insert.bound();
    const w = b.writers;
    const n = config.columns.length;
    const routing = [int32(partition)];
    // Unlogged batches of one Cassandra partition each (applied atomically), cut by rows and by bytes.
    // A row's size is its values' as bound (a record's may be far smaller: a decimal 1e1000 spells out
    // 1000 digits), and each row is below MAX_ROW_BYTES, so a batch stays below the 16 MiB a mutation
    // may take with Cassandra's default commit log (src/sink/store-limits.ts).
    const batches = cutBatches(records, ROWS_PER_BATCH, BATCH_BYTES, ({ value }) => (value as { bytes: number }).bytes + 32);
    await Promise.all(
      batches.map((batch) => {
        const rows = new BatchRows(b.queryId, w.length, 64, batch.length);
        for (const r of batch) {
          const values = (r.value as { values: unknown[] }).values;
          rows.row();
          rows.int32(partition);
          const offset = r.record.offset;
          if (typeof offset === 'bigint') rows.int64(offset);
          else rows.int64FromNumber(offset);
          for (let i = 0; i < n; i++) w[2 + i]!(rows, values[i]);
          if (ttl) rows.int32(left.get(r)!);
        }
        return insert.send(b, rows, routing);
      }),
    );
  }

  /**
   * Upsert mode: per key only the batch's last record is written (an older one would lose to it anyway),
   * `USING TIMESTAMP <offset>` so that the highest offset wins whatever order writes land in. A key is a
   * Cassandra partition: its writes are one mutation, and keys on the same replicas share an unlogged
   * batch (its partitions are applied independently: the checkpoint follows them all, and a batch
   * written again changes nothing), encoded as log mode's rows are.
   */
  private async writeUpsert(records: readonly DecodedRecord<SinkRow>[], signal: AbortSignal): Promise<void> {
    const { config } = this;
    // With unset cells a key's row is the merge of its records: each is written (at its own offset,
    // so the cells each record set win in offset order whatever order the writes land in).
    const all = config.columns.some((c) => c.onNull === 'unset');
    const byKey = new Map<string, DecodedRecord<SinkRow>[]>();
    for (const r of records) {
      const k = keyText(r.value.key);
      const list = byKey.get(k);
      if (list === undefined) byKey.set(k, [r]);
      else if (all) list.push(r);
      else list[0] = r;
    }
    const ttl = config.ttl !== undefined;
    // A TTL: the row expires at its record's time + TTL whenever it is (re)written. A record already past
    // it deletes the key at its offset instead: the row its record stands for has expired, and an older
    // record's row (with a later expiry) must not show through.
    const now = Date.now();
    const left = (w: DecodedRecord<SinkRow>) => (ttl && w.value.kind === 'row' ? ttlLeft(w.value.expiresAtMs!, now) : 1);
    const { insert, del } = this.statements!;
    const [ins, dl] = await Promise.all([insert.bound(), del!.bound()]);
    const n = config.columns.length;
    const keyAt = this.keyIndexes;
    const routingOf = (key: unknown[]) => {
      const routing: unknown[] = new Array(n).fill(null);
      for (let c = 0; c < keyAt.length; c++) routing[keyAt[c]!] = key[c];
      return routing;
    };
    // A key's records are one Cassandra partition: one mutation when cut no further (by rows and bytes,
    // as log mode's batches). Keys of one replica set then share a batch, at most UPSERT_KEYS_PER_BATCH
    // keys and UPSERT_BATCH_BYTES: the coordinator holds them all, and Cassandra neither warns nor refuses.
    const bytesOf = (r: DecodedRecord<SinkRow>) => (r.value.kind === 'row' ? r.value.bytes : 16) + 32;
    const pieces = [...byKey.values()].flatMap((group) => cutBatches(group, ROWS_PER_BATCH, BATCH_BYTES, bytesOf));
    const sets = await Promise.all(pieces.map((p) => insert.replicaSet(ins, routingOf(p[0]!.value.key))));
    const bySet = new Map<string, DecodedRecord<SinkRow>[][]>();
    for (let i = 0; i < pieces.length; i++) {
      const list = bySet.get(sets[i]!);
      if (list === undefined) bySet.set(sets[i]!, [pieces[i]!]);
      else list.push(pieces[i]!);
    }
    const batches: DecodedRecord<SinkRow>[][][] = [];
    for (const list of bySet.values()) {
      let batch: DecodedRecord<SinkRow>[][] = [];
      let bytes = 0;
      for (const piece of list) {
        const size = piece.reduce((a, r) => a + bytesOf(r), 0);
        if (batch.length > 0 && (batch.length >= UPSERT_KEYS_PER_BATCH || bytes + size > UPSERT_BATCH_BYTES)) {
          batches.push(batch);
          batch = [];
          bytes = 0;
        }
        batch.push(piece);
        bytes += size;
      }
      if (batch.length > 0) batches.push(batch);
    }
    let expired = 0;
    const sendBatch = (batch: DecodedRecord<SinkRow>[][]) => {
      const rows = new BatchRows(ins.queryId, ins.writers.length, 64, batch.reduce((a, p) => a + p.length, 0));
      for (const piece of batch) {
        for (const w of piece) {
          const offset = toLong(w.record.offset);
          const t = left(w);
          if (w.value.kind === 'row' && t > 0) {
            const values = w.value.values;
            rows.row();
            for (let c = 0; c < n; c++) ins.writers[c]!(rows, values[c]);
            ins.writers[n]!(rows, offset);
            if (ttl) rows.int32(t);
          } else {
            if (t <= 0) expired++;
            rows.rowOf(dl.queryId, dl.writers.length);
            dl.writers[0]!(rows, offset);
            const key = w.value.key;
            for (let c = 0; c < key.length; c++) dl.writers[1 + c]!(rows, key[c]);
          }
        }
      }
      return insert.send(ins, rows, routingOf(batch[0]![0]!.value.key));
    };
    for (let i = 0; i < batches.length; i += UPSERT_CONCURRENCY) {
      signal.throwIfAborted();
      await Promise.all(batches.slice(i, i + UPSERT_CONCURRENCY).map(sendBatch));
    }
    if (expired > 0) this.expiredCount?.inc(expired);
  }
}
