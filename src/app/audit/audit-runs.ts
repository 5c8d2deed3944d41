/**
 * Records each audit in `<keyspace>.audit_runs` (migration 005) for the dashboard, which shows the
 * latest row: whether it held, and a short JSON summary (the full report is what `verify --json`
 * prints).
 */
import { types, type Client } from '../../cassandra/session.js';
import type { AuditReport } from './report.js';
import { auditStatements } from './statements.js';

/** The summary stored with a run: totals, the violations by kind (non-zero only), the alerts. */
export function auditSummary(r: AuditReport): Record<string, unknown> {
  return {
    ok: r.ok,
    topic: r.topic,
    startedAt: r.startedAt,
    durationMs: r.durationMs,
    partitions: r.partitions.length,
    ...r.totals,
    alerts:
      r.alerts === null
        ? null
        : { expected: r.alerts.expected, table: r.alerts.table.found, topic: r.alerts.topic.found, settled: r.alerts.settled, unsettled: r.alerts.unsettled },
    violations: Object.fromEntries(Object.entries(r.violationCounts).filter(([, n]) => n > 0)),
    firstViolation: r.violations[0]?.message ?? null,
  };
}

/** Inserts one row with a fresh timeuuid; returns its id. Never overwrites an earlier run. */
export async function recordAuditRun(session: Client, keyspace: string, report: AuditReport): Promise<string> {
  const id = types.TimeUuid.now();
  await session.execute(auditStatements(keyspace).recordRun, [id, report.ok, JSON.stringify(auditSummary(report))], { prepare: true });
  return id.toString();
}
