/**
 * What an audit finds: the violations of DESIGN.md §4 (each naming its partition and offset, or its
 * alert), the per-partition ledger and the alert comparison. Plain data, JSON-ready (offsets as
 * decimal strings, since they are 64-bit).
 */

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

  add(v: Violation): void {
    this.counts[v.kind]++;
    this.total++;
    if (this.kept.length < this.keep) this.kept.push(v);
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
  expected: number;
  table: AlertSideReport;
  topic: AlertSideReport;
  /**
   * True when the pipeline was drained (every checkpoint at the log end, nothing in flight) for the
   * whole audit: only then must the alerts equal the recomputation, and only then are differences
   * violations. On a live pipeline they are counted here as `unsettled` instead.
   */
  settled: boolean;
  unsettled: number;
}

export interface AuditReport {
  ok: boolean;
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
}
