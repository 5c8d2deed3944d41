// A record written by a client that is not ours lands exactly once: Debian's Python Kafka client
// (python3-confluent-kafka's AvroProducer, installed by scripts/install-python-avro.sh when missing)
// registers Avro key and value schemas in the local stack's registry and writes the wire format; an
// upsert sink with Avro keys and values stores each order's last record, and verify --job proves it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { BROKERS, CASSANDRA, cassandraSession, ensureRegistry, freshTopic, REGISTRY_ENV, REGISTRY_URL, repoRoot, runCli, startCli, testConfig, waitFor } from '../helpers.js';

function run(cmd: string, args: string[], input = ''): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
    child.stdin.end(input);
  });
}

test("Debian's Python AvroProducer writes Avro keys and values through the registry: each record lands exactly once (upsert, updates, a delete, int64 extremes)", async (t) => {
  const installed = await run(path.join(repoRoot, 'scripts', 'install-python-avro.sh'), []);
  assert.equal(installed.code, 0, installed.output);
  await ensureRegistry();
  const config = testConfig();
  await freshTopic(t, config, 1);
  const session = await cassandraSession(t, config);
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-py-')), 'orders.yaml');
  writeFileSync(
    file,
    [
      'name: py_orders',
      `topic: ${config.topic}`,
      'format: avro',
      'keyFormat: avro',
      'table: orders',
      'mode: upsert',
      'key: [order_id]',
      'columns:',
      '  order_id: bigint',
      '  customer: { type: text, required: true }',
      '  total: decimal',
      '  note: text',
      '  items: list<text>',
      '',
    ].join('\n'),
  );
  const conn = ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', config.keyspace];
  const applied = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);

  // Raw JSON: Python reads these integers exactly (no float64 on the way).
  const records = `[
    {"key": {"order_id": 9223372036854775807}, "value": {"order_id": 9223372036854775807, "customer": "max", "total": "10.00", "note": null, "items": ["a"]}},
    {"key": {"order_id": -9223372036854775808}, "value": {"order_id": -9223372036854775808, "customer": "min", "total": "-0.01", "note": "n", "items": []}},
    {"key": {"order_id": 7}, "value": {"order_id": 7, "customer": "seven", "total": "1.50", "note": null, "items": ["x", "y"]}},
    {"key": {"order_id": 7}, "value": {"order_id": 7, "customer": "seven", "total": "2.50", "note": "paid", "items": ["x"]}},
    {"key": {"order_id": -9223372036854775808}, "value": null}
  ]`;
  const produced = await run('/usr/bin/python3', [path.join(repoRoot, 'test', 'fixtures', 'avro_producer.py'), BROKERS, REGISTRY_URL, config.topic], records);
  assert.equal(produced.code, 0, produced.output);

  const worker = startCli(t, ['sink', ...conn, '--config', file], REGISTRY_ENV);
  // The checkpoint first: a checkpoint is written only after every row before it, so once it is past
  // all five records the table holds their result (read the other way round, a batch could land
  // between the two reads and the rows would be those of the first records only).
  await waitFor(async () => {
    const cp = await session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = 'py_orders' AND topic = ? AND partition = 0`, [config.topic], { prepare: true }).catch(() => null);
    return cp?.rows[0]?.['next_offset']?.toString() === '5' || undefined;
  }, { timeoutMs: 180_000, message: 'the checkpoint past all five records' });
  const rows = (await session.execute(`SELECT order_id, customer, total, note, items, WRITETIME(customer) AS wt FROM ${config.keyspace}.orders`)).rows;
  const got = rows.map((r) => canonical({ ...r })).sort((a, b) => String((a as { order_id: string }).order_id).localeCompare(String((b as { order_id: string }).order_id)));
  assert.deepEqual(got, [
    { order_id: '7', customer: 'seven', total: '2.50', note: 'paid', items: ['x'], wt: '3' },
    { order_id: '9223372036854775807', customer: 'max', total: '10.00', note: null, items: ['a'], wt: '0' },
  ]);
  const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'py_orders', '--json']);
  assert.equal(q.stdout.trim(), '', 'nothing quarantined');
  const v = await runCli(['verify', ...conn, '--job', file, '--no-record', '--json'], REGISTRY_ENV);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  assert.equal((JSON.parse(v.stdout) as { totals: { records: number } }).totals.records, 5);
  worker.kill('SIGTERM');
});
