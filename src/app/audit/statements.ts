/**
 * Every CQL statement of the auditor, kept apart from the code that runs them. All are reads except
 * the audit-run record. Offset ranges are read in ascending order although `events` and `quarantine`
 * are clustered by offset DESC: a reversed slice of one Cassandra partition is allowed and cheap.
 */
export function auditStatements(ks: string) {
  return {
    /** (partition, from, to): the events rows of [from, to), ascending. */
    eventsRange: `SELECT offset, id, ts, source, client, health FROM ${ks}.events WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset ASC`,
    /** (partition, from): the events rows at or after `from`, ascending (rows ahead of the checkpoint). */
    eventsFrom: `SELECT offset, id, ts, source, client, health FROM ${ks}.events WHERE partition = ? AND offset >= ? ORDER BY offset ASC`,
    /** (partition, before): the events rows below the log start (records deleted by retention). */
    eventsBelow: `SELECT offset, id, ts, source, client, health FROM ${ks}.events WHERE partition = ? AND offset < ?`,
    quarantineRange: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset ASC`,
    quarantineFrom: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset >= ? ORDER BY offset ASC`,
    quarantineBelow: `SELECT offset, topic, reason, raw_length, raw_sha256 FROM ${ks}.quarantine WHERE partition = ? AND offset < ?`,
    /** The Kafka partitions that have rows (a scan of partition keys only). */
    eventsPartitions: `SELECT DISTINCT partition FROM ${ks}.events`,
    quarantinePartitions: `SELECT DISTINCT partition FROM ${ks}.quarantine`,
    /** Every alert row (a full scan, paged). */
    alerts: `SELECT source, ts, event_count FROM ${ks}.alerts`,
    /** (id timeuuid, ok, summary): one audit run; the dashboard shows the latest. Each run has its own id, so nothing is overwritten. */
    recordRun: `INSERT INTO ${ks}.audit_runs (id, finished_at, ok, summary) VALUES (?, toTimestamp(now()), ?, ?)`,
  };
}
