/**
 * The auditor for any job that describes its output (`Job.audit`, src/engine/job-audit.ts): what
 * `exactlyonce verify --job` and `chaos --job` run. Same report, exit codes and proofs as the events
 * auditor (src/verify/auditor.ts), against the broker's log:
 *
 * - checkpoints first (the job's own, src/engine/engine-tables.ts), then the watermarks: every row
 *   below a checkpoint is durable before the audit looks at it;
 * - each partition from where the last recorded proof ended (src/verify/proof-plan.ts), or from
 *   the log start (`full`, no proof, or one made under another topic ID, reset epoch or settings);
 * - every record below the checkpoint says what it must produce (`audit.expect`); a quarantined one
 *   must be in the job's quarantine with that reason, any other must not be there — merged offset by
 *   offset with the quarantine rows (src/verify/job-ledger.ts);
 * - log mode: exactly that row per offset, no other row, merged the same way with the table's rows of
 *   the offset range (the table is keyed PRIMARY KEY (partition, offset), as a sink's is); rows at or
 *   beyond the checkpoint are batches in flight while the log holds their offset;
 * - upsert mode: per key, the row of its last record, written at that record's timestamp, every key's
 *   records on one partition, no row for a key no record names — a keyed merge in bounded memory
 *   (src/verify/upsert-audit.ts). The topic is read to its end, so that a row written by a batch in
 *   flight is recognised (counted as ahead of the checkpoint, not judged).
 *
 * Memory: one chunk of records per lane, one page of rows, and in upsert mode the keyed merge's budget
 * (`memoryMb`; beyond it sorted runs go to a temporary folder) — independent of the number of keys.
 */
import { fromLong, toLong, types, type Client, type Row } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore, type StoredCheckpoint } from '../engine/checkpoint-store.js';
import type { JobAudit } from '../engine/job-audit.js';
import type { Job, SourceRecord } from '../engine/job.js';
import { engineTables, type EngineTables } from '../engine/engine-tables.js';
import { retry } from '../engine/retry.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin, type Watermarks } from '../kafka/admin.js';
import { IncompleteRead, type LogReader } from '../kafka/log-reader.js';
import { inLanes, withReaders } from './lanes.js';
import { JobLedger, type JobRecord } from './job-ledger.js';
import { configFingerprint, planProof, type PartitionStart } from './proof-plan.js';
import { ProofStore } from './proof-store.js';
import { pagedRows, pages } from './reads.js';
import { buildReport, partitionReport, ViolationLog, type AuditReport, type PartitionReport, type Unattributed } from './report.js';
import { UpsertAudit, type UpsertCounts } from './upsert-audit.js';

export interface JobAuditOptions {
  keepViolations?: number;
  onProgress?: (done: number, total: number) => void;
  /** Partitions read at once, each with a Kafka reader of its own (default 4). */
  lanes?: number;
  /** Upsert mode: MiB the keyed merge holds before it spills sorted runs to disk (default 64). */
  memoryMb?: number;
  /** Where the keyed merge's runs go (default: the OS's temporary folder). */
  spillDir?: string;
  /** As the events auditor's `proofs` (src/verify/auditor.ts); without it: full, nothing recorded. */
  proofs?: { full: boolean; record: boolean; config?: string };
}

interface PartitionState {
  readonly partition: number;
  readonly low: bigint;
  readonly high: bigint;
  /** The last stable offset: the end of what a read_committed consumer can read (lag is counted to it). */
  readonly stable: bigint;
  readonly checkpoint: StoredCheckpoint | null;
  readonly end: bigint;
  readonly start: PartitionStart;
  readonly ledger: JobLedger;
  readonly blocked: boolean;
  /** Records below this offset were read. */
  scanned: bigint;
  /** Upsert violations counted on this partition, and rows ahead of its checkpoint. */
  readonly counts: UpsertCounts;
  belowLogStart: number;
}

const max = (a: bigint, b: bigint) => (a > b ? a : b);
const NEVER = new AbortController().signal;

export class JobAuditor {
  private readonly violations: ViolationLog;
  private readonly t: EngineTables;
  private upsert: UpsertAudit | null = null;

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
    const started = Date.now();
    const runId = types.TimeUuid.now().toString();
    const { config, options } = this;
    const ks = config.keyspace;
    const admin = new KafkaAdmin(config);
    try {
      if ((await admin.partitionCount(config.topic)) === null) throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${config.topic} does not exist; nothing to verify`);
      const stored = await new CheckpointStore(this.session, ks, config.topic, this.job.legacyTables === true ? undefined : this.job.name).readStored();
      const marks = await admin.watermarks(config.topic);

      const store = options.proofs !== undefined && (await ProofStore.available(this.session, ks)) ? new ProofStore(this.session, ks, this.job.name, config.topic) : null;
      const topicId = await admin.topicId(config.topic);
      const proofConfig = options.proofs?.config ?? configFingerprint({ ...(this.job.settings ?? {}), topic: config.topic });
      const plan = planProof(
        marks.map((w) => w.partition),
        store === null ? new Map() : await store.readProofs(),
        { topicId, config: proofConfig, epochs: new Map([...stored].map(([p, c]) => [p, c.epoch])) },
        new Map(marks.map((w) => [w.partition, w.high])),
        options.proofs?.full ?? true,
      );
      const full = plan.every((s) => s.from === null);
      const states = marks.map((w, i) => this.partitionState(w, stored.get(w.partition) ?? null, plan[i]!));
      const byPartition = new Map(states.map((s) => [s.partition, s]));
      for (const p of stored.keys()) if (!byPartition.has(p)) this.violations.add({ kind: 'checkpoint', partition: p, message: `partition ${p}: a checkpoint for a partition the topic does not have` });
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

      const total = states.reduce((n, s) => n + Number(max(0n, this.readTo(s) - s.ledger.position)), 0);
      const progress = { done: 0, total };
      try {
        await withReaders(config, options.lanes ?? 4, states.filter((s) => s.ledger.position < this.readTo(s)).length, (readers) =>
          inLanes(readers, states, async (reader, s) => {
            await this.scan(reader, s, progress);
            await this.outsideRange(s);
          }),
        );
        await this.unknownPartitions(new Set(byPartition.keys()));
        if (this.upsert !== null) await (full ? this.upsert.judgeAll() : this.upsert.judgeTouched());
      } finally {
        await this.upsert?.close();
      }

      const recorded = store !== null && options.proofs?.record === true && topicId !== null;
      if (recorded) {
        await Promise.all(
          states.map((s) => {
            const proved = this.provedTo(s);
            return store.writeProof(s.start, { topicId, epoch: s.checkpoint?.epoch ?? 0, config: proofConfig, proved, counted: proved, runId });
          }),
        );
      }
      const report = buildReport({
        started,
        runId,
        plan,
        proofRecorded: recorded,
        topic: config.topic,
        keyspace: ks,
        partitions: states.map((s) => this.partitionReport(s)),
        violations: this.violations,
        unattributed,
        ...(this.upsert === null ? {} : { spilledRuns: this.upsert.spilledRuns }),
      });
      const notes = this.audit.notes?.() ?? [];
      return notes.length === 0 ? report : { ...report, notes };
    } finally {
      await admin.close();
    }
  }

  /** Upsert mode reads to the log end, so that a row written by a batch in flight is recognised. */
  private readTo(s: PartitionState): bigint {
    return this.audit.mode === 'upsert' ? s.high : s.end;
  }

  private provedTo(s: PartitionState): bigint {
    if (s.blocked) return s.start.proved;
    return this.violations.provedTo(s.partition, max(s.scanned, s.start.proved));
  }

  private partitionState(w: Watermarks, checkpoint: StoredCheckpoint | null, start: PartitionStart): PartitionState {
    const cp = checkpoint?.next ?? null;
    const blocked = cp !== null && (cp < w.low || cp > w.high);
    if (blocked) this.violations.add({ kind: 'checkpoint', partition: w.partition, offset: String(cp), message: `partition ${w.partition}: checkpoint ${cp} is outside the log [${w.low}, ${w.high}]` });
    const end = cp === null ? w.low : cp < w.low ? w.low : cp > w.high ? w.high : cp;
    const from = max(w.low, start.proved);
    const ledger = new JobLedger(w.partition, from, this.violations, { mode: this.audit.mode, table: this.audit.table, valueColumns: this.audit.columns });
    return { partition: w.partition, low: w.low, high: w.high, stable: w.stable, checkpoint, end, start, ledger, blocked, scanned: from, counts: { missing: 0, extra: 0, mismatched: 0, aheadOfCheckpoint: 0, skipped: {} }, belowLogStart: 0 };
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
  private async scan(reader: LogReader, s: PartitionState, progress: { done: number; total: number }): Promise<void> {
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
        progress.done += records.length;
        this.options.onProgress?.(progress.done, progress.total);
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
          else s.ledger.extraRow(table, offset, `beyond the log end ${s.high}`);
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

  private partitionReport(s: PartitionState): PartitionReport {
    return partitionReport(
      { ...s, checkpoint: s.checkpoint?.next ?? null },
      { checkedFrom: max(s.low, s.start.proved), startedOver: s.start.why, provedTo: this.provedTo(s), ledger: s.ledger, belowLogStart: s.belowLogStart, aheadOfCheckpoint: s.counts.aheadOfCheckpoint, also: s.counts },
    );
  }
}
