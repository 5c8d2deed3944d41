/**
 * Every CQL statement of the auditor, kept apart from the code that runs them (those of the events
 * rows, which depend on the job's layout, are in event-rows.ts). All are reads except
 * the audit-run record. Offset ranges are read in ascending order although `events` and `quarantine`
 * are clustered by offset DESC: a reversed slice of one Cassandra partition is allowed and cheap.
 */
export function auditStatements(ks: string) {
  return {
    quarantineRange: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset ASC`,
    quarantineFrom: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset >= ? ORDER BY offset ASC`,
    quarantineBelow: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset < ?`,
    quarantinePartitions: `SELECT DISTINCT partition FROM ${ks}.quarantine`,
    /** Every alert row (a full scan, paged). */
    alerts: `SELECT source, ts, event_count FROM ${ks}.alerts`,
    /** (id timeuuid, ok, summary): one audit run; the dashboard shows the latest. Each run has its own id, so nothing is overwritten. */
    recordRun: `INSERT INTO ${ks}.audit_runs (id, finished_at, ok, summary) VALUES (?, toTimestamp(now()), ?, ?)`,
  };
}
