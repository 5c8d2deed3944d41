/**
 * Records each audit in `<keyspace>.audit_runs` (migration 005), one row per run, and as the latest run
 * of its job and topic in `audit_latest` (migration 040), which the dashboard shows: whether it held,
 * and a short JSON summary (the full report is what `verify --json` prints).
 */
import { types, type Client } from '../cassandra/session.js';
import { ProofStore } from './proof-store.js';
import type { AuditReport } from './report.js';
import { auditStatements } from './statements.js';

/** The summary stored with a run: totals, the violations by kind (non-zero only), the alerts. */
export function auditSummary(r: AuditReport): Record<string, unknown> {
  return {
    ok: r.ok,
    mode: r.mode,
    topic: r.topic,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    partitions: r.partitions.length,
    ...r.totals,
    alerts:
      r.alerts === null
        ? null
        : { expected: r.alerts.expected, windows: r.alerts.windows, table: r.alerts.table.found, topic: r.alerts.topic.found, settled: r.alerts.settled, unsettled: r.alerts.unsettled },
    violations: Object.fromEntries(Object.entries(r.violationCounts).filter(([, n]) => n > 0)),
    firstViolation: r.violations[0]?.message ?? null,
  };
}

/**
 * Inserts the run's row (its id is the report's run id, a timeuuid, so nothing is overwritten) and
 * makes it the latest run of `job` on its topic (skipped in a keyspace without migration 040).
 * Returns the id.
 */
export async function recordAuditRun(session: Client, keyspace: string, report: AuditReport, job: string): Promise<string> {
  const summary = JSON.stringify(auditSummary(report));
  await session.execute(auditStatements(keyspace).recordRun, [types.TimeUuid.fromString(report.runId), report.ok, summary], { prepare: true });
  if (await ProofStore.available(session, keyspace)) await new ProofStore(session, keyspace, job, report.topic).recordLatest(report.runId, report.ok, summary);
  return report.runId;
}
