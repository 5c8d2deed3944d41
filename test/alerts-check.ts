/**
 * Invariant 3 of docs/design.md §4: the `alerts` table, and the last message per key of the alerts topic,
 * both equal the alerts recomputed from the `events` table.
 */
import assert from 'node:assert/strict';
import { DEFAULT_ALERT_RULE, WindowCounter, type Alert, type AlertRule } from '../src/jobs/events/alert-rule.js';
import { alertTopicKey } from '../src/jobs/events/alerts.js';
import type { Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { readTopic } from '../src/kafka/log-reader.js';

export async function recomputeAlerts(session: Client, config: ConnectionConfig, rule: AlertRule = DEFAULT_ALERT_RULE): Promise<Alert[]> {
  const counter = new WindowCounter(rule);
  const stream = session.stream(`SELECT source, ts, health FROM ${config.keyspace}.events`, [], { prepare: true, fetchSize: 5000 });
  for await (const row of stream as unknown as AsyncIterable<Record<string, unknown>>) {
    counter.add({ source: row['source'] as string, ts: (row['ts'] as Date).getTime(), health: row['health'] as number });
  }
  return counter.alerts();
}

export async function alertsTable(session: Client, config: ConnectionConfig): Promise<Alert[]> {
  const r = await session.execute(`SELECT source, ts, event_count FROM ${config.keyspace}.alerts`, [], { prepare: true, fetchSize: 100000 });
  return r.rows
    .map((row) => ({ source: row['source'] as string, ts: (row['ts'] as Date).getTime(), eventCount: row['event_count'] as number }))
    .sort((a, b) => a.ts - b.ts || (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
}

/** The last message of each key on the alerts topic, as alerts, sorted like the table. */
export async function alertsTopicLatest(config: ConnectionConfig): Promise<{ alerts: Alert[]; messages: number }> {
  // A tombstone (null value, from `alerts rule`) removes its key's alert: its latest message is no alert.
  const latest = new Map<string, { offset: bigint; partition: number; alert: Alert | null }>();
  let messages = 0;
  await readTopic(config, config.alertsTopic, (records) => {
    for (const r of records) {
      messages++;
      const key = r.key!.toString();
      let alert: Alert | null = null;
      if (r.value !== null) {
        const v = JSON.parse(r.value.toString()) as { ts: number; source: string; eventCount: number };
        assert.equal(key, alertTopicKey(v.source, v.ts), 'key is source@windowEnd');
        alert = { source: v.source, ts: v.ts, eventCount: v.eventCount };
      }
      const prev = latest.get(key);
      if (prev !== undefined) assert.equal(prev.partition, r.partition, 'one key, one partition');
      if (prev === undefined || r.offset > prev.offset) latest.set(key, { offset: r.offset, partition: r.partition, alert });
    }
  });
  const alerts = [...latest.values()].flatMap((x) => (x.alert === null ? [] : [x.alert])).sort((a, b) => a.ts - b.ts || (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  return { alerts, messages };
}

export async function assertAlertsExact(session: Client, config: ConnectionConfig, rule: AlertRule = DEFAULT_ALERT_RULE): Promise<{ alerts: number; messages: number }> {
  const expected = await recomputeAlerts(session, config, rule);
  assert.deepEqual(await alertsTable(session, config), expected, 'alerts table = recomputation from events');
  const topic = await alertsTopicLatest(config);
  assert.deepEqual(topic.alerts, expected, 'last message per key on the alerts topic = recomputation');
  return { alerts: expected.length, messages: topic.messages };
}
