/**
 * An example job written only against the public API (`import … from 'exactlyonce'`): page views
 * from the topic `examples.page-views` into the table `page_views`, one row per Kafka record.
 *
 *   exactlyonce schema apply --job examples/page-views/job.ts     # the engine's tables, then this job's
 *   exactlyonce run --job examples/page-views/job.ts              # a worker (start as many as you like)
 *   exactlyonce verify --job examples/page-views/job.ts           # the proof, offset by offset
 *
 * A record is `{"url": "/pricing", "user": "u-17", "durationMs": 5300}`; anything else is quarantined
 * with its reason. With `--job-option format=avro` (or protobuf, json-schema) the records are read in
 * the Confluent wire format through the Schema Registry (`--schema-registry-url`) by the package's own
 * decoders: the job's `lookup` fetches a batch's schemas before `decode`, which stays pure. Exactly once comes from the engine: it resumes every partition from its checkpoint in
 * Cassandra, written only after the batch's rows; this job's part is an idempotent write (rows keyed by
 * the record's partition and offset, values a pure function of the record, so a replay rewrites them).
 */
import type { Client, Decoded, DecodedRecord, Decoder, Expectation, Format, Job, JobContext, JobFactoryContext, SourceRecord } from 'exactlyonce';
import { consistencies, createDecoder, decoderLookup, FORMATS, schemaCache, toLong } from 'exactlyonce';

export interface PageView {
  url: string;
  user: string;
  durationMs: number;
}

export const TOPIC = 'examples.page-views';

function parse(record: SourceRecord, decoder?: Decoder): Decoded<PageView> {
  if (record.value === null) return { ok: false, reason: 'null_value', detail: 'a record without a value' };
  let v: unknown;
  if (decoder !== undefined) {
    const d = decoder.decode(record.value);
    if (!d.ok) return d;
    // An Avro int is a number already; a long would be a BigInt.
    v = d.value;
  } else {
    try {
      v = JSON.parse(record.value.toString('utf8'));
    } catch (e) {
      return { ok: false, reason: 'bad_json', detail: (e as Error).message };
    }
  }
  const o = v as Partial<PageView> | null;
  if (o === null || typeof o !== 'object') return { ok: false, reason: 'not_an_object', detail: typeof v };
  if (typeof o.url !== 'string' || !o.url.startsWith('/')) return { ok: false, reason: 'bad_url', detail: `url: ${JSON.stringify(o.url)}` };
  if (typeof o.user !== 'string' || o.user === '') return { ok: false, reason: 'bad_user', detail: `user: ${JSON.stringify(o.user)}` };
  if (typeof o.durationMs !== 'number' || !Number.isInteger(o.durationMs) || o.durationMs < 0 || o.durationMs > 2 ** 31 - 1) {
    return { ok: false, reason: 'bad_duration', detail: `durationMs: ${JSON.stringify(o.durationMs)}` };
  }
  return { ok: true, value: { url: o.url, user: o.user, durationMs: o.durationMs } };
}

export default function createJob(context: JobFactoryContext): Job<PageView> {
  const keyspace = context.config.keyspace;
  const format = (context.options['format'] ?? 'json') as Format;
  if (!FORMATS.includes(format)) throw new Error(`--job-option format: expected one of ${FORMATS.join(', ')}`);
  const decoder = format === 'json' ? undefined : createDecoder(format, schemaCache(context.config.schemaRegistry));
  let session: Client | undefined;
  let open = 0;
  return {
    name: 'page-views',
    topic: context.options['topic'] ?? TOPIC,
    tables: ['page_views'],
    migrations: [
      {
        version: 1,
        name: 'page_views',
        cql: `CREATE TABLE IF NOT EXISTS {{keyspace}}.page_views (
                partition int, offset bigint, url text, user_id text, duration_ms int,
                PRIMARY KEY (partition, offset)) WITH CLUSTERING ORDER BY (offset DESC);`,
      },
    ],
    ...(decoder === undefined ? {} : { lookup: decoderLookup({ value: decoder }), settings: { format } }),
    decode: (record) => parse(record, decoder),
    async open(ctx: JobContext) {
      session = ctx.session;
    },
    onAssign(partitions) {
      open += partitions.length;
      context.log.info({ partitions, open }, 'page-views: partitions assigned');
    },
    onRevoke(partitions) {
      open -= partitions.length;
    },
    async close() {
      context.log.info('page-views: closed');
    },
    async write(partition: number, records: readonly DecodedRecord<PageView>[], signal: AbortSignal) {
      // One unlogged batch per 100 rows, all in one Cassandra partition (the Kafka partition): each is
      // applied atomically. A replay writes the same values to the same keys.
      for (let i = 0; i < records.length; i += 100) {
        signal.throwIfAborted();
        await session!.batch(
          records.slice(i, i + 100).map(({ record, value }) => ({
            query: `INSERT INTO ${keyspace}.page_views (partition, offset, url, user_id, duration_ms) VALUES (?, ?, ?, ?, ?)`,
            params: [partition, toLong(record.offset), value.url, value.user, value.durationMs],
          })),
          { prepare: true, logged: false, consistency: consistencies.localQuorum },
        );
      }
    },
    audit: {
      table: 'page_views',
      mode: 'log',
      keyColumns: ['partition', 'offset'],
      columns: ['url', 'user_id', 'duration_ms'],
      expect(record: SourceRecord): Expectation {
        const d = parse(record, decoder);
        if (!d.ok) return { kind: 'quarantine', reason: d.reason };
        return {
          kind: 'row',
          key: { partition: record.partition, offset: record.offset },
          row: { url: d.value.url, user_id: d.value.user, duration_ms: d.value.durationMs },
        };
      },
    },
  };
}
