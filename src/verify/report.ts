/**
 * What an audit finds: the violations of docs/design.md §4 (each naming its partition and offset, or its
 * alert), the per-partition ledger and the alert comparison. Plain data, JSON-ready (offsets as
 * decimal strings, since they are 64-bit).
 */
import { latestProof, type PartitionStart } from './proof-plan.js';

/** Every kind of violation the auditor reports. */
export const ViolationKinds = [
  /** An offset the topic holds, below the checkpoint, with no row in `events` nor in `quarantine`. */
  'missing',
  /** A row for an offset the topic does not hold (a gap, beyond the drained log end, an unknown partition). */
  'extra',
  /** A row whose columns differ from the record (events: id, ts, source, client, health; quarantine: topic, reason, raw_length, raw_sha256). */
  'mismatch',
  /** A record that decodes, stored in `quarantine`. */
  'quarantined_valid',
  /** A record that does not decode, stored in `events`. */
  'stored_malformed',
  /** A checkpoint below the log start (records deleted before they were processed), beyond the log end, or for a partition the topic does not have. */
  'checkpoint',
  /** An alert window whose count reaches the threshold with no row (table) or no message (topic). */
  'alert_missing',
  /** An alert row or latest message for a window that does not reach the threshold. */
  'alert_extra',
  /** An alert row or latest message with another count than the recomputation. */
  'alert_count',
  /** A message on the alerts topic that cannot be read as an alert (bad JSON, key not `source@windowEnd`). */
  'alert_malformed',
  /** The topic could not be read up to the checkpoint, so the offsets left are not judged. */
  'incomplete_read',
] as const;
export type ViolationKind = (typeof ViolationKinds)[number];

export interface Violation {
  readonly kind: ViolationKind;
  readonly partition?: number;
  /** Decimal, 64-bit. */
  readonly offset?: string;
  /** For alert violations: where the alert was looked for. */
  readonly where?: 'table' | 'topic';
  readonly alert?: { readonly source: string; readonly ts: number; readonly expected: number | null; readonly found: number | null };
  /** One line a person can act on. */
  readonly message: string;
}

/**
 * Collects violations: every one is counted, the first `keep` are kept with their detail (a run with
 * millions of them must not hold them all in memory).
 */
export class ViolationLog {
  readonly counts: Record<ViolationKind, number> = Object.fromEntries(ViolationKinds.map((k) => [k, 0])) as Record<ViolationKind, number>;
  readonly kept: Violation[] = [];
  total = 0;

  constructor(private readonly keep = 1000) {}

  /** Per partition of the audited topic, the lowest offset a violation names: a proof stops there. */
  readonly firstOffset = new Map<number, bigint>();

  add(v: Violation): void {
    this.counts[v.kind]++;
    this.total++;
    if (this.kept.length < this.keep) this.kept.push(v);
    // Alert violations name windows (or the alerts topic's offsets), not the audited topic's.
    if (v.partition !== undefined && v.offset !== undefined && v.where === undefined) {
      const o = BigInt(v.offset);
      const f = this.firstOffset.get(v.partition);
      if (f === undefined || o < f) this.firstOffset.set(v.partition, o);
    }
  }

  /** Where a partition's proof ends: at its first violation, else at `upTo`. */
  provedTo(partition: number, upTo: bigint): bigint {
    const f = this.firstOffset.get(partition);
    return f !== undefined && f < upTo ? f : upTo;
  }
}

/** Ranges of offsets below the checkpoint that the broker did not return. */
export interface Gaps {
  offsets: number;
  ranges: number;
  /** The first few, `from..to` inclusive. */
  examples: string[];
}

export interface PartitionReport {
  partition: number;
  /**
   * The first offset this run judged: the log start, or where the last recorded proof ended (an
   * incremental run judges nothing below it).
   */
  checkedFrom: string;
  /** Why the partition was checked from the log start (null: it continued the last proof). */
  startedOver: string | null;
  /** Every offset below is proved once this run is recorded (the first violation stops it). */
  provedTo: string;
  /** Watermarks when the audit started. */
  logStart: string;
  logEnd: string;
  /** The stored checkpoint (next offset to read), or null when never checkpointed. */
  checkpoint: string | null;
  /** log end − checkpoint (log end − log start when never checkpointed). */
  lag: string;
  /** Records read from the topic in [log start, checkpoint). */
  records: number;
  /** Records whose `events` row matches. */
  stored: number;
  /** Records whose `quarantine` row matches. */
  quarantined: number;
  /** `quarantined` by reason. */
  reasons: Record<string, number>;
  /**
   * Records that rightly left no row, by why: `filtered` (the job's rule), `expired` (their TTL passed;
   * upsert: keys whose last record expired). Present only when there are some.
   */
  skipped?: Record<string, number>;
  missing: number;
  extra: number;
  /** mismatch + quarantined_valid + stored_malformed. */
  mismatched: number;
  gaps: Gaps;
  /** Rows below the log start: records deleted by retention after they were stored (not checkable). */
  belowLogStart: number;
  /** Rows at or after the checkpoint but below the log end: batches in flight on a live pipeline. */
  aheadOfCheckpoint: number;
}

export interface AlertSideReport {
  /** The table, or the topic's name. */
  name: string;
  /** Rows, or distinct keys (latest message each). */
  found: number;
  /** Messages read (topic only). */
  messages?: number;
  missing: number;
  extra: number;
  count: number;
  malformed: number;
  /** False when the topic does not exist. */
  exists: boolean;
}

export interface AlertsReport {
  rule: { windowMs: number; slideMs: number; threshold: number; health: number };
  /**
   * False on a full run (every window counted from the topic, the whole table and topic compared);
   * true when only the windows new records fall in (and those of new alert messages) were judged.
   */
  incremental: boolean;
  /** Windows judged. */
  windows: number;
  /** Alerts expected among the windows judged. */
  expected: number;
  table: AlertSideReport;
  topic: AlertSideReport;
  /**
   * True when no record at or beyond a checkpoint falls in any window (nothing in flight can change an
   * alert). Windows such a record falls in (`pendingWindows`) are not judged: their differences are
   * counted as `unsettled`, not as violations; every other window is judged, live or not.
   */
  settled: boolean;
  pendingWindows: number;
  unsettled: number;
}

export interface AuditReport {
  ok: boolean;
  /**
   * full: every partition checked from the log start; incremental: from where the last recorded run's
   * proof ended (`partitions[].checkedFrom`), nothing below it checked again (`verify --full` does).
   */
  mode: 'full' | 'incremental';
  /** This run's id (the audit_runs row, when recorded). */
  runId: string;
  /** The last recorded run this one continued (incremental), or null. */
  continues: { runId: string | null; at: string | null } | null;
  /** Whether this run's proof was recorded for the next run (false: --no-record, or no proof tables). */
  proofRecorded: boolean;
  topic: string;
  keyspace: string;
  startedAt: string;
  durationMs: number;
  /** Records read from the topic per second of the whole audit. */
  recordsPerSecond: number;
  /** Peak resident set size of the process, MiB. */
  peakRssMb: number;
  partitions: PartitionReport[];
  totals: { records: number; stored: number; quarantined: number; missing: number; extra: number; mismatched: number; lag: string; gapOffsets: number; belowLogStart: number; aheadOfCheckpoint: number };
  /** Rows in Cassandra partitions the topic does not have, per partition. */
  unknownPartitions: Array<{ partition: number; events: number; quarantine: number; checkpoint: string | null }>;
  alerts: AlertsReport | null;
  violationCounts: Record<ViolationKind, number>;
  violationTotal: number;
  /** The first violations, in the order found. */
  violations: Violation[];
  /** An upsert job's keyed merge: sorted runs it wrote to disk (0: everything fit its memory budget). */
  spilledRuns?: number;
  /** The job's notes on what it judged that is not a violation (JobAudit.notes). */
  notes?: string[];
}

/**
 * How early a row with a TTL may be gone: Cassandra counts expiry in whole seconds from the second it
 * received the write (its clock rounded down), so a row written USING TTL ceil(seconds left) expires
 * at most a second before its record's time + TTL.
 */
export const TTL_SLACK_MS = 1000;

/** Violations not tied to one partition (upsert keys whose rows no record names), added to the totals. */
export interface Unattributed {
  missing: number;
  extra: number;
  mismatched: number;
}

/**
 * The report of either auditor (the events job's and any job's): the header, the totals summed over
 * the partitions (plus what `unattributed` and the unknown partitions add), and the violations.
 */
export function buildReport(o: {
  started: number;
  runId: string;
  /** Where each partition started (full: every partition from its log start). */
  plan: readonly PartitionStart[];
  proofRecorded: boolean;
  topic: string;
  keyspace: string;
  partitions: PartitionReport[];
  violations: ViolationLog;
  unknownPartitions?: AuditReport['unknownPartitions'];
  unattributed?: Unattributed;
  alerts?: AlertsReport | null;
  spilledRuns?: number;
}): AuditReport {
  const { partitions, violations } = o;
  const unknownPartitions = o.unknownPartitions ?? [];
  const un = o.unattributed ?? { missing: 0, extra: 0, mismatched: 0 };
  const sum = (f: (p: PartitionReport) => number) => partitions.reduce((n, p) => n + f(p), 0);
  const durationMs = Date.now() - o.started;
  const records = sum((p) => p.records);
  const continued = latestProof(o.plan);
  return {
    ok: violations.total === 0,
    mode: o.plan.every((s) => s.from === null) ? 'full' : 'incremental',
    runId: o.runId,
    continues: continued === undefined ? null : { runId: continued.runId, at: continued.provedAt?.toISOString() ?? null },
    proofRecorded: o.proofRecorded,
    topic: o.topic,
    keyspace: o.keyspace,
    startedAt: new Date(o.started).toISOString(),
    durationMs,
    recordsPerSecond: Math.round(records / Math.max(0.001, durationMs / 1000)),
    peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
    partitions,
    totals: {
      records,
      stored: sum((p) => p.stored),
      quarantined: sum((p) => p.quarantined),
      missing: sum((p) => p.missing) + un.missing,
      extra: sum((p) => p.extra) + un.extra + unknownPartitions.reduce((n, u) => n + u.events + u.quarantine, 0),
      mismatched: sum((p) => p.mismatched) + un.mismatched,
      lag: String(partitions.reduce((n, p) => n + BigInt(p.lag), 0n)),
      gapOffsets: sum((p) => p.gaps.offsets),
      belowLogStart: sum((p) => p.belowLogStart),
      aheadOfCheckpoint: sum((p) => p.aheadOfCheckpoint),
    },
    unknownPartitions,
    alerts: o.alerts ?? null,
    violationCounts: { ...violations.counts },
    violationTotal: violations.total,
    violations: [...violations.kept],
    ...(o.spilledRuns === undefined ? {} : { spilledRuns: o.spilledRuns }),
  };
}

/** What a ledger counts per partition (src/verify/ledger.ts). */
export type LedgerCounts = Pick<PartitionReport, 'records' | 'stored' | 'quarantined' | 'reasons' | 'missing' | 'extra' | 'mismatched' | 'gaps'> & { skipped?: Record<string, number> };

/** One partition's line of the report, from its watermarks and checkpoint, where it was checked from, and its ledger. */
export function partitionReport(
  w: { partition: number; low: bigint; high: bigint; stable: bigint; checkpoint: bigint | null },
  o: {
    checkedFrom: bigint;
    startedOver: string | null;
    provedTo: bigint;
    ledger: LedgerCounts;
    belowLogStart: number;
    aheadOfCheckpoint: number;
    /** Violations counted outside the ledger (an upsert job's keys), and its keys that rightly have no row. */
    also?: { missing: number; extra: number; mismatched: number; skipped?: Record<string, number> };
  },
): PartitionReport {
  const l = o.ledger;
  const skipped: Record<string, number> = { ...(l.skipped ?? {}) };
  for (const [why, n] of Object.entries(o.also?.skipped ?? {})) skipped[why] = (skipped[why] ?? 0) + n;
  // Aborted records, transaction markers and a transaction still open are not lag: lag counts to the
  // last stable offset, the end of what a read_committed consumer can read.
  const lag = w.stable - (w.checkpoint ?? w.low);
  return {
    partition: w.partition,
    checkedFrom: String(o.checkedFrom),
    startedOver: o.startedOver,
    provedTo: String(o.provedTo),
    logStart: String(w.low),
    logEnd: String(w.high),
    checkpoint: w.checkpoint === null ? null : String(w.checkpoint),
    lag: String(lag < 0n ? 0n : lag),
    records: l.records,
    stored: l.stored,
    quarantined: l.quarantined,
    reasons: { ...l.reasons },
    ...(Object.keys(skipped).length === 0 ? {} : { skipped }),
    missing: l.missing + (o.also?.missing ?? 0),
    extra: l.extra + (o.also?.extra ?? 0),
    mismatched: l.mismatched + (o.also?.mismatched ?? 0),
    gaps: l.gaps,
    belowLogStart: o.belowLogStart,
    aheadOfCheckpoint: o.aheadOfCheckpoint,
  };
}
