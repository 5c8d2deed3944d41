// One table, one job (issue 43, item 3): two sinks with different names and topics on one upsert table
// would order a key's records by offsets of two topics, so the older record of the other topic could
// win. The first job to run owns the table; the second is refused, coded, by `schema apply --job` and
// by its worker, and stores nothing (no job row), so the table keeps the first job's rows.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, startCli, suffix, testConfig, waitFor } from '../helpers.js';
import { connectionArgs } from '../pipeline.js';

function sinkConfig(name: string, topic: string): string {
  const file = path.join(os.tmpdir(), `${name}.yaml`);
  writeFileSync(file, `name: ${name}\ntopic: ${topic}\ntable: kv\nmode: upsert\nkey: [id]\ncolumns:\n  id: { type: bigint, required: true }\n  v: { type: bigint, required: true }\n`);
  return file;
}

async function produce(config: ConnectionConfig, values: number[]): Promise<void> {
  const producer = new Producer(config);
  try {
    await producer.send(config.topic, values.map((v) => ({ key: '1', value: JSON.stringify({ id: 1, v }) })));
  } finally {
    await producer.close();
  }
}

test('a second job on a table another job writes is refused, coded, naming the table, the owner and the ways out', async (t) => {
  const a = testConfig();
  const session = await freshKeyspace(t, a);
  await freshTopic(t, a, 1);
  const b = testConfig({ keyspace: a.keyspace });
  await freshTopic(t, b, 1);
  const s = suffix();
  const [nameA, nameB] = [`a_${s}`, `b_${s}`];
  const fileA = sinkConfig(nameA, a.topic);
  const fileB = sinkConfig(nameB, b.topic);

  // Key 1's newest record in a's topic sits at offset 0; b's topic holds older values at offsets 0-2,
  // which `USING TIMESTAMP <offset>` would let win if b wrote the same table.
  await produce(a, [2]);
  await produce(b, [10, 11, 12]);

  const applied = await runCli(['schema', 'apply', '--job', fileA, ...connectionArgs(a)]);
  assert.equal(applied.code, 0, applied.stderr);
  const worker = startCli(t, ['sink', '--config', fileA, ...connectionArgs(a)]);
  await waitFor(async () => (await session.execute(`SELECT v FROM ${a.keyspace}.kv WHERE id = 1`)).first()?.['v']?.toString() === '2', {
    timeoutMs: 120_000,
    message: 'sink a stores key 1',
  });

  const line =
    `error EO_TABLE_OWNED: table ${a.keyspace}.kv is written by job ${nameA} (topic ${a.topic}); job ${nameB} (topic ${b.topic}) cannot write it too: ` +
    "the two jobs' rows would overwrite each other, and offsets of two topics do not order a key's records. " +
    `Give job ${nameB} its own table (\`table:\` in a sink's config) or its own --keyspace; to hand the table over, stop job ${nameA}'s workers and run ` +
    `\`exactlyonce cql "DELETE FROM ${a.keyspace}.table_owner WHERE table_name = 'kv'"\``;
  const errors = (stderr: string) => stderr.split('\n').filter((l) => l.startsWith('error'));

  // The worker first (the table exists with b's columns, so only the binding can refuse it); a worker
  // that is not refused runs on, and is killed after 90 s.
  const sinkB = await runCli(['sink', '--config', fileB, ...connectionArgs(b)], {}, 90_000);
  assert.deepEqual(errors(sinkB.stderr), [line], sinkB.stderr);
  assert.equal(sinkB.code, 5);
  assert.doesNotMatch(sinkB.stderr, /^\s+at /m, 'no stack trace');
  const schemaB = await runCli(['schema', 'apply', '--job', fileB, ...connectionArgs(b)]);
  assert.deepEqual(errors(schemaB.stderr), [line], schemaB.stderr);
  assert.equal(schemaB.code, 5);

  // Nothing of b is stored: no job row (so another table for b is not refused as a changed config),
  // no claim; the table holds a's row alone.
  const jobs = await session.execute(`SELECT name FROM ${a.keyspace}.job`);
  assert.deepEqual(jobs.rows.map((r) => r['name']), [nameA]);
  const owners = await session.execute(`SELECT table_name, job FROM ${a.keyspace}.table_owner`);
  assert.deepEqual(owners.rows.map((r) => [r['table_name'], r['job']]), [['kv', nameA]]);
  const rows = await session.execute(`SELECT id, v FROM ${a.keyspace}.kv`);
  assert.deepEqual(rows.rows.map((r) => [r['id'].toString(), r['v'].toString()]), [['1', '2']]);
  worker.kill('SIGTERM');
});
