/**
 * The auditor for any job that describes its output (`Job.audit`, src/engine/job-audit.ts): what
 * `exactlyonce verify --job` and `chaos --job` run. Same report and exit codes as the events auditor
 * (src/app/audit/auditor.ts), against the broker's log:
 *
 * - checkpoints first (the job's own, src/engine/engine-tables.ts), then the watermarks: every row
 *   below a checkpoint is durable before the audit looks at it;
 * - every record below the checkpoint says what it must produce (`audit.expect`); a quarantined one
 *   must be in the job's quarantine with that reason, any other must not be there;
 * - log mode: exactly that row per offset, no other row (rows at or beyond the checkpoint are batches
 *   in flight while the log holds their offset);
 * - upsert mode: per key, the row of its last record (the highest offset not quarantined), or no row
 *   when that record deletes the key, written at that record's timestamp (no other writer); every key's
 *   records on one partition; no row for a key no record names. A row newer than the checkpoint (a
 *   batch in flight on a live pipeline) is counted as ahead of the checkpoint, not judged.
 *
 * It holds the expected state in memory (one entry per offset in log mode, per key in upsert mode):
 * meant for the sizes tests, chaos runs and spot checks use, not for auditing billions of rows.
 */
import { fromLong, isRetriableCassandraError, type Client, type Row } from '../../cassandra/session.js';
import type { ConnectionConfig } from '../../config.js';
import { CheckpointStore } from '../../engine/checkpoint-store.js';
import type { Expectation } from '../../engine/job-audit.js';
import type { Job, SourceRecord } from '../../engine/job.js';
import { engineTables } from '../../engine/engine-tables.js';
import { retry } from '../../engine/retry.js';
import { ExactlyOnceError } from '../../errors.js';
import { KafkaAdmin } from '../../kafka/admin.js';
import { IncompleteRead, LogReader } from '../../kafka/log-reader.js';
import { canonical } from '../../sink/cql-types.js';
import { ViolationLog, type AuditReport, type PartitionReport, type ViolationKind } from './report.js';

const text = (v: unknown) => JSON.stringify(canonical(v));
const NEVER = new AbortController().signal;

interface PartitionState {
  partition: number;
  low: bigint;
  high: bigint;
  /** The last stable offset: the end of what a read_committed consumer can read (lag is counted to it). */
  stable: bigint;
  checkpoint: bigint | null;
  end: bigint;
  records: number;
  stored: number;
  quarantined: number;
  reasons: Record<string, number>;
  missing: number;
  extra: number;
  mismatched: number;
  belowLogStart: number;
  aheadOfCheckpoint: number;
  /** Offsets read, for gaps. */
  gapOffsets: number;
  gapRanges: number;
  gapExamples: string[];
}

/** Upsert mode: what the audit knows of one key. */
interface KeyState {
  key: Readonly<Record<string, unknown>>;
  /** The last record below the checkpoint that is not quarantined, if any. */
  last?: { partition: number; offset: bigint; e: Expectation };
  /** Offsets of the key's records at or beyond the checkpoint (in flight). */
  inFlight: Set<bigint>;
  partitions: Set<number>;
}

export class JobAuditor {
  private readonly violations: ViolationLog;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly job: Job<unknown>,
    private readonly options: { keepViolations?: number; onProgress?: (done: number, total: number) => void } = {},
  ) {
    this.violations = new ViolationLog(options.keepViolations ?? 1000);
  }

  private add(kind: ViolationKind, message: string, partition?: number, offset?: bigint): void {
    this.violations.add({ kind, message, ...(partition === undefined ? {} : { partition }), ...(offset === undefined ? {} : { offset: String(offset) }) });
  }

  private async *rows(query: string, params: unknown[]): AsyncGenerator<Row> {
    let pageState: string | undefined;
    do {
      const state = pageState;
      const r = await retry(() => this.session.execute(query, params, { prepare: true, fetchSize: 5000, pageState: state }), {
        server: 'Cassandra',
        isRetriable: isRetriableCassandraError,
        deadlineMs: 120_000,
      });
      yield* r.rows;
      pageState = r.pageState ?? undefined;
    } while (pageState !== undefined);
  }

  async run(): Promise<AuditReport> {
    const audit = this.job.audit;
    if (audit === undefined) throw new ExactlyOnceError('EO_USAGE', `job ${this.job.name} does not describe its output (no \`audit\`): it cannot be verified`);
    const started = Date.now();
    const { config } = this;
    const ks = config.keyspace;
    const tablesKey = this.job.legacyTables === true ? undefined : this.job.name;
    const admin = new KafkaAdmin(config);
    const reader = await LogReader.open(config);
    try {
      if ((await admin.partitionCount(config.topic)) === null) throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${config.topic} does not exist; nothing to verify`);
      const checkpoints = await new CheckpointStore(this.session, ks, config.topic, tablesKey).readAll();
      const marks = await admin.watermarks(config.topic);
      const states = marks.map((w): PartitionState => {
        const cp = checkpoints.get(w.partition) ?? null;
        if (cp !== null && (cp < w.low || cp > w.high)) this.add('checkpoint', `partition ${w.partition}: checkpoint ${cp} is outside the log [${w.low}, ${w.high}]`, w.partition);
        const end = cp === null ? w.low : cp < w.low ? w.low : cp > w.high ? w.high : cp;
        return { partition: w.partition, low: w.low, high: w.high, stable: w.stable, checkpoint: cp, end, records: 0, stored: 0, quarantined: 0, reasons: {}, missing: 0, extra: 0, mismatched: 0, belowLogStart: 0, aheadOfCheckpoint: 0, gapOffsets: 0, gapRanges: 0, gapExamples: [] };
      });
      for (const p of checkpoints.keys()) if (!states.some((s) => s.partition === p)) this.add('checkpoint', `partition ${p}: a checkpoint for a partition the topic does not have`, p);

      // Upsert mode reads to the log end, so that a row written by a batch in flight is recognised.
      const total = states.reduce((n, s) => n + Number((audit.mode === 'upsert' ? s.high : s.end) - s.low), 0);
      let done = 0;
      const logExpected = new Map<string, { s: PartitionState; offset: bigint; e: Expectation }>();
      const keys = new Map<string, KeyState>();
      const quarantineExpected = new Map<string, { s: PartitionState; offset: bigint; reason: string | null }>();
      for (const s of states) {
        const until = audit.mode === 'upsert' ? s.high : s.end;
        let next = s.low;
        try {
          for await (const chunk of reader.read(config.topic, s.partition, s.low, until)) {
            await this.lookup(chunk.records);
            for (const record of chunk.records) {
              if (record.offset > next) this.gap(s, next, record.offset);
              next = record.offset + 1n;
              const e = audit.expect(record);
              const below = record.offset < s.end;
              if (below) {
                s.records++;
                quarantineExpected.set(`${s.partition}/${record.offset}`, { s, offset: record.offset, reason: e.kind === 'quarantine' ? e.reason : null });
              }
              if (e.kind === 'quarantine') continue;
              if (audit.mode === 'log') {
                if (below) logExpected.set(text(e.key), { s, offset: record.offset, e });
                continue;
              }
              const id = text(e.key);
              const k = keys.get(id) ?? { key: e.key, inFlight: new Set<bigint>(), partitions: new Set<number>() };
              keys.set(id, k);
              if (!k.partitions.has(s.partition) && k.partitions.size > 0) {
                this.add('mismatch', `key ${id} has records on partitions ${[...k.partitions, s.partition].join(' and ')}: an upsert needs all records of a key on one partition (key the records by it)`, s.partition, record.offset);
              }
              k.partitions.add(s.partition);
              if (below) k.last = { partition: s.partition, offset: record.offset, e };
              else k.inFlight.add(record.offset);
            }
            done += chunk.records.length;
            this.options.onProgress?.(done, total);
          }
        } catch (e) {
          if (!(e instanceof IncompleteRead)) throw e;
          this.add('incomplete_read', `partition ${s.partition}: the topic could not be read from offset ${e.at} on; the offsets left are not judged`, s.partition);
        }
        if (next < until) this.gap(s, next, until);
      }

      const byPartition = new Map(states.map((s) => [s.partition, s]));
      // The job's quarantine: exactly the records whose expectation is quarantine, with their reason.
      const t = engineTables(ks, tablesKey);
      const inQuarantine = new Set<string>();
      const quarantine: Array<{ partition: number; offset: bigint; reason: string }> = [];
      for (const s of states) {
        for await (const r of this.rows(`SELECT offset, reason FROM ${t.quarantine} WHERE ${t.jobWhere}partition = ?`, [...t.jobParams, s.partition])) {
          quarantine.push({ partition: s.partition, offset: fromLong(r['offset']), reason: r['reason'] as string });
        }
      }
      for (const row of quarantine) {
        const id = `${row.partition}/${row.offset}`;
        inQuarantine.add(id);
        const want = quarantineExpected.get(id);
        const s = byPartition.get(row.partition);
        if (want === undefined) {
          if (s !== undefined && row.offset < s.low) s.belowLogStart++;
          else if (s !== undefined && row.offset >= s.end && row.offset < s.high) s.aheadOfCheckpoint++;
          else {
            if (s !== undefined) s.extra++;
            this.add('extra', `partition ${row.partition} offset ${row.offset}: a quarantine row for an offset the audit did not read below the checkpoint`, row.partition, row.offset);
          }
        } else if (want.reason === null) {
          want.s.mismatched++;
          this.add('quarantined_valid', `partition ${row.partition} offset ${row.offset}: quarantined (${row.reason}) though the job's record is valid`, row.partition, row.offset);
        } else if (want.reason !== row.reason) {
          want.s.mismatched++;
          this.add('mismatch', `partition ${row.partition} offset ${row.offset}: quarantined as ${row.reason}, the job says ${want.reason}`, row.partition, row.offset);
        } else {
          want.s.quarantined++;
          want.s.reasons[row.reason] = (want.s.reasons[row.reason] ?? 0) + 1;
        }
      }
      for (const [id, want] of quarantineExpected) {
        if (want.reason !== null && !inQuarantine.has(id)) {
          want.s.missing++;
          this.add('missing', `partition ${want.s.partition} offset ${want.offset}: the record must be quarantined (${want.reason}) and is not`, want.s.partition, want.offset);
        }
      }

      const columns = [...audit.keyColumns, ...audit.columns];
      if (audit.mode === 'log') await this.checkLog(audit.table, columns, audit.columns, logExpected, byPartition);
      else await this.checkUpsert(audit.table, audit.keyColumns, audit.columns, keys, audit.writeTimestamp);
      for (const s of states) if (audit.mode === 'upsert') s.stored = s.records - [...quarantineExpected.values()].filter((q) => q.s === s && q.reason !== null).length;
      return this.report(started, states);
    } finally {
      await reader.close();
      await admin.close();
    }
  }

  /**
   * What the job's decode reads from another server (a Schema Registry's schemas): fetched before its
   * records are judged, as the workers do, retried while the server does not answer.
   */
  private async lookup(records: readonly SourceRecord[]): Promise<void> {
    const lookup = this.job.lookup;
    if (lookup === undefined) return;
    await retry(() => lookup.fetch(records, NEVER), { server: lookup.server, deadlineMs: 300_000 });
  }

  private gap(s: PartitionState, from: bigint, to: bigint): void {
    s.gapOffsets += Number(to - from);
    s.gapRanges++;
    if (s.gapExamples.length < 5) s.gapExamples.push(to - from === 1n ? `${from}` : `${from}..${to - 1n}`);
  }

  private async checkLog(table: string, columns: string[], valueColumns: readonly string[], expected: Map<string, { s: PartitionState; offset: bigint; e: Expectation }>, byPartition: Map<number, PartitionState>): Promise<void> {
    const seen = new Set<string>();
    for await (const row of this.rows(`SELECT ${columns.join(', ')} FROM ${this.config.keyspace}.${table}`, [])) {
      const partition = row['partition'] as number;
      const offset = fromLong(row['offset']);
      const id = text({ offset: row['offset'], partition });
      const want = expected.get(id);
      if (want === undefined) {
        const s = byPartition.get(partition);
        if (s !== undefined && offset < s.low) s.belowLogStart++;
        else if (s !== undefined && offset >= s.end && offset < s.high) s.aheadOfCheckpoint++;
        else {
          if (s !== undefined) s.extra++;
          this.add('extra', `partition ${partition} offset ${offset}: a row in ${table} for an offset that is not a valid record below the checkpoint`, partition, offset);
        }
        continue;
      }
      seen.add(id);
      const row2 = (want.e as { row: Record<string, unknown> }).row;
      const diff = valueColumns.filter((c) => text(row[c]) !== text(row2[c]));
      if (diff.length > 0) {
        want.s.mismatched++;
        this.add('mismatch', `partition ${partition} offset ${offset}: ${diff.map((c) => `${c} is ${text(row[c])}, the record says ${text(row2[c])}`).join('; ')}`, partition, offset);
      } else want.s.stored++;
    }
    for (const [id, want] of expected) {
      if (!seen.has(id)) {
        want.s.missing++;
        this.add('missing', `partition ${want.s.partition} offset ${want.offset}: no row in ${table}`, want.s.partition, want.offset);
      }
    }
  }

  private async checkUpsert(table: string, keyColumns: readonly string[], valueColumns: readonly string[], keys: Map<string, KeyState>, writeTimestamp: ((offset: bigint) => bigint) | undefined): Promise<void> {
    const times = valueColumns.map((c, i) => `WRITETIME(${c}) AS wt${i}`);
    const seen = new Set<string>();
    for await (const row of this.rows(`SELECT ${[...keyColumns, ...valueColumns, ...times].join(', ')} FROM ${this.config.keyspace}.${table}`, [])) {
      const key = Object.fromEntries(keyColumns.map((k) => [k, row[k]]));
      const id = text(key);
      // A collection's WRITETIME is one per element (Cassandra 5); a null cell has none.
      const written = valueColumns.flatMap((_, i) => [row[`wt${i}`]].flat()).filter((t) => t !== null && t !== undefined).map((t) => BigInt(String(t)));
      const wt = written.length === 0 ? null : written.reduce((a, b) => (a > b ? a : b));
      seen.add(id);
      const k = keys.get(id);
      const last = k?.last;
      // A write of a batch in flight: newer than the key's last record below the checkpoint.
      if (k !== undefined && wt !== null && writeTimestamp !== undefined && [...k.inFlight].some((o) => writeTimestamp(o) === wt)) {
        this.addAhead(k);
        continue;
      }
      if (last === undefined || last.e.kind === 'delete') {
        const where = last === undefined ? 'no record below the checkpoints names this key' : `its last record (partition ${last.partition} offset ${last.offset}) deletes it`;
        this.add('extra', `${table} key ${id}: a row, though ${where}`, last?.partition, last?.offset);
        continue;
      }
      const want = (last.e as { row: Record<string, unknown> }).row;
      const diff = valueColumns.filter((c) => text(row[c]) !== text(want[c]));
      const wantTs = writeTimestamp?.(last.offset);
      if (diff.length > 0) {
        this.add('mismatch', `${table} key ${id}: ${diff.map((c) => `${c} is ${text(row[c])}, its last record (partition ${last.partition} offset ${last.offset}) says ${text(want[c])}`).join('; ')}`, last.partition, last.offset);
      } else if (wantTs !== undefined && wt !== null && wt !== wantTs) {
        this.add('mismatch', `${table} key ${id}: written at timestamp ${wt}, not ${wantTs} (from its last record's offset ${last.offset}): another writer touched the table`, last.partition, last.offset);
      }
    }
    for (const [id, k] of keys) {
      if (seen.has(id) || k.last === undefined || k.last.e.kind === 'delete') continue;
      if (k.inFlight.size > 0) {
        this.addAhead(k); // a batch in flight may have deleted it
        continue;
      }
      this.add('missing', `${table} key ${id}: no row, though its last record (partition ${k.last.partition} offset ${k.last.offset}) writes one`, k.last.partition, k.last.offset);
    }
  }

  private aheadCount = 0;
  private addAhead(_k: KeyState): void {
    this.aheadCount++;
  }

  private report(started: number, states: PartitionState[]): AuditReport {
    const counts = this.violations.counts;
    // Per-partition violation counts (upsert violations are per key: counted on the partition of the key's last record).
    const perPartition = (kind: ViolationKind[], p: number) => this.violations.kept.filter((v) => kind.includes(v.kind) && v.partition === p).length;
    const partitions: PartitionReport[] = states.map((s) => {
      // Aborted records, transaction markers and a transaction still open are not lag: nothing to read.
      const lag = s.stable - (s.checkpoint ?? s.low);
      return {
        partition: s.partition,
        logStart: String(s.low),
        logEnd: String(s.high),
        checkpoint: s.checkpoint === null ? null : String(s.checkpoint),
        lag: String(lag < 0n ? 0n : lag),
        records: s.records,
        stored: s.stored,
        quarantined: s.quarantined,
        reasons: { ...s.reasons },
        missing: this.job.audit?.mode === 'upsert' ? perPartition(['missing'], s.partition) : s.missing,
        extra: this.job.audit?.mode === 'upsert' ? perPartition(['extra'], s.partition) : s.extra,
        mismatched: this.job.audit?.mode === 'upsert' ? perPartition(['mismatch', 'quarantined_valid'], s.partition) : s.mismatched,
        gaps: { offsets: s.gapOffsets, ranges: s.gapRanges, examples: s.gapExamples },
        belowLogStart: s.belowLogStart,
        aheadOfCheckpoint: s.aheadOfCheckpoint + (s === states[0] ? this.aheadCount : 0),
      };
    });
    const sum = (f: (p: PartitionReport) => number) => partitions.reduce((n, p) => n + f(p), 0);
    const durationMs = Date.now() - started;
    const records = sum((p) => p.records);
    const lag = partitions.reduce((n, p) => n + BigInt(p.lag), 0n);
    return {
      ok: this.violations.total === 0,
      topic: this.config.topic,
      keyspace: this.config.keyspace,
      startedAt: new Date(started).toISOString(),
      durationMs,
      recordsPerSecond: Math.round(records / Math.max(0.001, durationMs / 1000)),
      peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
      partitions,
      totals: {
        records,
        stored: sum((p) => p.stored),
        quarantined: sum((p) => p.quarantined),
        missing: counts.missing,
        extra: counts.extra,
        mismatched: counts.mismatch + counts.quarantined_valid + counts.stored_malformed,
        lag: String(lag),
        gapOffsets: sum((p) => p.gaps.offsets),
        belowLogStart: sum((p) => p.belowLogStart),
        aheadOfCheckpoint: sum((p) => p.aheadOfCheckpoint),
      },
      unknownPartitions: [],
      alerts: null,
      violationCounts: { ...counts },
      violationTotal: this.violations.total,
      violations: [...this.violations.kept],
    };
  }
}
