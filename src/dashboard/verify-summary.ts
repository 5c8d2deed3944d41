/**
 * The last `verify` run as the dashboard shows it: the JSON summary `verify` stores in `audit_runs`
 * (src/verify/audit-runs.ts) read into named numbers and readable violation kinds, so the page
 * shows "records checked 12,000", not the summary's field names.
 */
import type { ViolationKind } from '../verify/report.js';

/** Each violation kind: a short name and what it means, for a person reading the page. */
export const VIOLATION_KINDS: Record<ViolationKind, { name: string; what: string }> = {
  missing: { name: 'missing', what: 'offsets with no row in events or quarantine' },
  extra: { name: 'extra', what: 'rows for offsets the topic does not hold' },
  mismatch: { name: 'mismatched', what: 'rows whose columns differ from their record' },
  quarantined_valid: { name: 'wrongly quarantined', what: 'valid records stored in quarantine' },
  stored_malformed: { name: 'wrongly stored', what: 'malformed records stored in events' },
  checkpoint: { name: 'bad checkpoint', what: 'checkpoints below the log start or beyond the log end' },
  alert_missing: { name: 'alert missing', what: 'windows at the threshold with no alert row or message' },
  alert_extra: { name: 'alert extra', what: 'alerts for windows below the threshold' },
  alert_count: { name: 'alert count wrong', what: 'alerts whose count differs from the recount' },
  alert_malformed: { name: 'alert unreadable', what: 'messages on the alerts topic that are not alerts' },
  incomplete_read: { name: 'not read', what: 'partitions the topic could not be read up to the checkpoint' },
};

export interface VerifySummary {
  /** full: from the log start; incremental: from where the last recorded proof ended. */
  mode: 'full' | 'incremental';
  topic: string | null;
  durationMs: number | null;
  partitions: number | null;
  /** Records read from the topic, from the log start up to the checkpoints. */
  records: number | null;
  stored: number | null;
  quarantined: number | null;
  /** Records beyond the checkpoints (log end − checkpoint) when it ran on a live pipeline: left for a later run. */
  notYetChecked: number | null;
  /** null: alerts not checked (`verify --skip-alerts`). */
  alerts: {
    expected: number;
    table: number | null;
    topic: number | null;
    /** False when the pipeline moved during the run: alert differences were not judged. */
    settled: boolean;
    unsettled: number;
  } | null;
  violationTotal: number;
  /** Non-zero kinds, most frequent first. */
  violations: Array<{ kind: string; name: string; what: string; count: number }>;
  /** The first violations' messages, in the order found (verify stores the first one). */
  firstViolations: string[];
}

const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'string' && /^\d+$/.test(v) ? Number(v) : null);
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** The stored summary read, or null when it is not the JSON object `verify` writes. */
export function readVerifySummary(stored: unknown): VerifySummary | null {
  if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return null;
  const s = stored as Record<string, unknown>;
  if (num(s['records']) === null) return null;
  const a = s['alerts'] !== null && typeof s['alerts'] === 'object' ? (s['alerts'] as Record<string, unknown>) : null;
  const counts = s['violations'] !== null && typeof s['violations'] === 'object' ? (s['violations'] as Record<string, unknown>) : {};
  const violations = Object.entries(counts)
    .map(([kind, n]) => ({ kind, ...(VIOLATION_KINDS[kind as ViolationKind] ?? { name: kind.replaceAll('_', ' '), what: '' }), count: num(n) ?? 0 }))
    .filter((v) => v.count > 0)
    .sort((x, y) => y.count - x.count || x.kind.localeCompare(y.kind));
  const first = Array.isArray(s['firstViolations']) ? s['firstViolations'].filter((m): m is string => typeof m === 'string') : [str(s['firstViolation'])].filter((m): m is string => m !== null);
  return {
    mode: s['mode'] === 'incremental' ? 'incremental' : 'full',
    topic: str(s['topic']),
    durationMs: num(s['durationMs']),
    partitions: num(s['partitions']),
    records: num(s['records']),
    stored: num(s['stored']),
    quarantined: num(s['quarantined']),
    notYetChecked: num(s['lag']),
    alerts:
      a === null || num(a['expected']) === null
        ? null
        : { expected: num(a['expected'])!, table: num(a['table']), topic: num(a['topic']), settled: a['settled'] !== false, unsettled: num(a['unsettled']) ?? 0 },
    violationTotal: violations.reduce((t, v) => t + v.count, 0),
    violations,
    firstViolations: first,
  };
}
