/**
 * The `pages` sink job of the operator tests (status, dashboard-jobs, operate-rebind): JSON records
 * `{"id": …, "name": …}` into the log table pages, name required, so a record that is not JSON is quarantined.
 */
import assert from 'node:assert/strict';
import type { TestContext } from 'node:test';
import type { Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { CheckpointStore } from '../src/engine/checkpoint-store.js';
import type { KafkaAdmin } from '../src/kafka/admin.js';
import { BROKERS, CASSANDRA, produceRecords, runCli, sinkConfigFile } from './helpers.js';

/** The job `name` reading `topic`, in a file pages.json of the test's own, its schema applied (`schema apply --job`, which must succeed); the file. */
export async function applyPagesSink(t: TestContext, config: ConnectionConfig, name: string, topic = config.topic): Promise<string> {
  const file = sinkConfigFile(t, 'pages.json', JSON.stringify({ name, topic, format: 'json', table: 'pages', mode: 'log', columns: { id: 'bigint', name: { type: 'text', required: true } } }));
  const apply = await runCli(['schema', 'apply', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', file]);
  assert.equal(apply.code, 0, apply.stderr);
  return file;
}

/**
 * applyPagesSink, then the job's partition 1 stopped for the first worker that takes it: 100 records on
 * each of partitions 0 and 1 of `topic` (the one at offset 50 not JSON), then partition 1's log starting
 * at 20 while the job's checkpoint of it says 5 (a worker must stop it, not skip). The file.
 */
export async function stoppedPagesSink(t: TestContext, config: ConnectionConfig, session: Client, admin: KafkaAdmin, name: string, topic = config.topic): Promise<string> {
  const file = await applyPagesSink(t, config, name, topic);
  await produceRecords(config, [0, 1].flatMap((partition) => Array.from({ length: 100 }, (_, i) => ({ value: i === 50 ? 'not json' : JSON.stringify({ id: i, name: `n${i}` }), partition }))), topic);
  await admin.deleteRecords(topic, 1, 20n);
  await new CheckpointStore(session, config.keyspace, topic, name).write(1, 5n, 0);
  return file;
}
