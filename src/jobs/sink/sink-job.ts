/**
 * The declarative sink as a Job (`exactlyonce sink --config`): the records of one topic into one table,
 * in one of three modes. Records are decoded by the config's formats (src/formats/decoder.ts: JSON, or
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
 *   4. the topic does not gain partitions (unless a `version:` orders the key's records, below): producers then place keys by the new count, so a key's
 *      newer records may sit on another partition at lower offsets. "Newest" is the highest offset
 *      within one partition layout; across a change no offset orders a key's records (producers
 *      learn the new count at different times), so the engine stops every partition before writing a
 *      batch that may hold a moved key (EO_PARTITIONS_ADDED, Job.keysStayOnPartition;
 *      docs/guarantees.md, "When the topic gains partitions").
 * With `version: <field>` (src/jobs/sink/row-version.ts) a key's records are ordered by a number that
 * grows per key (an updated_at, a row version, a CDC log position) instead of the offset: every write
 * is `USING TIMESTAMP <version>`, the row is the key's record of the highest version on any partition,
 * so a key's records may be on several partitions and the topic may gain partitions (rule 4 falls
 * away; the record key is still required and checked); rule 2 stays, as versions are below the
 * wall-clock floor. Equal versions of a key are
 * ordered by offset within a batch, and otherwise by Cassandra's rule for equal timestamps (a delete
 * wins; among values, per cell, the greater), which `verify --job` accepts as it is.
 * A deletion's tombstone is kept gc_grace_seconds (10 days by default); a zombie write older than
 * that could only come from a worker paused for longer.
 *
 * aggregate: one row per group (and window of event time) holding counts, sums, minima, maxima and
 * averages of its records, over per-partition partials in a second table (src/jobs/sink/sink-aggregate.ts,
 * on src/engine/aggregation.ts). A group's records need not share a partition.
 */
import { Counter } from 'prom-client';
import { consistencies, type Client } from '../../cassandra/session.js';
import type { SchemaRegistryConfig } from '../../config.js';
import type { DecodeLookup } from '../../engine/job.js';
import type { JobAudit } from '../../engine/job-audit.js';
import type { Decoded, DecodedRecord, Job, JobContext, JobMigration, SourceRecord } from '../../engine/job.js';
import { canonical, cqlTypeName } from './cql-types.js';
import { sourceSetting as settingOf, valueFieldSpec } from './column-source.js';
import { predicateSetting } from './filter.js';
import { sampled, sampleRecords } from './sample.js';
import type { AvroSampleIds } from './sample-avro.js';
import { SinkCodec, type SinkRow } from './sink-codec.js';
import { sinkConfig, valueSubject, type SinkColumn, type SinkConfig } from './sink-config.js';
import { checkSinkTable, createTableCql } from './sink-table.js';
import { rowStatements, writeLog, writeUpsert, type RowStatements } from './sink-writes.js';
import { closingTable } from './aggregate-close.js';
import { aggregateAudit, aggregateKeyColumns, partialsTable, SinkAggregator, slotsOf } from './sink-aggregate.js';
import { SchemaRegistry } from '../../registry/schema-registry.js';
import { UnmatchedReporter } from './unmatched-columns.js';
import { createLogger } from '../../log.js';
import { JobBinding } from '../../engine/job-binding.js';
import { COLUMNS_FROM, columnsFromSetting, parseColumnsFrom, type ColumnsFrom } from './column-eras.js';

const sourceSetting = (c: SinkColumn) => settingOf({ source: c.source, path: c.field, spec: c.spec });

export class SinkJob implements Job<SinkRow> {
  readonly name: string;
  readonly topic: string;
  /** What changes what a record becomes (and `columnsFrom`, learned from the stored job in `open`). */
  settings: Readonly<Record<string, string>>;
  readonly migrations: readonly JobMigration[];
  /** Its table (and an aggregate's partials table), bound to this sink alone (EO_TABLE_OWNED for a second job on it). */
  readonly tables: readonly string[];
  /** closeAfter: the topic closed windows are published to (the Runner checks it exists). */
  readonly outputTopics: readonly string[];
  readonly audit: JobAudit;
  readonly lookup: DecodeLookup | undefined;
  /** Upsert: the highest offset of a key wins, which orders its records only while they share a partition (rule 4 above). */
  readonly keysStayOnPartition: boolean;
  private readonly codec: SinkCodec;
  /** The row writes' consistency (the config's, LOCAL_QUORUM by default). */
  private readonly consistency: number;
  /** The row writes, prepared in open(): log mode's insert; upsert's insert and delete. */
  private statements: RowStatements | undefined;
  /** Upsert: where each key column's value is among the insert's parameters (to route a key's batch). */
  private readonly keyIndexes: readonly number[];
  private readonly unmatched: UnmatchedReporter;
  /** Mode aggregate: the partials and merges, made in open(). */
  private aggregator: SinkAggregator | undefined;
  /** exactlyonce_sink_unmatched_columns_total{column}: batches in which a column's field matched no record. */
  private unmatchedCount: Counter<'column'> | undefined;
  /** exactlyonce_sink_expired_total: records not written because their TTL had passed (record time + TTL). */
  private expiredCount: Counter | undefined;
  /** exactlyonce_sink_late_total{table}: closeAfter, records that arrived after their window closed on their partition. */
  private lateCount: Counter<'table'> | undefined;
  /** exactlyonce_sink_filtered_total: records the config's `where` left out. */
  private filteredCount: Counter | undefined;
  /** exactlyonce_sink_aggregate_writes_total{table}: an aggregate sink's rows written (partials, results). */
  private aggregateWrites: Counter<'table'> | undefined;
  /** exactlyonce_sink_unknown_fields_total{field}: fields of stored records that no column stores (onUnknown: ignore). */
  private unknownCount: Counter<'field'> | undefined;

  /**
   * `registry`: the Schema Registry of a registry format (the connection's). `columnsFrom`: columns
   * added after the job first ran (src/jobs/sink/column-eras.ts), as stored with it; a worker learns
   * them in `open`.
   */
  constructor(
    readonly config: SinkConfig,
    private readonly registry?: SchemaRegistryConfig,
    columnsFrom: ColumnsFrom = new Map(),
  ) {
    this.codec = new SinkCodec(config, registry, columnsFrom);
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
    // A version orders a key's records on any partition: the topic may gain partitions.
    this.keysStayOnPartition = config.mode === 'upsert' && config.version === undefined;
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
      ...(config.envelope === undefined ? {} : { envelope: config.envelope }),
      ...(config.version === undefined ? {} : { version: settingOf(config.version) }),
      ...(config.aggregate === undefined ? {} : { aggregate: JSON.stringify(config.aggregate) }),
      ...(columnsFrom.size === 0 ? {} : { [COLUMNS_FROM]: columnsFromSetting(columnsFrom)! }),
    };
    this.migrations = [{ version: 1, name: config.table, cql: createTableCql(config) }];
    this.tables = config.mode === 'aggregate' ? [config.table, partialsTable(config), ...(config.aggregate!.close === undefined ? [] : [closingTable(config)])] : [config.table];
    this.outputTopics = config.aggregate?.close === undefined ? [] : [config.aggregate.close.topic];
    const codec = this.codec;
    // Which columns' fields some record of this audit had (src/jobs/sink/unmatched-columns.ts): one that
    // none had stored null for every row, which `verify --job` says under its report.
    const matched = new Set<number>();
    let rows = 0;
    this.audit = {
      table: config.table,
      mode: config.mode,
      keyColumns: config.mode === 'log' ? ['partition', 'offset'] : config.mode === 'upsert' ? config.key : aggregateKeyColumns(config),
      columns: config.mode === 'aggregate' ? config.aggregate!.aggregates.map((a) => a.name) : config.columns.map((c) => c.name).filter((c) => !config.key.includes(c)),
      ...(config.mode === 'aggregate' ? { aggregate: aggregateAudit(config) } : {}),
      writeTimestamp: config.mode === 'upsert' ? (offset) => offset : undefined,
      ...(config.version === undefined ? {} : { versioned: true }),
      expect: (record) => {
        const d = codec.decode(record);
        if (d.ok && d.value.kind === 'row') {
          rows++;
          const absent = new Set(d.value.absent);
          for (let i = 0; i < config.columns.length; i++) if (!absent.has(i)) matched.add(i);
        }
        if (config.mode === 'aggregate' && d.ok && d.value.kind === 'row') return { kind: 'contribute', slots: slotsOf(config.aggregate!, d.value.values).map((s) => s.text), value: d.value.values };
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
   * with the columns the workers run with, which derived theirs when they started. With the stored
   * offsets from which columns added since are stored (column-eras.ts). Otherwise itself.
   */
  withStoredColumns(stored: Readonly<Record<string, string | number | boolean>>): SinkJob {
    const columns = stored['columns'];
    // The columns added since the job first ran are stored from an offset per partition (column-eras.ts).
    const from = parseColumnsFrom(stored[COLUMNS_FROM]);
    if (columns === this.settings['columns']) return from.size === 0 ? this : new SinkJob(this.config, this.registry, from);
    if (!this.config.derived || typeof columns !== 'string') return this;
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
    return new SinkJob(Object.freeze({ ...config, derived: true }), this.registry, from);
  }

  /**
   * The audit's samples (`chaos --job`): JSON, or Avro under a schema made from the columns and
   * registered for the topic first (src/jobs/sink/sample-avro.ts). Protobuf and JSON Schema sinks can be
   * verified, not sampled.
   */
  private samples(config: SinkConfig, registry: SchemaRegistryConfig | undefined): Pick<JobAudit, 'sample' | 'prepareSample'> {
    // JSON samples have every column source, but not a TTL or version from the key (src/jobs/sink/sample.ts);
    // Avro samples are values (and keys) only.
    if (config.format === 'json' && (config.mode === 'log' || config.keyFormat === 'json')) return sampled(config) ? { sample: (o) => sampleRecords(config, o) } : {};
    if (config.columns.some((c) => c.source !== 'value') || config.envelope !== undefined || (config.version !== undefined && config.version.source !== 'meta') || (config.ttl !== undefined && 'field' in config.ttl)) return {};
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
      const writes = 'exactlyonce_sink_aggregate_writes_total';
      this.aggregateWrites =
        (context.metrics.getSingleMetric(writes) as Counter<'table'> | undefined) ??
        new Counter({ name: writes, help: "An aggregate sink's rows written: partials (one per group, window and batch that added to it) and results (one merge per group and window a batch touched); counted again when a batch is written again", labelNames: ['table'], registers: [context.metrics] });
      const expired = 'exactlyonce_sink_expired_total';
      this.expiredCount =
        (context.metrics.getSingleMetric(expired) as Counter | undefined) ??
        new Counter({ name: expired, help: 'Records not written because their TTL had passed when their batch was written (record timestamp + TTL; counted again when a batch is written again)', registers: [context.metrics] });
      const late = 'exactlyonce_sink_late_total';
      this.lateCount =
        (context.metrics.getSingleMetric(late) as Counter<'table'> | undefined) ??
        new Counter({ name: late, help: "An aggregate sink with closeAfter: records that arrived after their window closed on their Kafka partition; applied to the row all the same, and the window published again (counted again when a batch is written again)", labelNames: ['table'], registers: [context.metrics] });
    }
    await checkSinkTable(context.session, context.keyspace, this.config);
    // Columns `schema apply --job` added after the job first ran are stored from the offsets kept with
    // it (column-eras.ts): learned before the engine compares this worker's settings with the job's, for
    // these very columns (derived, or listed as the derived ones were).
    const stored = (await new JobBinding(context.session, context.keyspace).read(this.name))?.settings;
    const from = stored?.[COLUMNS_FROM];
    if (from !== undefined && stored!['columns'] === this.settings['columns'] && this.codec.useColumnsFrom(parseColumnsFrom(from))) {
      this.settings = { ...this.settings, [COLUMNS_FROM]: String(from) };
    }
    if (this.config.mode === 'aggregate') {
      const table = this.config.table;
      this.aggregator = new SinkAggregator(this.config, context.session, context.keyspace, this.consistency, {
        onWrite: (kind, n) => this.aggregateWrites?.inc({ table: kind }, n),
        onLate: (n) => this.lateCount?.inc({ table }, n),
        publish: (topic, records) => context.publish(topic, records),
      });
    } else this.statements = this.rowStatements(context.session, context.keyspace);
  }

  /** The row writes: log mode's insert; upsert's insert and delete. */
  private rowStatements(session: Client, keyspace: string): RowStatements {
    return rowStatements(this.config, session, keyspace, this.consistency);
  }

  /** Mode aggregate: what this worker remembers of a partition's partials is read back from Cassandra. */
  onRewind(partition: number): void {
    this.aggregator?.forget(partition);
  }

  onRevoke(partitions: readonly number[]): void {
    for (const p of partitions) this.aggregator?.forget(p);
  }

  async write(partition: number, all: readonly DecodedRecord<SinkRow>[], signal: AbortSignal): Promise<void> {
    const records = this.config.where === undefined && this.config.version === undefined ? all : all.filter((r) => r.value.kind !== 'skip');
    const filtered = records.length === all.length ? 0 : all.filter((r) => r.value.kind === 'skip' && r.value.tombstone !== true).length;
    if (filtered > 0) this.filteredCount?.inc(filtered);
    this.unmatched.batch(partition, records.map((r) => r.value), records.length);
    if (this.unknownCount !== undefined) for (const r of records) if (r.value.kind === 'row' && r.value.unknown !== undefined) for (const f of r.value.unknown) this.unknownCount.inc({ field: f });
    if (records.length === 0) return;
    if (this.aggregator !== undefined) return this.aggregator.write(partition, records);
    const onExpired = (n: number) => this.expiredCount?.inc(n);
    if (this.config.mode === 'log') return writeLog(this.config, this.statements!, partition, records, onExpired);
    return writeUpsert(this.config, this.statements!, this.keyIndexes, records, signal, onExpired);
  }
}
