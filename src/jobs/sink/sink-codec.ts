/**
 * What a sink record becomes (src/jobs/sink/sink-job.ts writes it): the record's value (and key, headers,
 * metadata) decoded by the config's format and mapped to the columns, converted to their CQL types,
 * or the reason it is quarantined. A pure function of the record, so a replay, `verify --job` and a
 * zombie all see the same row.
 */
import { LosslessNumber } from 'lossless-json';
import { toLong } from '../../cassandra/session.js';
import type { SchemaRegistryConfig } from '../../config.js';
import { createDecoder, decoderLookup, isRegistryFormat, schemaCache, SchemaNotFetched, type Decoder } from '../../formats/decoder.js';
import type { Expectation } from '../../engine/job-audit.js';
import type { Decoded, DecodeLookup, SourceRecord } from '../../engine/job.js';
import { ExactlyOnceError } from '../../errors.js';
import { canonical, scalarFromNumber } from './cql-types.js';
import { canonicalKeyText } from './key-encoding.js';
import { columnValue, predicateValue, sourceValue, UNSET, type KeyView } from './column-values.js';
import { FALSE, FlatPicker, NUMBER, STRING, TRUE } from '../../formats/flat-json.js';
import { holds, predicateFields } from './filter.js';
import { change, unwrapSchema } from './debezium.js';
import { deriveColumns } from './derive-columns.js';
import { field, isRecord, parseObject } from './record-fields.js';
import { RecordKeys, sameKey } from './record-key.js';
import { ttlSeconds } from './row-ttl.js';
import { versionOf } from './row-version.js';
import type { SinkColumn, SinkConfig } from './sink-config.js';
import type { ColumnSource } from './column-source.js';
import { refusedKey, rowBytes } from './store-limits.js';
import { inactiveColumns, type ColumnsFrom } from './column-eras.js';

/** What one record becomes. `values` follow `config.columns`; `key` follows `config.key`. */
export type SinkRow =
  | { kind: 'row'; key: unknown[]; values: unknown[]; bytes: number; absent: number[]; expiresAtMs?: number; unknown?: string[]; version?: number }
  | { kind: 'delete'; key: unknown[]; version?: number }
  /**
   * Nothing is written (the checkpoint passes it): filtered by the config's `where`, or (`tombstone`)
   * Debezium's tombstone after a delete in a sink ordered by a version the tombstone lacks (the
   * change event before it deleted the key).
   */
  | { kind: 'skip'; key: unknown[]; tombstone?: true };

/** The value document the flat path never builds (its columns of other sources do not read it). */
const NO_DOC: Record<string, unknown> = Object.freeze({});
/** No column added after the record: one set for every such record. */
const NONE_INACTIVE: ReadonlySet<string> = new Set();
/** No column absent: one array for every such row (never written to). */
const NONE_ABSENT: number[] = Object.freeze([]) as unknown as number[];

const bad = (reason: string, detail: string): Decoded<SinkRow> => ({ ok: false, reason, detail });
/** The column a version or TTL field is read as (a number, or a timestamp's text). */
const numberColumn = (name: string, src: ColumnSource): SinkColumn => ({ name, type: { kind: 'scalar', name: 'bigint' }, source: src.source, field: src.path, spec: src.spec, required: false, default: undefined, onNull: 'null' });

export class SinkCodec {
  private readonly keyColumns: SinkColumn[];
  /** The columns, a key's required (a key column is never null). */
  private readonly requiredColumns: SinkColumn[];
  /** Some column reads the record key (key, key.x). */
  private readonly readsKey: boolean;
  /** Some column leaves a missing field unset (no cell), or may be inactive (`columnsFrom`). */
  private unsets: boolean;
  /** The value's and (for a registry key format) the key's decoders; undefined: JSON, decoded here. */
  private readonly values: Decoder | undefined;
  private readonly keys: Decoder | undefined;
  /** The record key's readers (the key columns, and the key as the column sources see it). */
  private readonly recordKeys: RecordKeys;
  /** Fetches a batch's schemas before it is decoded (registry formats only). */
  readonly lookup: DecodeLookup | undefined;
  /** Derived columns: the schemas' fields no column stores, by schema id (see `unknownFields`). */
  private readonly unknownBySchema = new Map<number, string[]>();
  /** Derived columns: the fields a column would be derived for, by schema id. */
  private readonly fieldsBySchema = new Map<number, string[]>();
  private readonly cache: ReturnType<typeof schemaCache> | undefined;
  /** `version:` read as a column of its source (made on first use). */
  private versionColumn: SinkColumn | undefined;
  /**
   * JSON values whose value columns are all top-level fields, with no envelope, filter or TTL
   * field: the columns' members are picked out of a flat object without building it (`flatRow`).
   */
  private readonly flat: FlatPicker | undefined;
  /** The flat path's picked member of each top-level value field the `where:` reads. */
  private readonly whereAt = new Map<string, number>();
  /** The flat path's picked member of a `ttlField:` that is a top-level value field. */
  private readonly ttlAt: number = -1;

  /**
   * `registry`: where the schemas are, for a registry format (the connection's --schema-registry-url).
   * `columnsFrom`: columns added after the job first ran, and the offsets they are stored from
   * (src/jobs/sink/column-eras.ts): a record below its partition's is decoded as the columns before.
   */
  constructor(
    readonly config: SinkConfig,
    registry?: SchemaRegistryConfig,
    private columnsFrom: ColumnsFrom = new Map(),
  ) {
    this.keyColumns = config.key.map((k) => config.columns.find((c) => c.name === k)!);
    this.requiredColumns = config.columns.map((c) => (config.key.includes(c.name) ? { ...c, required: true } : c));
    this.readsKey = config.columns.some((c) => c.source === 'key');
    this.unsets = config.columns.some((c) => c.onNull === 'unset') || columnsFrom.size > 0;
    const keyDecoded = config.mode === 'upsert' || this.readsKey;
    const needs = isRegistryFormat(config.format) || (keyDecoded && isRegistryFormat(config.keyFormat));
    if (needs && registry === undefined) throw new ExactlyOnceError('EO_CONFIG_INVALID', `sink ${config.name}: format ${config.format} needs a Schema Registry (--schema-registry-url)`);
    const cache = needs ? schemaCache(registry!) : undefined;
    this.cache = cache;
    this.values = isRegistryFormat(config.format) ? createDecoder(config.format, cache) : undefined;
    this.keys = keyDecoded && isRegistryFormat(config.keyFormat) ? createDecoder(config.keyFormat, cache) : undefined;
    this.recordKeys = new RecordKeys(this.keyColumns, this.keys);
    const flatColumns = config.columns.every((c) => c.source !== 'value' || c.field.length === 1);
    // A version from the value is picked as one more member (a top-level one).
    const flatVersion = config.version === undefined || config.version.source !== 'value' || config.version.path.length === 1;
    // So is each top-level value field a `where:` reads.
    const whereFields = config.where === undefined ? [] : predicateFields(config.where).map((f) => f.field);
    const flatWhere = whereFields.every((f) => f.source !== 'value' || f.path.length === 1);
    // And a TTL's.
    const flatTtl = config.ttl === undefined || 'seconds' in config.ttl || config.ttl.field.source !== 'value' || config.ttl.field.path.length === 1;
    const plain = config.envelope === undefined && flatWhere && flatVersion && flatTtl && columnsFrom.size === 0;
    const members = this.requiredColumns.map((c) => (c.source === 'value' ? c.field[0]! : ''));
    if (config.version?.source === 'value') members.push(config.version.path[0]!);
    for (const f of whereFields) {
      if (f.source === 'value' && !this.whereAt.has(f.path[0]!)) this.whereAt.set(f.path[0]!, members.push(f.path[0]!) - 1);
    }
    if (config.ttl !== undefined && 'field' in config.ttl && config.ttl.field.source === 'value') this.ttlAt = members.push(config.ttl.field.path[0]!) - 1;
    this.flat = this.values === undefined && flatColumns && plain ? new FlatPicker(members) : undefined;
    this.lookup = decoderLookup({ ...(this.values === undefined ? {} : { value: this.values }), ...(this.keys === undefined ? {} : { key: this.keys }) });
  }


  /**
   * The columns added after the job first ran, as stored with it (a worker learns them once connected,
   * src/jobs/sink/sink-job.ts): the same codec, so the schemas its lookup fetched stay its own. False,
   * and nothing changed, for a flat JSON codec (added columns are derived ones, of a registry format:
   * such a config's settings differ from the job's anyway).
   */
  useColumnsFrom(from: ColumnsFrom): boolean {
    if (this.flat !== undefined && from.size > 0) return false;
    this.columnsFrom = from;
    this.unsets = this.config.columns.some((c) => c.onNull === 'unset') || from.size > 0;
    return true;
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
  private unknownFields(schemaId: number | undefined, inactive: ReadonlySet<string>): string[] {
    if (!this.config.derived || schemaId === undefined || this.cache === undefined) return [];
    let unknown = inactive.size === 0 ? this.unknownBySchema.get(schemaId) : undefined;
    if (unknown === undefined) {
      let fields = this.fieldsBySchema.get(schemaId);
      if (fields === undefined) {
        const schema = this.cache.get(schemaId);
        if (schema === undefined) return []; // not fetched: the decode above would have failed
        fields = deriveColumns(schema).columns.map((c) => c.field);
        this.fieldsBySchema.set(schemaId, fields);
      }
      // The columns a record below its partition's switch was stored with lack the added ones (column-eras.ts).
      const stored = new Set(this.config.columns.filter((c) => c.source === 'value' && !inactive.has(c.name)).map((c) => c.field.join('.')));
      unknown = fields.filter((f) => !stored.has(f));
      if (inactive.size === 0) this.unknownBySchema.set(schemaId, unknown);
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
      const k = config.envelope === 'debezium' ? this.recordKeys.debeziumKey(record.key) : this.recordKeys.kafkaKey(record.key);
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
      if (record.value === null) {
        if (config.version === undefined) return { ok: true, value: { kind: 'delete', key } };
        if (config.version.source === 'value') {
          // Debezium follows a delete's change event with a tombstone; the event deleted the key at its version.
          if (config.envelope === 'debezium') return { ok: true, value: { kind: 'skip', key, tombstone: true } };
          return bad('bad_version', `a tombstone (a record without a value) has no version ${config.version.spec} to order its delete by; with tombstones, read the version from a header or $timestamp`);
        }
        const v = this.version(record, NO_DOC, () => this.recordKeys.view(record.key));
        return v.ok ? { ok: true, value: { kind: 'delete', key, version: v.version } } : bad('bad_version', v.detail);
      }
    } else if (record.value === null) {
      return bad('null_value', `a record without a value (a tombstone) has ${config.mode === 'log' ? 'no row in a log-mode table' : 'nothing to aggregate'}`);
    }
    if (this.flat !== undefined) {
      const row = this.flatRow(record, key);
      if (row !== undefined) return row;
    }
    const v = this.valueDoc(record.value!);
    if (!v.ok) return bad(v.reason, v.detail);
    let doc = v.doc;
    // With Debezium's envelope a version's value path is read from the change event, not the row.
    const envelope = doc;
    if (config.envelope === 'debezium') {
      const c = change(doc);
      if (!c.ok) return bad(c.reason, c.detail);
      if (c.op === 'd' && config.mode === 'upsert') {
        if (config.version === undefined) return { ok: true, value: { kind: 'delete', key } };
        // A version of the row (after.updated_at) is, for a delete, the deleted row's: read from before.
        const event = unwrapSchema(doc) as Record<string, unknown>;
        const ofRow = config.version.source === 'value' && config.version.path[0] === 'after';
        const v = this.version(record, ofRow ? { ...event, after: event['before'] } : event, () => this.recordKeys.view(record.key));
        if (v.ok) return { ok: true, value: { kind: 'delete', key, version: v.version } };
        return bad('bad_version', ofRow ? `${v.detail} (a delete reads it from before, the deleted row: Postgres writes the whole row there only with REPLICA IDENTITY FULL)` : v.detail);
      }
      if (c.row === null) return bad('bad_envelope', 'op d without before: a log-mode row needs the deleted row (Postgres: REPLICA IDENTITY FULL, or an upsert sink)');
      doc = c.row;
    }
    let keyView: KeyView | undefined;
    const keyOf = () => (keyView ??= this.recordKeys.view(record.key));
    if (config.where !== undefined && !holds(config.where, (f) => predicateValue(f, record, doc, keyOf))) return { ok: true, value: { kind: 'skip', key } };
    // Columns added after this record's partition was stored up to it are not its (column-eras.ts).
    const names = this.columnsFrom.size === 0 ? undefined : inactiveColumns(this.columnsFrom, record.partition, record.offset);
    const inactive = names === undefined || names.length === 0 ? NONE_INACTIVE : new Set(names);
    // A field of a newer schema version than the columns were derived from: never dropped without a count.
    const unknown = this.unknownFields(v.schemaId, inactive);
    if (unknown.length > 0 && config.onUnknown === 'quarantine') {
      return bad('unknown_field', `schema id ${v.schemaId} has ${unknown.length === 1 ? 'a field' : 'fields'} no column stores: ${unknown.join(', ')} (the columns were derived from an older version; run \`exactlyonce schema apply --job <config>\` to add them; onUnknown: quarantine)`);
    }
    const values: unknown[] = [];
    // Columns whose field path matched nothing in this record (src/jobs/sink/unmatched-columns.ts).
    const absent: number[] = [];
    const cols = this.requiredColumns;
    for (let i = 0; i < cols.length; i++) {
      const col = cols[i]!;
      if (inactive.has(col.name)) {
        values.push(UNSET);
        continue;
      }
      let rawValue: unknown;
      if (col.source === 'value') rawValue = field(doc, col.field);
      else {
        const raw = sourceValue(col, record, doc, keyOf, this.keys !== undefined);
        if (!raw.ok) return bad(raw.reason, raw.detail);
        rawValue = raw.value;
      }
      if (rawValue === undefined) absent.push(values.length);
      const v = columnValue(col, rawValue);
      if (!v.ok) return bad(v.reason, v.detail);
      values.push(v.value);
    }
    const ttl = config.ttl;
    const seconds = (): { ok: true; seconds: number } | { ok: false; detail: string } => {
      if (ttl === undefined || 'seconds' in ttl) return { ok: true, seconds: ttl?.seconds ?? 0 };
      const src = ttl.field;
      const raw = sourceValue(numberColumn('ttlField', src), record, doc, keyOf, this.keys !== undefined);
      return raw.ok ? ttlSeconds(raw.value, src.spec) : { ok: false, detail: raw.detail };
    };
    const d = this.row(record, key, values, absent, unknown, seconds);
    if (config.version === undefined || !d.ok || d.value.kind !== 'row') return d;
    const version = this.version(record, config.envelope === 'debezium' ? (unwrapSchema(envelope) as Record<string, unknown>) : doc, keyOf);
    if (!version.ok) return bad('bad_version', version.detail);
    d.value.version = version.version; // (the row was made here, for this record)
    return d;
  }

  /** A record's version (`version:`, src/jobs/sink/row-version.ts), a value path read from `doc`. */
  private version(record: SourceRecord, doc: Record<string, unknown>, keyOf: () => KeyView): ReturnType<typeof versionOf> {
    const raw = sourceValue((this.versionColumn ??= numberColumn('version', this.config.version!)), record, doc, keyOf, this.keys !== undefined);
    return raw.ok ? versionOf(raw.value, this.config.version!.spec) : { ok: false, detail: raw.detail };
  }

  /**
   * The row of a flat JSON value, its columns' members picked by name (FlatPicker); undefined where
   * anything is unusual (not flat, a possible duplicate key, a value a column refuses), and the general
   * path then decides, so both give the same row or the same reason (test/unit/sink-flat.test.ts).
   */
  private flatRow(record: SourceRecord, key: unknown[]): Decoded<SinkRow> | undefined {
    const text = record.value!.toString('utf8');
    const picker = this.flat!;
    if (!picker.pick(text)) return undefined;
    const t = picker.tokens;
    let keyView: KeyView | undefined;
    const keyOf = () => (keyView ??= this.recordKeys.view(record.key));
    // A member as lossless-json's parse gives it (flat-json.ts), or undefined when absent.
    const member = (m: number): unknown => {
      if (m < 0) return undefined;
      const kind = t.kind[m];
      const slice = kind === STRING || kind === NUMBER ? text.slice(t.valueStart[m], t.valueEnd[m]) : '';
      return kind === STRING ? slice : kind === NUMBER ? new LosslessNumber(slice) : kind === TRUE ? true : kind === FALSE ? false : null;
    };
    const where = this.config.where;
    if (where !== undefined && !holds(where, (f) => (f.source === 'value' ? { v: member(picker.at[this.whereAt.get(f.path[0]!)!]!), textual: false } : predicateValue(f, record, NO_DOC, keyOf)))) {
      return { ok: true, value: { kind: 'skip', key } };
    }
    const values: unknown[] = [];
    // Made when a column is absent (most records have none).
    let absent = NONE_ABSENT;
    const cols = this.requiredColumns;
    for (let i = 0; i < cols.length; i++) {
      const col = cols[i]!;
      let v;
      if (col.source !== 'value') {
        // The key, a header or the metadata: read as the general path reads them (no value document).
        const raw = sourceValue(col, record, NO_DOC, keyOf, this.keys !== undefined);
        if (!raw.ok) return undefined;
        if (raw.value === undefined) (absent === NONE_ABSENT ? (absent = []) : absent).push(values.length);
        v = columnValue(col, raw.value);
      } else {
        const m = picker.at[i]!;
        const kind = m < 0 ? 0 : t.kind[m];
        if (kind === NUMBER) {
          if (col.type.kind !== 'scalar') return undefined;
          v = scalarFromNumber(col.type.name, text.slice(t.valueStart[m], t.valueEnd[m]));
        } else {
          if (m < 0) (absent === NONE_ABSENT ? (absent = []) : absent).push(values.length);
          v = columnValue(col, m < 0 ? undefined : kind === STRING ? text.slice(t.valueStart[m], t.valueEnd[m]) : kind === TRUE ? true : kind === FALSE ? false : null);
        }
      }
      if (!v.ok) return undefined;
      values.push(v.value);
    }
    const ttl = this.config.ttl;
    const seconds = (): { ok: true; seconds: number } | { ok: false; detail: string } => {
      if (ttl === undefined || 'seconds' in ttl) return { ok: true, seconds: ttl?.seconds ?? 0 };
      // (Read as the general path reads it.)
      if (ttl.field.source === 'value') return ttlSeconds(member(picker.at[this.ttlAt]!), ttl.field.spec);
      const raw = sourceValue(numberColumn('ttlField', ttl.field), record, NO_DOC, keyOf, this.keys !== undefined);
      return raw.ok ? ttlSeconds(raw.value, ttl.field.spec) : { ok: false, detail: raw.detail };
    };
    const d = this.row(record, key, values, absent, [], seconds);
    const version = this.config.version;
    if (version === undefined || !d.ok || d.value.kind !== 'row') return d;
    let v: ReturnType<typeof versionOf>;
    if (version.source === 'value') {
      // The version's member, read as the general path reads it from the parsed value.
      const m = picker.at[cols.length]!;
      const kind = m < 0 ? 0 : t.kind[m];
      const slice = m < 0 ? '' : text.slice(t.valueStart[m], t.valueEnd[m]);
      // (A number of digits alone reads as its text does: the same whole number, or the same refusal.)
      v = versionOf(m < 0 ? undefined : kind === NUMBER ? (/^\d+$/.test(slice) ? slice : new LosslessNumber(slice)) : kind === STRING ? slice : kind === TRUE ? true : kind === FALSE ? false : null, version.spec);
    } else v = this.version(record, NO_DOC, keyOf);
    if (!v.ok) return bad('bad_version', v.detail);
    d.value.version = v.version; // (the row was made here, for this record)
    return d;
  }

  /** A record's row from its column values: the key the value names checked, the row's size, its TTL. */
  private row(
    record: SourceRecord,
    key: unknown[],
    values: unknown[],
    absent: number[],
    unknown: string[],
    /** The TTL in seconds (asked only with a `ttl`, after the size: a record's first problem is its reason). */
    ttlOf: () => { ok: true; seconds: number } | { ok: false; detail: string },
  ): Decoded<SinkRow> {
    const { config } = this;
    if (config.mode === 'upsert') {
      const inValue = this.keyColumns.map((c) => values[config.columns.indexOf(c)]);
      if (!sameKey(inValue, key)) {
        return bad('key_mismatch', `the record key names ${JSON.stringify(canonical(key))}, the value ${JSON.stringify(canonical(inValue))}`);
      }
    }
    const size = this.columnsFrom.size > 0 && values.includes(UNSET) ? this.sizeBefore(values) : rowBytes(config.columns, this.unsets ? values.map((v) => (v === UNSET ? null : v)) : values);
    if (size.refusal !== undefined) return bad(size.refusal.reason, size.refusal.detail);
    let expiresAtMs: number | undefined;
    if (config.ttl !== undefined) {
      const t = ttlOf();
      if (!t.ok) return bad('bad_ttl', t.detail);
      expiresAtMs = record.timestampMs + t.seconds * 1000;
    }
    return { ok: true, value: { kind: 'row', key, values, bytes: size.bytes, absent, ...(expiresAtMs === undefined ? {} : { expiresAtMs }), ...(unknown.length === 0 ? {} : { unknown }) } };
  }

  /**
   * A row's size as the columns before the switch measured it (src/jobs/sink/column-eras.ts): without the
   * columns added since, which are the only unset ones here (derived columns are never `onNull: unset`),
   * so that a row stored then is not refused as too large when read again.
   */
  private sizeBefore(values: unknown[]): ReturnType<typeof rowBytes> {
    const kept = values.map((v) => v !== UNSET);
    return rowBytes(this.config.columns.filter((_, i) => kept[i]), values.filter((_, i) => kept[i]));
  }

  /** What the record must produce (for `verify --job`). */
  expect(record: SourceRecord, d: Decoded<SinkRow> = this.decode(record)): Expectation {
    if (!d.ok) return { kind: 'quarantine', reason: d.reason };
    if (d.value.kind === 'skip') return { kind: 'none', why: d.value.tombstone === true ? 'tombstone' : 'filtered' };
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
    const version = d.value.version === undefined ? {} : { version: d.value.version };
    if (d.value.kind === 'delete') return { kind: 'delete', key, ...version };
    const values = d.value.values;
    const cols = config.columns.filter((c) => !config.key.includes(c.name));
    const unset = cols.filter((c) => values[config.columns.indexOf(c)] === UNSET).map((c) => c.name);
    return { kind: 'row', key, row: Object.fromEntries(cols.map((c) => [c.name, shown(values[config.columns.indexOf(c)])])), ...expires, ...(unset.length === 0 ? {} : { unset }), ...version };
  }
}
