// The way out of EO_TOPIC_RECREATED, `checkpoints reset --all --to earliest --rebind`, run while a
// worker runs, must leave a keyspace that verifies: the topic is re-created with fewer records and
// then with more, in alert windows that overlap the old ones (events up to 20 s late), and after each
// rebind `verify` (events, alerts table and alerts topic) passes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import type { KafkaAdmin } from '../../src/kafka/admin.js';
import { freshKeyspace, freshTopic, runCli, testConfig, waitFor } from '../helpers.js';
import { connectionArgs, generate, startServedWorker, timeline, waitDrained } from '../pipeline.js';

/** Deletes the topic and creates it again with the same partitions (retried while the broker still deletes it). */
async function recreate(admin: KafkaAdmin, config: ConnectionConfig, before: string | null): Promise<string> {
  await admin.deleteTopic(config.topic);
  await waitFor(async () => {
    const id = await admin.topicId(config.topic).catch(() => null);
    if (id !== null && id !== before) return id;
    if (id === null) await admin.ensureTopic({ topic: config.topic, partitions: 3, replicationFactor: 1 }).catch(() => undefined);
    return false;
  }, { timeoutMs: 120_000, message: 'the topic is re-created with a new ID' });
  return (await admin.topicId(config.topic))!;
}

/** Events in overlapping windows: all Critical (the default mix), half of them up to 20 s late. */
const events = (count: number, seed: number) => ['--count', String(count), '--rate', '2000', '--clients', '3', '--late-ratio', '0.5', '--late-by-ms', '20000', '--seed', String(seed)];

async function verifies(config: ConnectionConfig, records: number): Promise<string> {
  const r = await runCli(['verify', ...connectionArgs(config)]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  assert.match(r.stdout, new RegExp(`checked ${records.toLocaleString('en-US')} records`));
  assert.match(r.stdout, /table \S+: found \d+, wrong 0 \(missing 0, extra 0, count 0\)/);
  assert.match(r.stdout, /topic \S+: found \d+ \(latest of \d+ messages\), wrong 0 \(missing 0, extra 0, count 0\)/);
  const alerts = Number(/expected (\d+)/.exec(r.stdout)?.[1]);
  assert.ok(alerts > 0, `the records raise alerts (${r.stdout})`);
  return `${records} records, ${alerts} alerts`;
}

test('checkpoints reset --all --to earliest --rebind while a worker runs, topic re-created with fewer then more records in overlapping windows: verify passes after each', async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  const phases = timeline();
  const worker = await startServedWorker(t, config);
  const { connect } = await import('../../src/cassandra/session.js');
  const session = await connect(config);
  t.after(() => session.shutdown());
  await generate(config, events(3000, 1));
  await waitDrained(session, config);
  phases.mark(`first topic: ${await verifies(config, 3000)}`);

  let id = await admin.topicId(config.topic);
  for (const [round, count] of [[1, 2000], [2, 4000]] as const) {
    id = await recreate(admin, config, id);
    await generate(config, events(count, 10 + round));
    const stops = () => worker.output().split('\n').filter((l) => l.includes('"code":"EO_TOPIC_RECREATED"') && l.includes(id!)).length;
    await waitFor(() => stops() > 0, { timeoutMs: 120_000, message: 'the worker stops the partitions of the re-created topic' });
    const reset = await runCli(['checkpoints', 'reset', '--all', '--to', 'earliest', '--rebind', ...connectionArgs(config)]);
    assert.equal(reset.code, 0, reset.stdout + reset.stderr);
    await waitDrained(session, config);
    phases.mark(`re-created with ${count}: ${await verifies(config, count)}`);
    assert.match(reset.stdout, /cleared the old topic's outputs: \S+\.events, \S+\.quarantine, \S+\.alert_window_counts, \S+\.alerts, topic \S+ \(a tombstone for each alert of the table\) \(\d+ alerts?\)/);
    assert.match(reset.stdout, new RegExp(`the job is bound to topic ID ${id.replace(/[+/]/g, '\\$&')} now`));
  }
  assert.equal(worker.exitCode, null, 'the worker ran throughout');
  t.diagnostic(String(phases));
});
