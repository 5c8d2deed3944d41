/**
 * A sink's configuration file (`exactlyonce sink --config orders.yaml`, YAML or JSON), validated once:
 * unknown keys are refused and every problem names its key (`columns.total.type: …`).
 *
 *   name: orders                # the job's name (default: the table's)
 *   topic: shop.orders          # input topic
 *   format: avro                # the values: json (default), avro, protobuf or json-schema (Schema Registry)
 *   keyFormat: avro             # the keys, the same choices (default json: text, or a JSON object)
 *   table: orders               # target table in the keyspace
 *   mode: upsert                # log: one row per (partition, offset); upsert: one row per key
 *   key: [order_id]             # upsert: the key columns (the table's primary key)
 *   ttl: 7d                     # rows expire 7 days after their record's Kafka timestamp (s, m, h, d)
 *   # ttlField: header.ttl      # or each record's TTL in seconds, from any column source
 *   where: { field: value.status, in: [paid, shipped] }  # only these records (src/jobs/sink/filter.ts)
 *   consistency: QUORUM         # the row writes': LOCAL_QUORUM (default), QUORUM or EACH_QUORUM
 *   envelope: debezium          # the values are Debezium change events (src/jobs/sink/debezium.ts)
 *   version: value.updated_at   # upsert: a key's row is its record with the highest version (src/jobs/sink/row-version.ts)
 *   columns:
 *     order_id: { type: bigint, field: id }   # field: the JSON field (a.b for nested; default: the column's name)
 *     status: text                            # shorthand for { type: text }
 *     total: { type: decimal, required: true }
 *     currency: { type: text, default: EUR }  # used when the field is missing or null
 *     email: { type: text, onNull: unset }    # a missing or null field writes no cell (see below)
 *     shop: { type: text, field: key.shop }   # a field of the record key (key: the whole key)
 *     trace: { type: text, field: header.trace }       # a Kafka header, decoded as the column's type
 *     placed_at: { type: timestamp, field: $timestamp } # also $topic, $partition, $offset
 *
 * A column's `field` names where its value comes from, always a pure function of the record (a replay
 * writes the same row): `a.b` or `value.a.b` (the value's field), `key` or `key.x` (the record key's),
 * `header.<name>` (the header's bytes: text as UTF-8, numbers from their text, blob raw; one that does
 * not decode as the column's type is quarantined as bad_header), `$topic`, `$partition`, `$offset`,
 * `$timestamp`. `now()` and the like are refused. src/jobs/sink/column-source.ts has the details.
 *
 * `where` keeps the records its predicate holds for ({ field, equals | in | exists }, { not }, { all },
 * { any }, over any column source); the others are filtered: no row and no quarantine row, the
 * checkpoint passes them, exactlyonce_sink_filtered_total counts them, and `verify --job` recomputes
 * the predicate, so a row for a filtered offset is a violation. A record that cannot be decoded is
 * still quarantined; an upsert tombstone is never filtered (the delete applies).
 *
 * `consistency` is the row writes' level. Only quorums: the checkpoints are written and read at a
 * quorum, and a row write acknowledged by fewer replicas (ONE, ANY, LOCAL_ONE, TWO, THREE) may not be
 * seen by the read that trusts its checkpoint, so those are refused (ALL, SERIAL and LOCAL_SERIAL too).
 *
 * onNull says what a missing or null field writes: `null` (a null cell, a tombstone; the default for a
 * column without a default), `default` (its default; the default for a column with one) or `unset` (no
 * cell at all). In upsert mode an unset cell keeps the key's earlier value: the row is the merge of the
 * key's records in offset order (each cell from the last record that wrote it since the key's last
 * delete), which the sink writes record by record at each one's offset and `verify --job` recomputes;
 * a column no record it reads wrote (all of them earlier than a recorded proof, or deleted by
 * retention) is not judged. Deletes stay as they are: a tombstone record deletes the whole row.
 * `unset` with a TTL in upsert mode is refused (an unset cell would keep an earlier expiry).
 *
 * A TTL counts from the record's Kafka timestamp, not from when the row is written: every write (a
 * replay, a zombie's late one) is USING TTL of what is left, rounded up to the second, so a replay
 * never extends a row's life. A record already past it is not written (upsert: it deletes its key at
 * its offset, as the row it stands for has expired) and is counted in exactlyonce_sink_expired_total;
 * `verify --job` counts such records, and rows whose TTL passed since, as expired, not missing. A
 * ttlField that is missing, negative or not a whole number quarantines the record (bad_ttl).
 *
 * With a registry format `columns` may be left out: they are then derived from the latest schema
 * registered for the topic's values (subject `<topic>-value`; src/jobs/sink/derive-columns.ts). A field of a
 * newer version that no column stores is then ignored (stored without it, counted in
 * exactlyonce_sink_unknown_fields_total{field}) or quarantined (unknown_field), by `onUnknown`;
 * `schema apply --job` adds the new fields' columns (src/jobs/sink/evolve.ts).
 */
import { aggregateSpec, type AggregateSpec } from './aggregate-config.js';
import { readFileSync } from 'node:fs';
import { LosslessNumber } from 'lossless-json';
import { parse as parseYaml } from 'yaml';
import { ExactlyOnceError } from '../../errors.js';
import { FORMATS, isRegistryFormat, schemaCache, type Format } from '../../formats/decoder.js';
import type { SchemaRegistryConfig } from '../../config.js';
import { convert, cqlTypeName, parseCqlType, type CqlType } from './cql-types.js';
import { retry } from '../../engine/retry.js';
import { parseColumnSource, scalarKey, sourceTypeProblem, valueFieldSpec, type ColumnSource, type SourceKind } from './column-source.js';
import { parsePredicate, predicateFields, type Predicate } from './filter.js';
import { issueLines, sinkSchema, type WriteLevel } from './sink-config-keys.js';

/** The longest TTL Cassandra takes: 20 years, in seconds. */
export const MAX_TTL_SECONDS = 630_720_000;
const UNIT_SECONDS: Readonly<Record<string, number>> = { s: 1, m: 60, h: 3600, d: 86_400 };

export interface SinkColumn {
  readonly name: string;
  readonly type: CqlType;
  /** Where the value comes from: the value, the record key, a header or the record's metadata (src/jobs/sink/column-source.ts). */
  readonly source: SourceKind;
  /** The path within the source (`customer.id` → ['customer', 'id']; a header's name; a metadata name). */
  readonly field: readonly string[];
  /** The field as written in the config (`customer.id`, `key.id`, `header.trace`, `$offset`). */
  readonly spec: string;
  readonly required: boolean;
  /** The converted default, or undefined (then a missing field is stored as null). */
  readonly default: unknown;
  /** What a missing or null field writes: a null cell, the default, or no cell (unset). */
  readonly onNull: 'unset' | 'null' | 'default';
}

export interface SinkConfig {
  readonly name: string;
  readonly topic: string;
  readonly table: string;
  readonly mode: 'log' | 'upsert' | 'aggregate';
  /** How record values and keys are decoded (src/formats/decoder.ts). */
  readonly format: Format;
  readonly keyFormat: Format;
  /** The columns were derived from the registered schema (the config left them out). */
  readonly derived: boolean;
  /** Upsert: the key columns, in order (the table's partition key). Log: empty. */
  readonly key: readonly string[];
  readonly columns: readonly SinkColumn[];
  /** The row writes' consistency level (default LOCAL_QUORUM). */
  readonly consistency: WriteLevel;
  /** Only the records this holds for are stored (src/jobs/sink/filter.ts). */
  readonly where?: Predicate;
  /** Rows expire at record timestamp + TTL: a fixed TTL, or one read per record (in seconds) from a source. */
  readonly ttl?: { readonly seconds: number } | { readonly field: ColumnSource };
  /** Upsert: what orders a key's records instead of the offset (src/jobs/sink/row-version.ts). */
  readonly version?: ColumnSource;
  /** Derived columns: a field of a record's schema that no column stores is ignored (counted) or quarantined (unknown_field). */
  readonly onUnknown: 'ignore' | 'quarantine';
  /** The values are Debezium change events: the row is their `after` (or `before`), op d a delete. */
  readonly envelope?: 'debezium';
  /** Mode aggregate: the groups, windows and aggregates (src/jobs/sink/aggregate-config.ts). */
  readonly aggregate?: AggregateSpec;
  /** The validated file as given, for the job's stored settings. */
  readonly source: string;
}

/**
 * The types a key column may have: those whose record key has one canonical text (src/jobs/sink/key-encoding.ts).
 * Not double or float (1.0 and 1 are one value), nor blob, inet, date, time or collections (no spelling
 * rule for them yet).
 */
const KEY_TYPES: readonly string[] = ['text', 'int', 'bigint', 'smallint', 'tinyint', 'boolean', 'timestamp', 'uuid', 'timeuuid', 'decimal'];

/**
 * An upsert's JSON record key is exactly its key columns' canonical text (key-encoding.ts): a key
 * column's value itself, or the object of the key columns at their fields. A column, TTL, version or filter that
 * reads another field of the key (key.x) would quarantine every record, so it is refused here.
 */
function keyFieldProblems(key: readonly string[], columns: readonly SinkColumn[], ttl: SinkConfig['ttl'], version: ColumnSource | undefined, where: Predicate | undefined, problems: string[]): void {
  const keyCols = key.map((k) => columns.find((c) => c.name === k)).filter((c) => c !== undefined);
  if (keyCols.length !== key.length) return; // (refused above)
  const scalar = scalarKey(keyCols);
  const fields = scalar ? [] : keyCols.map((c) => c.field.join('.'));
  const what = scalar ? `the value of the key column ${keyCols[0]!.name} itself, which has no fields` : `the JSON object of the key columns' fields (${fields.join(', ')}), nothing else`;
  const check = (at: string, src: ColumnSource) => {
    if (src.source === 'key' && src.path.length > 0 && !fields.includes(src.path.join('.'))) {
      problems.push(`${at}: ${src.spec} is no field of the record key: an upsert's record key is ${what} (another spelling is quarantined, non_canonical_key); read the whole key with key, or the field from the value`);
    }
  };
  for (const col of columns) if (!key.includes(col.name)) check(`columns.${col.name}.field`, { source: col.source, path: col.field, spec: col.spec });
  if (ttl !== undefined && 'field' in ttl) check('ttlField', ttl.field);
  if (version !== undefined) check('version', version);
  // (A filter on such a field would leave out every record, or none, without a word.)
  for (const { field } of where === undefined ? [] : predicateFields(where)) check('where', field);
}

/** The fields of a Debezium change event (a version's value path with envelope: debezium names one first). */
const DEBEZIUM_FIELDS = ['source', 'ts_ms', 'after', 'before', 'op', 'transaction'];

/** Columns a log-mode table has already: the record's position. */
const LOG_COLUMNS = ['partition', 'offset'];

function invalid(where: string, lines: string[]): ExactlyOnceError {
  return new ExactlyOnceError('EO_CONFIG_INVALID', `${where}: ${lines.join('; ')}`);
}

/** Validates a parsed config (`where` names the file in errors). */
export function sinkConfig(raw: unknown, where = 'sink config', derived = false): SinkConfig {
  const parsed = sinkSchema.safeParse(raw);
  if (!parsed.success) {
    throw invalid(where, issueLines(parsed.error.issues, raw));
  }
  const c = parsed.data;
  const format = c.format ?? 'json';
  const keyFormat = c.keyFormat ?? 'json';
  if (c.columns === undefined) {
    throw invalid(where, [
      isRegistryFormat(format)
        ? 'columns: left out, they are derived from the registered schema: load this config with the registry (`exactlyonce sink --config <file> --print-cql` shows them)'
        : 'columns: expected the columns (only a Schema Registry format, avro, protobuf or json-schema, can derive them from the registered schema)',
    ]);
  }
  const problems: string[] = [];
  const columns: SinkColumn[] = Object.entries(c.columns).map(([name, spec]) => {
    const s = typeof spec === 'string' ? { type: spec } : spec;
    const type = parseCqlType(s.type)!;
    let dflt: unknown;
    if (s.default !== undefined && s.default !== null) {
      const d = convert(type, typeof s.default === 'number' ? toLossless(s.default) : s.default);
      if (d.ok) dflt = d.value;
      else problems.push(`columns.${name}.default: ${d.problem}`);
    }
    // Left out, the field is the value's field of the column's name (a column may be named key or value).
    const src = s.field === undefined ? { source: 'value' as const, path: [name], spec: name } : parseColumnSource(s.field);
    if (typeof src === 'string') problems.push(`columns.${name}.field: ${src}`);
    else {
      const wrong = sourceTypeProblem(src, type);
      if (wrong !== undefined) problems.push(`columns.${name}.field: ${wrong}`);
    }
    const source = typeof src === 'string' ? { source: 'value' as const, path: [name], spec: name } : src;
    const onNull = s.onNull ?? (s.default !== undefined && s.default !== null ? 'default' : 'null');
    if (s.onNull !== undefined) {
      if (s.required === true) problems.push(`columns.${name}.onNull: a required column quarantines a record whose field is missing or null (missing_field); onNull is for optional columns`);
      else if (onNull === 'default' && (s.default === undefined || s.default === null)) problems.push(`columns.${name}.onNull: default needs the column's default (default: …)`);
      else if (onNull !== 'default' && s.default !== undefined && s.default !== null) problems.push(`columns.${name}.default: a default is written only with onNull: default (this column has onNull: ${onNull})`);
    }
    return { name, type, source: source.source, field: source.path, spec: source.spec, required: s.required === true, default: dflt, onNull };
  });
  if (c.mode === 'log') {
    if (c.key !== undefined) problems.push('key: a log-mode table is keyed by (partition, offset); key is for mode upsert');
    for (const col of columns) if (LOG_COLUMNS.includes(col.name)) problems.push(`columns.${col.name}: the name is taken by the record's position in log mode (partition, offset)`);
  } else if (c.mode === 'aggregate') {
    if (c.key !== undefined) problems.push('key: an aggregate table is keyed by its groupBy columns (and window); key is for mode upsert');
    if (c.ttl !== undefined || c.ttlField !== undefined) problems.push(`${c.ttl !== undefined ? 'ttl' : 'ttlField'}: not for mode aggregate (an aggregate row holds many records; a TTL would drop their partials one by one)`);
    if (c.envelope !== undefined) problems.push('envelope: not for mode aggregate (a change event updates a row: aggregate its table with a log-mode sink of the changes)');
    for (const col of columns) if (col.onNull === 'unset') problems.push(`columns.${col.name}.onNull: unset is for upsert tables; an aggregate skips a null or missing value (count counts the record)`);
    if (derived) problems.push('columns: mode aggregate needs its columns listed (groupBy, window and aggregates name them; columns derived from the registered schema would grow under them)');
  } else {
    if (c.key === undefined) problems.push('key: mode upsert needs the key columns, e.g. key: [order_id]');
    for (const [i, k] of (c.key ?? []).entries()) {
      const col = columns.find((x) => x.name === k);
      if (col === undefined) problems.push(`key.${i}: ${k} is not one of the columns`);
      else if (col.type.kind !== 'scalar' || !KEY_TYPES.includes(col.type.name)) problems.push(`key.${i}: ${k} is a ${cqlTypeName(col.type)}; a key column is ${KEY_TYPES.join(', ')}`);
      else if (col.default !== undefined) problems.push(`columns.${k}.default: a key column has no default (a record without its key cannot be placed)`);
      else if (col.onNull !== 'null') problems.push(`columns.${k}.onNull: a key column is always written (a record without its key is quarantined)`);
      else if (col.source === 'key' && col.field.length === 0 && c.key!.length > 1) {
        problems.push(`columns.${k}.field: key reads the whole record key, which with ${c.key!.length} key columns is an object of them; name the key's field, key.${k}`);
      }
    }
    if (columns.length === (c.key ?? []).length) problems.push('columns: an upsert table needs at least one column besides the key');
  }
  if (c.mode === 'upsert' && (c.ttl !== undefined || c.ttlField !== undefined)) {
    for (const col of columns) {
      if (col.onNull === 'unset') problems.push(`columns.${col.name}.onNull: unset with a TTL in upsert mode is not supported (a cell left unset would keep an earlier record's expiry, which verify --job does not model); use null or default, or mode log`);
    }
  }
  let ttl: SinkConfig['ttl'];
  if (c.ttl !== undefined && c.ttlField !== undefined) problems.push('ttlField: give ttl (one TTL for every row) or ttlField (one per record), not both');
  else if (c.ttl !== undefined) {
    const seconds = Number(c.ttl.slice(0, -1)) * UNIT_SECONDS[c.ttl.slice(-1)]!;
    if (seconds > MAX_TTL_SECONDS) problems.push(`ttl: ${c.ttl} is longer than the 20 years (${MAX_TTL_SECONDS} s) Cassandra allows`);
    else ttl = { seconds };
  } else if (c.ttlField !== undefined) {
    const src = parseColumnSource(c.ttlField);
    if (typeof src === 'string') problems.push(`ttlField: ${src}`);
    else if (src.source === 'meta') problems.push(`ttlField: ${src.spec} is no number of seconds; name a field of the value, the key or a header`);
    else ttl = { field: src };
  }
  let version: ColumnSource | undefined;
  if (c.version !== undefined) {
    const src = parseColumnSource(c.version);
    if (c.mode !== 'upsert') problems.push(`version: orders an upsert table's records by key; mode ${c.mode} keeps ${c.mode === 'log' ? 'every record' : 'every record in its aggregates'}`);
    else if (typeof src === 'string') problems.push(`version: ${src}`);
    else if (src.source === 'meta' && src.path[0] !== 'timestamp') problems.push(`version: ${src.spec} does not order a key's records across partitions; name a field that grows per key (value.updated_at, a row version, a log position) or $timestamp`);
    else if (src.source === 'value' && /^ts_(us|ns)$/.test(src.path[src.path.length - 1]!)) problems.push(`version: ${src.spec} counts ${src.path[src.path.length - 1] === 'ts_us' ? 'micro' : 'nano'}seconds, above the 2^44 a version stays below (where wall-clock write times begin); use the milliseconds, ${[...src.path.slice(0, -1), 'ts_ms'].join('.')}`);
    else if (src.source === 'value' && c.envelope === 'debezium' && !DEBEZIUM_FIELDS.includes(src.path[0]!)) {
      problems.push(`version: ${src.spec}: with envelope: debezium a value path is read from the change event, whose fields are ${DEBEZIUM_FIELDS.join(', ')} (a field of the row: after.${src.path.join('.')})`);
    } else if (src.source === 'value' && c.envelope === 'debezium' && src.path[0] === 'before') {
      problems.push(`version: ${src.spec}: the row before a change does not order it; name the row's field as after.${src.path.slice(1).join('.')} (a delete, whose after is null, reads it from before)`);
    } else version = src;
    for (const col of columns) {
      if (col.onNull === 'unset') problems.push(`columns.${col.name}.onNull: unset with a version is not supported (a row would be the merge of its key's records in version order, which verify --job does not model); use null or default`);
    }
  }
  if (c.envelope !== undefined && derived) problems.push('envelope: debezium needs its columns listed (columns derived from the registered schema would be the envelope\'s: before, after, source, op)');
  if (c.onUnknown !== undefined && !derived) problems.push('onUnknown: only for columns derived from the registered schema (leave columns out); listed columns store what they name, and the other fields are not read');
  const filter = c.where === undefined ? undefined : parsePredicate(c.where, 'where', problems);
  if (c.mode === 'upsert' && keyFormat === 'json' && c.envelope === undefined) keyFieldProblems(c.key ?? [], columns, ttl, version, filter, problems);
  const aggregate = aggregateSpec(c, columns, problems);
  // A record without its group or its time belongs to no row: quarantined (missing_field), unless the column has a default.
  for (const i of [...(aggregate?.groupBy ?? []), ...(aggregate?.window === undefined ? [] : [aggregate.window.time])]) {
    if (columns[i]!.default === undefined) columns[i] = { ...columns[i]!, required: true };
  }
  if (problems.length > 0) throw invalid(where, problems);
  return Object.freeze({
    name: c.name ?? c.table,
    topic: c.topic,
    table: c.table,
    mode: c.mode,
    format,
    keyFormat,
    derived: false,
    key: c.key ?? [],
    columns,
    consistency: (c.consistency?.toUpperCase() ?? 'LOCAL_QUORUM') as WriteLevel,
    onUnknown: c.onUnknown ?? 'ignore',
    ...(ttl === undefined ? {} : { ttl }),
    ...(version === undefined ? {} : { version }),
    ...(filter === undefined ? {} : { where: filter }),
    ...(c.envelope === undefined ? {} : { envelope: c.envelope }),
    ...(aggregate === undefined ? {} : { aggregate }),
    source: JSON.stringify(c),
  });
}

/** How long deriving columns waits for a registry that does not answer, in ms. */
const REGISTRY_START_DEADLINE_MS = 60_000;

/** The subject a topic's value schemas are registered under (Confluent's TopicNameStrategy). */
export function valueSubject(topic: string): string {
  return `${topic}-value`;
}

/**
 * Validates a parsed config; when it leaves `columns` out and reads a registry format, derives them
 * from the latest schema registered for the topic's values. EO_CONFIG_INVALID when there is none;
 * EO_REGISTRY_* when the registry does not answer.
 */
export async function resolveSinkConfig(raw: unknown, registry: SchemaRegistryConfig, where = 'sink config'): Promise<SinkConfig & { skipped?: string[] }> {
  const r = raw as Record<string, unknown> | null;
  const format = typeof r?.['format'] === 'string' ? (r['format'] as Format) : 'json';
  if (r === null || typeof r !== 'object' || r['columns'] !== undefined || !FORMATS.includes(format) || !isRegistryFormat(format) || typeof r['topic'] !== 'string') return sinkConfig(raw, where);
  const cache = schemaCache(registry);
  const subject = valueSubject(r['topic']);
  // Retried like a worker's other start-up calls (a registry starting with the stack answers in seconds).
  const latest = await retry(() => cache.registry.latest(subject), { server: 'Schema Registry', deadlineMs: REGISTRY_START_DEADLINE_MS });
  if (latest === null) throw invalid(where, [`columns: left out, and no schema is registered under subject ${subject} at ${registry.url} to derive them from; register the topic's schema, or list the columns`]);
  await retry(() => cache.fetch([latest.id]), { server: 'Schema Registry', deadlineMs: REGISTRY_START_DEADLINE_MS });
  const { deriveColumns } = await import('./derive-columns.js');
  const derived = deriveColumns(cache.get(latest.id)!);
  if (derived.columns.length === 0) throw invalid(where, [`columns: none could be derived from schema id ${latest.id} (subject ${subject}): ${derived.skipped.join('; ')}`]);
  const columns = Object.fromEntries(derived.columns.map((c) => [c.name, { type: c.type, ...(c.field === c.name ? {} : { field: valueFieldSpec(c.field) }), ...(c.default === undefined ? {} : { default: c.default }) }]));
  const config = sinkConfig({ ...r, columns }, `${where} (columns derived from schema id ${latest.id}, subject ${subject} version ${latest.version})`, true);
  return Object.freeze({ ...config, derived: true, skipped: derived.skipped });
}

/** A YAML default's number as the decoder sees a JSON number (lossless). */
function toLossless(n: number): unknown {
  return new LosslessNumber(String(n));
}

/** Reads and validates a sink config file: `.json` as JSON, anything else as YAML (a superset). */
export function loadSinkConfig(file: string): SinkConfig {
  return sinkConfig(readSinkConfigFile(file), file);
}

/** Reads a sink config file and resolves it (columns derived from the registry when left out). */
export function loadResolvedSinkConfig(file: string, registry: SchemaRegistryConfig): Promise<SinkConfig & { skipped?: string[] }> {
  return resolveSinkConfig(readSinkConfigFile(file), registry, file);
}

/** A sink config file's content, parsed (`.json` as JSON, anything else as YAML), not validated yet. */
export function readSinkConfigFile(file: string): unknown {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--config: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  let raw: unknown;
  try {
    raw = file.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (e) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `${file}: not valid ${file.endsWith('.json') ? 'JSON' : 'YAML'}: ${(e as Error).message.split('\n')[0]}`);
  }
  return raw;
}
