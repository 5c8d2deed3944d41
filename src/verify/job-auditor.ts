/**
 * The auditor for any job that describes its output (`Job.audit`, src/engine/job-audit.ts): what
 * `exactlyonce verify --job` and `chaos --job` run. Same report, exit codes and proofs as the events
 * auditor (src/verify/auditor.ts), against the broker's log. It walks the partitions as every auditor
 * does (src/verify/partition-walk.ts: checkpoints before watermarks, where each partition starts,
 * lanes, the proof recorded up to the first violation), and on the way:
 *
 * - every record below the checkpoint says what it must produce (`audit.expect`); a quarantined one
 *   must be in the job's quarantine with that reason, any other must not be there — merged offset by
 *   offset with the quarantine rows (JobLedger, src/verify/compare-rows.ts);
 * - log mode: exactly that row per offset, no other row, merged the same way with the table's rows of
 *   the offset range (the table is keyed PRIMARY KEY (partition, offset), as a sink's is); rows at or
 *   beyond the checkpoint are batches in flight while the log holds their offset;
 * - upsert mode: per key, the row of its last record, written at that record's timestamp, every key's
 *   records on one partition, no row for a key no record names — a keyed merge in bounded memory
 *   (src/verify/upsert-audit.ts). The topic is read to its end, so that a row written by a batch in
 *   flight is recognised (counted as ahead of the checkpoint, not judged).
 *
 * - aggregate mode: every stored partial is the fold of its partition's records up to its offset and
 *   covers the records below the checkpoint, every result row the merge of its partials
 *   (src/verify/aggregate-audit.ts); always from the log start, to the log end.
 *
 * Memory: one chunk of records per lane, one page of rows, and in upsert mode the keyed merge's budget
 * (`memoryMb`; beyond it sorted runs go to a temporary folder) — independent of the number of keys; in
 * aggregate mode a state per group, window and partition — independent of the number of records.
 */
import { fromLong, toLong, type Client, type Row } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import type { JobAudit } from '../engine/job-audit.js';
import type { Job, SourceRecord } from '../engine/job.js';
import { engineTables, type EngineTables } from '../engine/engine-tables.js';
import { retry } from '../engine/retry.js';
import { ExactlyOnceError } from '../errors.js';
import { IncompleteRead, type LogReader } from '../kafka/log-reader.js';
import { JobLedger, type JobRecord, type UpsertCounts } from './compare-rows.js';
import { max, PartitionWalk, Progress, type ProofOptions, type WalkedPartition, type WalkOptions } from './partition-walk.js';
import { configFingerprint } from './proof-plan.js';
import { pagedRows, pages } from './reads.js';
import { ViolationLog, type AuditReport, type Unattributed } from './report.js';
import { UpsertAudit } from './upsert-audit.js';
import { AggregateAudit } from './aggregate-audit.js';

export interface JobAuditOptions {
  keepViolations?: number;
  onProgress?: (done: number, total: number) => void;
  /** Partitions read at once, each with a Kafka reader of its own (default 4). */
  lanes?: number;
  /** Upsert mode: MiB the keyed merge holds before it spills sorted runs to disk (default 64). */
  memoryMb?: number;
  /** Where the keyed merge's runs go (default: the OS's temporary folder). */
  spillDir?: string;
  /** The recorded proofs (src/verify/partition-walk.ts); `config` defaults to the fingerprint of the job's settings and topic. */
  proofs?: ProofOptions;
}

interface PartitionState extends WalkedPartition {
  readonly ledger: JobLedger;
  /** Upsert violations counted on this partition, and rows ahead of its checkpoint. */
  readonly counts: UpsertCounts;
  /** Rows at or beyond the log end the walk started with, judged once it is read again (PartitionWalk.judgeBeyondLogEnd). */
  readonly beyond: Array<{ partition: number; offset: bigint; table: string }>;
}

const NEVER = new AbortController().signal;

export class JobAuditor {
  private readonly violations: ViolationLog;
  private readonly t: EngineTables;
  private upsert: UpsertAudit | null = null;
  private aggregate: AggregateAudit | null = null;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly job: Job<unknown>,
    private readonly options: JobAuditOptions = {},
  ) {
    this.violations = new ViolationLog(options.keepViolations ?? 1000);
    this.t = engineTables(config.keyspace, job.legacyTables === true ? undefined : job.name);
  }

  private get audit(): JobAudit {
    return this.job.audit!;
  }

  /**
   * What each record of a chunk must produce: the one place the job's records are decoded. What the
   * job's decode reads from another server (a Schema Registry's schemas) is fetched first, as the
   * workers do, retried while the server does not answer.
   */
  private async expectAll(records: readonly SourceRecord[]): Promise<JobRecord[]> {
    const lookup = this.job.lookup;
    if (lookup !== undefined) await retry(() => lookup.fetch(records, NEVER), { server: lookup.server, deadlineMs: 300_000 });
    return records.map((r) => ({ offset: r.offset, e: this.audit.expect(r) }));
  }

  async run(): Promise<AuditReport> {
    const audit = this.job.audit;
    if (audit === undefined) throw new ExactlyOnceError('EO_USAGE', `job ${this.job.name} does not describe its output (no \`audit\`): it cannot be verified`);
    const { config, options } = this;
    const ks = config.keyspace;
    const walkOptions: WalkOptions = {
      noTopic: `topic ${config.topic} does not exist; nothing to verify`,
      readCheckpoints: () => new CheckpointStore(this.session, ks, config.topic, this.job.legacyTables === true ? undefined : this.job.name).readStored(),
      job: this.job.name,
      // A partial is a fold of the log's prefix: an aggregate job is proved from the log start every time;
      // so is a versioned upsert job (a key's newest record may be anywhere in the log).
      proofs: (audit.mode === 'aggregate' || audit.versioned === true) && options.proofs !== undefined ? { ...options.proofs, full: true } : options.proofs,
      defaultConfig: () => configFingerprint({ ...(this.job.settings ?? {}), topic: config.topic }),
      checkpointOutside: (w, cp) => `partition ${w.partition}: checkpoint ${cp} is outside the log [${w.low}, ${w.high}]`,
    };
    return PartitionWalk.run(config, this.session, this.violations, walkOptions, async (walk) => {
      const states = walk.partitions().map((b) => this.partitionState(b));
      const byPartition = new Map(states.map((s) => [s.partition, s]));
      for (const p of walk.checkpoints.keys()) if (!byPartition.has(p)) this.violations.add({ kind: 'checkpoint', partition: p, message: `partition ${p}: a checkpoint for a partition the topic does not have` });
      const unattributed: Unattributed = { missing: 0, extra: 0, mismatched: 0 };
      if (audit.mode === 'upsert') {
        this.upsert = new UpsertAudit({
          session: this.session,
          keyspace: ks,
          table: audit.table,
          keyColumns: audit.keyColumns,
          valueColumns: audit.columns,
          writeTimestamp: audit.writeTimestamp,
          violations: this.violations,
          counts: (p) => byPartition.get(p)?.counts ?? { missing: 0, extra: 0, mismatched: 0, aheadOfCheckpoint: 0, skipped: {} },
          unattributed,
          memoryBytes: (options.memoryMb ?? 64) * 1024 * 1024,
          ...(options.spillDir === undefined ? {} : { spillDir: options.spillDir }),
        });
      }

      if (audit.mode === 'aggregate') {
        this.aggregate = new AggregateAudit({
          connection: config,
          session: this.session,
          keyspace: ks,
          table: audit.table,
          described: audit.aggregate!,
          violations: this.violations,
          unattributed,
          ends: new Map(states.map((s) => [s.partition, s.end])),
          highs: new Map(states.map((s) => [s.partition, s.high])),
          logEnds: async () => new Map((await walk.admin.watermarks(config.topic)).map((w) => [w.partition, w.high])),
          aheadOfCheckpoint: (p) => {
            const c = byPartition.get(p)?.counts;
            if (c !== undefined) c.aheadOfCheckpoint++;
          },
          count: (p, kind) => {
            const c = byPartition.get(p)?.counts;
            if (c !== undefined) c[kind]++;
            else unattributed[kind]++;
          },
        });
        await this.aggregate.prepare();
      }

      const progress = new Progress(states.reduce((n, s) => n + Number(max(0n, this.readTo(s) - s.ledger.position)), 0), options.onProgress);
      const scanEach = async (reader: LogReader, s: PartitionState) => {
        await this.scan(reader, s, progress);
        await this.outsideRange(s);
      };
      try {
        await walk.inLanes(states, options.lanes, (s) => s.ledger.position < this.readTo(s), scanEach, async () => undefined);
        await walk.judgeBeyondLogEnd(
          states.flatMap((s) => s.beyond.map((r) => ({ ...r, s }))),
          (r) => r.s.counts.aheadOfCheckpoint++,
          (r, logEnd) => r.s.ledger.extraRow(r.table, r.offset, `beyond the log end ${logEnd}`),
        );
        await this.unknownPartitions(new Set(byPartition.keys()));
        if (this.upsert !== null) await (walk.full ? this.upsert.judgeAll() : this.upsert.judgeTouched());
        if (this.aggregate !== null) await this.aggregate.judge();
      } finally {
        await this.upsert?.close();
      }

      const recorded = await walk.recordProofs(states, (_, proved) => proved);
      const report = walk.report(recorded, {
        partitions: states.map((s) => walk.partitionReport(s, { ledger: s.ledger, aheadOfCheckpoint: s.counts.aheadOfCheckpoint, also: s.counts })),
        unattributed,
        ...(this.upsert === null ? {} : { spilledRuns: this.upsert.spilledRuns }),
      });
      const notes = this.audit.notes?.() ?? [];
      return notes.length === 0 ? report : { ...report, notes };
    });
  }

  /** Upsert and aggregate modes read to the log end, so that a row written by a batch in flight is recognised. */
  private readTo(s: PartitionState): bigint {
    return this.audit.mode === 'log' ? s.end : s.high;
  }

  private partitionState(b: WalkedPartition): PartitionState {
    const ledger = new JobLedger(b.partition, b.from, this.violations, { mode: this.audit.mode, table: this.audit.table, valueColumns: this.audit.columns });
    return { ...b, ledger, counts: { missing: 0, extra: 0, mismatched: 0, aheadOfCheckpoint: 0, skipped: {} }, beyond: [] };
  }

  /** The job's quarantine rows of [from, upTo) of a partition, ascending, a page at a time. */
  private quarantine(p: number, from: bigint, upTo: bigint | null) {
    const t = this.t;
    const range = upTo === null ? 'offset >= ?' : 'offset >= ? AND offset < ?';
    return pages(this.session, `SELECT offset, reason FROM ${t.quarantine} WHERE ${t.jobWhere}partition = ? AND ${range} ORDER BY offset ASC`, [...t.jobParams, p, toLong(from), ...(upTo === null ? [] : [toLong(upTo)])], (r) => ({
      offset: fromLong(r['offset']),
      reason: r['reason'] as string | null,
    }));
  }

  /** A log-mode table's rows of [from, upTo) of a partition, ascending, a page at a time. */
  private tableRows(p: number, from: bigint, upTo: bigint | null) {
    const a = this.audit;
    const range = upTo === null ? 'offset >= ?' : 'offset >= ? AND offset < ?';
    return pages(
      this.session,
      `SELECT offset, ${a.columns.join(', ')} FROM ${this.config.keyspace}.${a.table} WHERE partition = ? AND ${range} ORDER BY offset ASC`,
      [p, toLong(from), ...(upTo === null ? [] : [toLong(upTo)])],
      (r: Row) => ({ offset: fromLong(r['offset']), row: r }),
    );
  }

  /**
   * Reads the partition from its proof (or log start) and merges the records below the checkpoint
   * chunk by chunk with the quarantine (and a log-mode table); an upsert job's records go to the keyed
   * merge, those at or beyond the checkpoint marked in flight.
   */
  private async scan(reader: LogReader, s: PartitionState, progress: Progress): Promise<void> {
    const p = s.partition;
    const log = this.audit.mode === 'log';
    const check = async (records: readonly JobRecord[], upTo: bigint) => {
      const from = s.ledger.position;
      if (upTo <= from) return;
      await s.ledger.check(records, upTo, log ? this.tableRows(p, from, upTo) : null, this.quarantine(p, from, upTo));
      s.scanned = upTo;
    };
    const until = this.readTo(s);
    try {
      for await (const chunk of reader.read(this.config.topic, p, s.ledger.position, until)) {
        const records = await this.expectAll(chunk.records);
        const last = records[records.length - 1]!.offset;
        await check(records, last + 1n < s.end ? last + 1n : s.end);
        if (this.upsert !== null) {
          for (const r of records) if (r.e.kind === 'row' || r.e.kind === 'delete') await this.upsert.add(p, r.offset, r.e, r.offset >= s.end);
        }
        if (this.aggregate !== null) for (const r of records) if (r.e.kind === 'contribute') this.aggregate.add(p, r.offset, r.e.slots, r.e.value);
        progress.add(records.length);
      }
      await check([], s.end);
    } catch (e) {
      if (!(e instanceof IncompleteRead)) throw e;
      if (e.at < s.end) s.scanned = e.at;
      this.violations.add({ kind: 'incomplete_read', partition: p, offset: String(e.at), message: `partition ${p}: the topic could not be read from offset ${e.at} on; the offsets left are not judged` });
    }
  }

  /**
   * Rows outside the range judged: at or beyond the checkpoint (in flight while the log holds their
   * offset, extra beyond it) and below the log start (stored before retention deleted their records:
   * counted, not judged; a run continuing a proof counts only those it has not seen).
   */
  private async outsideRange(s: PartitionState): Promise<void> {
    const p = s.partition;
    const log = this.audit.mode === 'log';
    const tables = [['quarantine', (from: bigint, upTo: bigint | null) => this.quarantine(p, from, upTo)]] as Array<[string, (from: bigint, upTo: bigint | null) => AsyncIterable<Array<{ offset: bigint }>>]>;
    if (log) tables.push([this.audit.table, (from, upTo) => this.tableRows(p, from, upTo)]);
    for (const [table, rows] of tables) {
      for await (const page of rows(s.end, null)) {
        for (const { offset } of page) {
          if (offset < s.high) s.counts.aheadOfCheckpoint++;
          else s.beyond.push({ partition: p, offset, table });
        }
      }
      if (s.low > 0n && s.start.proved < s.low) {
        for await (const page of rows(s.start.proved, s.low)) s.belowLogStart += page.length;
      }
    }
  }

  /** Quarantine rows (and a log-mode table's rows) of partitions the topic does not have: extra. */
  private async unknownPartitions(known: Set<number>): Promise<void> {
    const t = this.t;
    const a = this.audit;
    const partitions = new Set<number>();
    for await (const r of pagedRows(this.session, `SELECT DISTINCT ${t.jobColumn}partition FROM ${t.quarantine}`, [], (row) => row)) {
      if (t.jobParams.length === 0 || r['job'] === t.jobParams[0]) partitions.add(r['partition'] as number);
    }
    if (a.mode === 'log') for await (const p of pagedRows(this.session, `SELECT DISTINCT partition FROM ${this.config.keyspace}.${a.table}`, [], (row) => row['partition'] as number)) partitions.add(p);
    for (const p of partitions) {
      if (known.has(p)) continue;
      const ledger = new JobLedger(p, 0n, this.violations, { mode: a.mode, table: a.table, valueColumns: a.columns });
      for await (const page of this.quarantine(p, -(2n ** 63n), null)) for (const { offset } of page) ledger.extraRow('quarantine', offset, `the topic has no partition ${p}`);
      if (a.mode === 'log') for await (const page of this.tableRows(p, -(2n ** 63n), null)) for (const { offset } of page) ledger.extraRow(a.table, offset, `the topic has no partition ${p}`);
    }
  }
}
