/**
 * The keys of a sink config (src/jobs/sink/sink-config.ts): the schema every file is checked against,
 * with what each key means (`sink --help` and docs/reference.md list them from here, so they cannot
 * drift), and the problem lines that name each key a file gets wrong. A file of its own so that the
 * config's meaning (sinkConfig) reads apart from its spelling.
 */
import { z } from 'zod';
import { FORMATS } from '../../formats/decoder.js';
import { didYouMean } from '../../suggest.js';
import { parseCqlType, SCALAR_TYPES } from './cql-types.js';

/** The write consistency levels a sink takes (a quorum, like the checkpoints' reads and writes). */
export const WRITE_LEVELS: readonly string[] = ['LOCAL_QUORUM', 'QUORUM', 'EACH_QUORUM'];
export type WriteLevel = 'LOCAL_QUORUM' | 'QUORUM' | 'EACH_QUORUM';
/** The levels refused, with why. */
const BELOW_QUORUM = "it is acknowledged by fewer replicas than a quorum, so a checkpoint read at a quorum after it may not see the rows it covers (a replica that acknowledged them can be lost with them), and the proof would rest on rows a crash can take back";
const WEAK_LEVELS: Readonly<Record<string, string>> = {
  ONE: BELOW_QUORUM,
  TWO: `a fixed count of replicas, below a quorum once the replication factor grows (2 of 5): ${BELOW_QUORUM.replace('it is acknowledged', 'a write is then acknowledged')}`,
  THREE: `a fixed count of replicas, below a quorum once the replication factor grows (3 of 7): ${BELOW_QUORUM.replace('it is acknowledged', 'a write is then acknowledged')}`,
  LOCAL_ONE: BELOW_QUORUM,
  ANY: `${BELOW_QUORUM}; ANY may even be stored as a hint on a node that is no replica`,
  ALL: 'one replica down stops every write (use QUORUM: a checkpoint read at a quorum sees what a quorum wrote)',
  SERIAL: 'a serial level is for lightweight transactions (IF …), not for writes',
  LOCAL_SERIAL: 'a serial level is for lightweight transactions (IF …), not for writes',
};

/** Unquoted CQL identifiers in lower case (so the generated CQL needs no quoting). */
const identifier = z.string().regex(/^[a-z][a-z0-9_]{0,47}$/, 'expected a lower-case CQL name: a letter, then letters, digits or _ (at most 48)');
const duration = z.string().regex(/^[1-9]\d*(ms|s|m|h|d)$/, 'expected a whole number and a unit: 500ms, 30s, 1m, 12h or 1d');
const windowSchema = z
  .object({
    time: identifier.describe('the timestamp column whose value places a record in its windows'),
    size: duration.describe('how long a window is'),
    slide: duration.optional().describe('how far apart windows start (default: size, tumbling windows)'),
  })
  .strict();
const TYPES_HELP = `${SCALAR_TYPES.join(', ')}, varchar (text), list<T>, set<T> or map<text, T> of those (nested collections too)`;
const cqlType = z.string().superRefine((s, ctx) => {
  // A mistyped name (varchr, bigitn) is named with the type meant; a collection's text is shown as it is.
  const meant = /^\w+$/.test(s.trim()) ? didYouMean(s.trim().toLowerCase(), [...SCALAR_TYPES, 'varchar']) : '';
  if (parseCqlType(s) === undefined) ctx.addIssue({ code: 'custom', message: `expected a CQL type${meant}: ${TYPES_HELP}` });
});

const columnObject = z
  .object({
    type: cqlType.describe('the CQL type (required)'),
    field: z
      .string()
      .min(1)
      .optional()
      .describe(
        "where the column's value comes from (default: the value's field of the column's name): a.b or value.a.b (the value's field, nested), key (the whole record key, a single value) or key.x (the key's field), header.<name> (the Kafka header's bytes as the column's type: text as UTF-8, numbers from their text, blob raw; a header that does not decode is quarantined, bad_header), $topic, $partition, $offset, $timestamp (the record's Kafka timestamp: a timestamp or bigint column). Only what is a pure function of the record: now() and the like are refused",
      ),
    required: z.boolean().optional().describe('true: a record whose field is missing or null is quarantined (missing_field)'),
    default: z.unknown().optional().describe('stored when the field is missing or null'),
    onNull: z
      .enum(['unset', 'null', 'default'], { message: 'expected one of unset, null, default' })
      .optional()
      .describe(
        "what a missing or null field writes: null (a null cell; the default without a default), default (the column's default; the default with one), unset (no cell at all: no tombstone; upsert: the key's earlier value stays, and verify --job expects the merge of the key's records in offset order)",
      ),
  })
  .strict();
const columnSchema = z.union([cqlType, columnObject]);

const formats = z.enum(FORMATS, { message: `expected one of ${FORMATS.join(', ')}` });
export const sinkSchema = z
  .object({
    name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'expected 1-64 letters, digits, _ or -').optional().describe("the job's name: its checkpoints, quarantine and consumer group exactlyonce.<name> (default: the table's)"),
    topic: z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'expected a Kafka topic name: 1-249 characters of [A-Za-z0-9._-]').describe('the input topic (required)'),
    table: identifier.describe('the table, in the keyspace of --keyspace (required)'),
    format: formats.optional().describe(`the values: ${FORMATS.join(', ')} (default json; the others through a Schema Registry)`),
    keyFormat: formats.optional().describe('the record keys, the same choices (default json: the key\'s canonical text, or a JSON object of several)'),
    mode: z
      .enum(['log', 'upsert', 'aggregate'])
      .describe('log: one row per (partition, offset); upsert: one row per key, its record with the highest offset (or version); aggregate: one row per group (and window), the aggregates of every record read (required)'),
    key: z.array(identifier).min(1).optional().describe('upsert: the key columns, e.g. [order_id]'),
    groupBy: z.array(identifier).min(1).optional().describe('aggregate: the columns a group is, e.g. [customer] (text, int, bigint, smallint, tinyint, boolean, timestamp, uuid, timeuuid or decimal)'),
    window: windowSchema
      .optional()
      .describe(
        'aggregate: windows on event time, { time: <timestamp column>, size: 1m, slide: 30s } (slide left out: tumbling; size a whole multiple of slide); left out, one running total per group. A record counts in the window(s) its time falls in, however late it arrives',
      ),
    aggregates: z
      .record(identifier, z.string())
      .refine((a) => Object.keys(a).length > 0, { message: 'expected at least one aggregate' })
      .optional()
      .describe(
        'aggregate: the result columns, name: count | sum(<column>) | min(<column>) | max(<column>) | avg(<column>). sum of int, bigint, smallint or tinyint is an exact bigint (beyond 64 bits the partition stops, coded), of decimal an exact decimal, of double or float a double; min and max keep the column\'s type (numbers and timestamps); avg is a double from the exact sum and count. A null or missing value counts in count, not in the others',
      ),
    closeAfter: duration
      .optional()
      .describe(
        "aggregate with a window: a Kafka partition closes a window once its watermark (the latest record time it has read) is this long past the window's end, and publishes the window's row to closedTopic; the latest message of a window equals its row once every partition with records of it has closed it. A record that arrives after its partition closed its window still updates the row, is published again and counted in exactlyonce_sink_late_total",
      ),
    closedTopic: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,249}$/, 'expected a Kafka topic name: 1-249 characters of [A-Za-z0-9._-]')
      .optional()
      .describe('with closeAfter: the compacted topic closed windows are published to, keyed by group and window (default <name>.closed; make it with `exactlyonce topic create --topic <it> --no-alerts --compacted`)'),
    ttl: z
      .string()
      .regex(/^[1-9]\d*[smhd]$/, 'expected a whole number and a unit: 90s, 15m, 12h or 7d')
      .optional()
      .describe(
        'rows expire this long after their record\'s Kafka timestamp (s, m, h or d: 7d). Written USING TTL of what is left then, so a replay never extends a row\'s life; a record already past it is not written (counted in exactlyonce_sink_expired_total; verify --job counts it as expired, not missing)',
      ),
    ttlField: z
      .string()
      .min(1)
      .optional()
      .describe("instead of ttl: where each record's TTL in seconds is, any column source (value.ttl, header.ttl, …); a record whose TTL is missing, negative or not a whole number is quarantined (bad_ttl)"),
    version: z
      .string()
      .min(1)
      .optional()
      .describe(
        "upsert: order a key's records by this instead of the offset, any column source (value.updated_at, header.v, $timestamp; with envelope: debezium a value path is read from the change event: source.lsn, ts_ms): a whole number or a timestamp (epoch ms), below 2^44. The row is the key's record with the highest version, whatever partition it is on (the topic may then gain partitions); equal versions: the later offset within a batch, else Cassandra's tie rule (verify --job accepts any of them). A record without a usable version is quarantined (bad_version)",
      ),
    consistency: z
      .string()
      .superRefine((v, ctx) => {
        const level = v.toUpperCase();
        if (WRITE_LEVELS.includes(level)) return;
        if (level in WEAK_LEVELS) ctx.addIssue({ code: 'custom', message: `${v} is refused: ${WEAK_LEVELS[level]}; use ${WRITE_LEVELS.join(', ')}` });
        else ctx.addIssue({ code: 'custom', message: `expected one of ${WRITE_LEVELS.join(', ')}${didYouMean(level, WRITE_LEVELS)}` });
      })
      .optional()
      .describe(
        "the consistency of the sink's row writes: LOCAL_QUORUM (default), QUORUM or EACH_QUORUM. Levels below a quorum (ONE, ANY, LOCAL_ONE, TWO, THREE) are refused: a checkpoint read at a quorum would not be sure to see rows written so, so a replay after a crash could skip rows a lost replica held",
      ),
    where: z
      .unknown()
      .optional()
      .describe(
        "only the records this holds for are stored; the others are filtered (no row, no quarantine row, exactlyonce_sink_filtered_total; verify --job proves each was the rule's): { field: <column source>, equals: paid }, { field, in: [a, b] }, { field, exists: true }, { not: <predicate> }, { all: [<predicate>, …] }, { any: [<predicate>, …] }. An upsert tombstone is never filtered",
      ),
    onUnknown: z
      .enum(['ignore', 'quarantine'], { message: 'expected one of ignore, quarantine' })
      .optional()
      .describe(
        "columns derived from the registry (columns left out): what a record written with a newer schema version does with a field the columns (derived at start) lack: ignore (default: the known columns are stored, exactlyonce_sink_unknown_fields_total{field} counts the field) or quarantine (reason unknown_field). verify --job judges each record the same way. Run schema apply --job with the workers stopped to add the new fields' columns and store them from each partition's log end on",
      ),
    envelope: z
      .enum(['debezium'], { message: 'expected debezium' })
      .optional()
      .describe(
        "debezium: the values are Debezium change events ({ before, after, source, op, ts_ms }, or that under { schema, payload }); the columns read the row (after; before for a delete in log mode), op d deletes the key in upsert mode, and the record key is Debezium's: the key's fields as a JSON object (or a registry record). A change without op, or without the row it needs, is quarantined (bad_envelope); op t and m are quarantined too (unsupported_op)",
      ),
    columns: z
      .record(identifier, columnSchema)
      .refine((c) => Object.keys(c).length > 0, { message: 'expected at least one column' })
      .optional()
      .describe('column: TYPE, or column: { type, field, required, default } (a registry format may leave them out: derived from the schema)'),
  })
  .strict();

/** The config's keys and a column's, with what each means: `sink --help` lists them (generated here, so they cannot drift). */
export function sinkConfigKeysHelp(): string {
  const lines = (shape: Record<string, z.ZodType>, indent: string) => Object.entries(shape).map(([k, v]) => `${indent}${k.padEnd(10)} ${v.description ?? ''}`);
  return [
    'Config keys (YAML, or JSON for .json; unknown keys are refused):',
    ...lines(sinkSchema.shape, '  '),
    '  a column\'s keys:',
    ...lines(columnObject.shape, '    '),
    `  types: ${TYPES_HELP}`,
  ].join('\n');
}

/** The keys the schema knows at a path of the config (the top level, or a column's). */
function knownKeys(at: readonly PropertyKey[]): string[] {
  if (at.length === 0) return Object.keys(sinkSchema.shape);
  if (at.length === 2 && at[0] === 'columns') return Object.keys(columnObject.shape);
  if (at.length === 1 && at[0] === 'window') return Object.keys(windowSchema.shape);
  return [];
}

const keyPath = (at: readonly PropertyKey[]) => (at.length > 0 ? at.map(String).join('.') : '(top level)');

/** One line per problem; an unknown key names the key meant, or lists the keys. */
export function issueLines(issues: readonly z.core.$ZodIssue[], raw: unknown, base: readonly PropertyKey[] = []): string[] {
  return issues.flatMap((i) => {
    const at = [...base, ...i.path];
    if (i.code === 'invalid_union') {
      // A column is written as a type or as an object: report against the spelling the user chose.
      const value = at.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), raw);
      const branch = value !== null && typeof value === 'object' && i.errors.length > 1 ? i.errors[1]! : i.errors[0]!;
      return issueLines(branch, raw, at);
    }
    if (i.code === 'unrecognized_keys') {
      const known = knownKeys(at);
      return i.keys.map((k) => {
        const hint = didYouMean(k, known);
        return `${keyPath([...at, k])}: unknown key${hint !== '' ? hint : known.length > 0 ? `; the keys are ${known.join(', ')}` : ''}`;
      });
    }
    // Zod says `expected string, received undefined` of a key left out.
    if (i.code === 'invalid_type' && / received undefined$/.test(i.message)) return [`${keyPath(at)}: missing (a required key)`];
    return [`${keyPath(at)}: ${i.message}`];
  });
}
