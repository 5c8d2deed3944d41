/**
 * What `checkpoints reset --all --rebind` clears before the job starts over on a re-created topic: every
 * output of the old topic. Its rows are keyed by (partition, offset) of a log that no longer exists, its
 * alert counts carry the old offsets as write timestamps (`through_offset`, src/jobs/events/alerts.ts: a new
 * count of the same window, at lower offsets, could never win over them), and its alerts, in the table
 * and on the alerts topic, were computed from the old events. Left in place, `verify` of the new topic
 * would report them all (rows beyond the new log end, alerts nobody computed).
 *
 * Safe while workers run: until the job is bound to the new topic ID (the last step of the command),
 * every worker keeps every partition stopped (EO_TOPIC_RECREATED), and a worker checks the topic's
 * identity before it writes any batch (src/engine/identity-gate.ts), so nothing of
 * the new topic is written before the clearing, and nothing of the old one after it — except a batch
 * that was already past that check when the topic was deleted and is held (a paused process) across
 * the whole rebind; `verify` reports such a late row.
 */
import { consistencies, type Client } from '../../cassandra/session.js';
import type { BoundJob } from '../../engine/job-binding.js';
import { engineTables } from '../../engine/engine-tables.js';
import type { OutgoingRecord } from '../../kafka/producer.js';
import { alertTopicKey } from './alerts.js';
import { parseSettings } from './event-job.js';
import { eventsTable } from './events-layout.js';

function tables(keyspace: string, bound: BoundJob): string[] {
  const table = eventsTable(parseSettings(bound.settings).layout ?? { kind: 'original' });
  return [`${keyspace}.${table}`, engineTables(keyspace, undefined).quarantine, `${keyspace}.alert_window_counts`, `${keyspace}.alerts`];
}

/** The tables and topics a rebind clears, in words (for --dry-run and the command's output). */
export function rebindClears(keyspace: string, bound: BoundJob): string[] {
  return [...tables(keyspace, bound), ...bound.outputTopics.map((o) => `topic ${o} (a tombstone for each alert of the table)`)];
}

/**
 * Clears them. The alerts topic first: a tombstone (a null value) for each alert of the table, so that
 * the latest message of every old key says "no alert" (the topic is compacted: DeleteRecords is refused
 * there), and a window the new topic raises again gets its new alert after it (same key, same
 * partition). Then TRUNCATE of each table. Running it again after an interruption finishes it.
 */
export async function clearForRebind(session: Client, keyspace: string, bound: BoundJob, publish: (topic: string, records: OutgoingRecord[]) => Promise<void>): Promise<number> {
  const alerts = await session.execute(`SELECT source, ts FROM ${keyspace}.alerts`, [], { consistency: consistencies.localQuorum, fetchSize: 100_000 });
  const tombstones = alerts.rows.map((r) => ({ key: alertTopicKey(r['source'] as string, (r['ts'] as Date).getTime()), value: null }));
  for (const topic of bound.outputTopics) {
    for (let i = 0; i < tombstones.length; i += 500) await publish(topic, tombstones.slice(i, i + 500));
  }
  for (const name of tables(keyspace, bound)) await session.execute(`TRUNCATE ${name}`);
  return tombstones.length;
}
