// An upsert sink against the real stack: a record Cassandra would refuse (a 70,000-byte key) and a
// key spelled two ways on two partitions ("007" and "7" for bigint 7) are each quarantined with their
// reason and offset; the records after them are stored, and `verify --job` passes.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { AuditReport } from '../../src/verify/report.js';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { Producer } from '../../src/kafka/producer.js';
import { applySinkSchema, freshKeyspace, freshTopic, runCli, sinkConfigFile, startCli, suffix, testConfig, waitFor } from '../helpers.js';

type Sent = { key: string; value: string; partition: number };

async function runSink(t: TestContext, type: string, records: Sent[], partitions: number) {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, partitions);
  const name = `kv_${suffix()}`;
  const sink = sinkConfigFile(t, 'kv.json', JSON.stringify({ name, topic: config.topic, table: 'kv', mode: 'upsert', key: ['k'], columns: { k: { type, required: true }, v: 'text' } }));
  const args = connectionArgs(config);
  await applySinkSchema(config, sink);
  const producer = new Producer(config);
  await producer.connect();
  t.after(() => producer.close());
  for (const r of records) await producer.send(config.topic, [r]);
  const ends = new Map<number, bigint>();
  for (const r of records) ends.set(r.partition, (ends.get(r.partition) ?? 0n) + 1n);
  const worker = startCli(t, ['sink', '--config', sink, ...args]);
  const store = new CheckpointStore(session, config.keyspace, config.topic, name);
  await waitFor(async () => {
    const c = await store.readAll();
    return [...ends].every(([p, end]) => c.get(p) === end) || undefined;
  }, { timeoutMs: 180_000, message: `the sink passes every record (${worker.output().slice(-2000)})` });
  const rows = (await session.execute(`SELECT k, v, WRITETIME(v) AS wt FROM ${config.keyspace}.kv`)).rows.map((r) => ({ k: String(r['k']).slice(0, 20), v: r['v'] as string, wt: String(r['wt']) }));
  const quarantined = [];
  for (let p = 0; p < partitions; p++) {
    const q = await session.execute(`SELECT partition, offset, reason FROM ${config.keyspace}.job_quarantine WHERE job = ? AND partition = ?`, [name, p], { prepare: true });
    quarantined.push(...q.rows.map((r) => ({ partition: r['partition'] as number, offset: String(r['offset']), reason: r['reason'] as string })));
  }
  const verify = await runCli(['verify', ...args, '--job', sink, '--json']);
  return { rows: rows.sort((a, b) => a.k.localeCompare(b.k)), quarantined: quarantined.sort((a, b) => a.partition - b.partition || Number(a.offset) - Number(b.offset)), verify, output: worker.output() };
}

test('a 70,000-byte key is quarantined key_too_large at its offset; the records after it are stored; verify --job passes', async (t) => {
  const big = 'x'.repeat(70_000);
  const r = await runSink(t, 'text', [
    { key: 'a', value: JSON.stringify({ k: 'a', v: 'a0' }), partition: 0 },
    { key: big, value: JSON.stringify({ k: big, v: 'big' }), partition: 0 },
    { key: 'b', value: JSON.stringify({ k: 'b', v: 'b2' }), partition: 0 },
    { key: 'a', value: JSON.stringify({ k: 'a', v: 'a3' }), partition: 0 },
  ], 1);
  assert.deepEqual(r.rows, [{ k: 'a', v: 'a3', wt: '3' }, { k: 'b', v: 'b2', wt: '2' }]);
  assert.deepEqual(r.quarantined, [{ partition: 0, offset: '1', reason: 'key_too_large' }]);
  assert.doesNotMatch(r.output, /EO_PERMANENT_ERROR/);
  assert.equal(r.verify.code, 0, r.verify.stdout + r.verify.stderr);
  const report = JSON.parse(r.verify.stdout) as AuditReport;
  assert.deepEqual([report.totals.records, report.totals.quarantined, report.violationTotal], [4, 1, 0]);
});

test('bigint 7 as "007" on partition 0 (offset 5) and as "7" on partition 1 (offset 0): "007" is quarantined non_canonical_key, the row is the "7" record; verify --job passes', async (t) => {
  const p0 = [1, 2, 3, 4, 5].map((k) => ({ key: String(k), value: JSON.stringify({ k, v: `p0-${k}` }), partition: 0 }));
  const r = await runSink(t, 'bigint', [
    ...p0,
    { key: '007', value: JSON.stringify({ k: 7, v: 'older' }), partition: 0 },
    { key: '7', value: JSON.stringify({ k: 7, v: 'newer' }), partition: 1 },
  ], 2);
  assert.deepEqual(r.rows, [
    { k: '1', v: 'p0-1', wt: '0' },
    { k: '2', v: 'p0-2', wt: '1' },
    { k: '3', v: 'p0-3', wt: '2' },
    { k: '4', v: 'p0-4', wt: '3' },
    { k: '5', v: 'p0-5', wt: '4' },
    { k: '7', v: 'newer', wt: '0' },
  ]);
  assert.deepEqual(r.quarantined, [{ partition: 0, offset: '5', reason: 'non_canonical_key' }]);
  assert.equal(r.verify.code, 0, r.verify.stdout + r.verify.stderr);
  const report = JSON.parse(r.verify.stdout) as AuditReport;
  assert.deepEqual([report.totals.records, report.totals.quarantined, report.violationTotal], [7, 1, 0]);
});
