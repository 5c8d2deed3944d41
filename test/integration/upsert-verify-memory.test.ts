// `verify --job` of an upsert sink streams (src/verify/upsert-audit.ts): with 100,000 keys, a keyed
// merge budget of 2 MiB and the JS heap capped at 64 MiB (the per-key map it replaces held every
// key's state in memory), it proves the table, finds a lost and a changed row exactly, and an
// incremental run looks up only the keys with new records.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { AuditReport } from '../../src/verify/report.js';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, startCli, testConfig, waitFor } from '../helpers.js';

const KEYS = 100_000;
const HEAP = { NODE_OPTIONS: '--max-old-space-size=64' };

test('an upsert table of 100,000 keys verified in bounded memory: spilled, exact, then incremental', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-upsert-memory-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const sink = path.join(dir, 'kv.json');
  writeFileSync(sink, JSON.stringify({ name: 'kv', topic: config.topic, table: 'kv', mode: 'upsert', key: ['k'], columns: { k: { type: 'bigint', required: true }, v: 'text', n: 'int' } }));
  const args = connectionArgs(config);
  const apply = await runCli(['schema', 'apply', ...args, '--job', sink]);
  assert.equal(apply.code, 0, apply.stderr);

  // Every key once, then 10,000 of them updated: 110,000 records.
  const producer = new Producer(config);
  await producer.connect();
  t.after(() => producer.close());
  const record = (k: number, n: number) => ({ key: String(k), value: JSON.stringify({ k, v: `value ${k} #${n}`, n }) });
  const produce = async (from: number, to: number, n: number, step = 1) => {
    for (let i = from; i < to; i += 5000 * step) {
      const batch = [];
      for (let k = i; k < Math.min(to, i + 5000 * step); k += step) batch.push(record(k, n));
      await producer.send(config.topic, batch);
    }
  };
  await produce(0, KEYS, 0);
  await produce(0, KEYS, 1, 10);
  const worker = startCli(t, ['sink', '--config', sink, ...args]);
  const store = new CheckpointStore(session, config.keyspace, config.topic, 'kv');
  const drainedAt = async (n: number) =>
    waitFor(async () => [...(await store.readAll()).values()].reduce((a, b) => a + b, 0n) === BigInt(n), { timeoutMs: 600_000, intervalMs: 1000, message: `the sink stores ${n} records` });
  await drainedAt(110_000);

  const verify = async (extra: string[]) => {
    const r = await runCli(['verify', ...args, '--job', sink, '--json', '--memory-mb', '2', ...extra], HEAP, 600_000);
    assert.ok(r.stdout.trim().length > 0, `verify printed a report (exit ${r.code}, stderr: ${r.stderr})`);
    return { code: r.code, report: JSON.parse(r.stdout) as AuditReport, stderr: r.stderr };
  };
  const full = await verify([]);
  assert.equal(full.code, 0, full.stderr);
  assert.equal(full.report.mode, 'full');
  assert.deepEqual([full.report.totals.records, full.report.totals.stored, full.report.violationTotal], [110_000, 110_000, 0]);
  assert.ok((full.report.spilledRuns ?? 0) >= 10, `the keyed merge spilled to disk (${full.report.spilledRuns} runs)`);
  t.diagnostic(`full: ${full.report.durationMs} ms, peak RSS ${full.report.peakRssMb} MiB, ${full.report.spilledRuns} runs`);

  // A lost row and a changed one: exactly those two, under the same bounds.
  await session.execute(`DELETE FROM ${config.keyspace}.kv USING TIMESTAMP 1000000000000 WHERE k = 77777`);
  await session.execute(`UPDATE ${config.keyspace}.kv USING TIMESTAMP 1000000000000 SET v = 'tampered' WHERE k = 4242`);
  const broken = await verify(['--full', '--no-record']);
  assert.equal(broken.code, 9);
  assert.deepEqual(
    broken.report.violations.map((v) => `${v.kind} ${v.message.replace(/ \(partition \d+ offset \d+\)/, '')}`).sort(),
    [
      'mismatch kv key {"k":"4242"}: v is "tampered", its last record says "value 4242 #0"',
      'missing kv key {"k":"77777"}: no row, though its last record writes one',
    ],
  );

  // Incremental: 1,000 updates; only their keys are looked up, so the two broken rows (below the proof) are not seen.
  await produce(50_000, 51_000, 2);
  await drainedAt(111_000);
  const incremental = await verify([]);
  assert.equal(incremental.code, 0, incremental.stderr);
  assert.equal(incremental.report.mode, 'incremental');
  assert.equal(incremental.report.totals.records, 1000);
  assert.equal(incremental.report.totals.stored, 1000);

  // A key with a new record, rewritten by another writer after the sink: the next incremental run finds it.
  await produce(50_500, 50_501, 3);
  await drainedAt(111_001);
  await session.execute(`UPDATE ${config.keyspace}.kv USING TIMESTAMP 1000000000000 SET v = 'overwritten' WHERE k = 50500`);
  const caught = await verify(['--no-record']);
  assert.equal(caught.code, 9);
  assert.equal(caught.report.totals.records, 1);
  assert.deepEqual(
    caught.report.violations.map((v) => `${v.kind} ${v.message.replace(/ \(partition \d+ offset \d+\)/, '')}`),
    ['mismatch kv key {"k":"50500"}: v is "overwritten", its last record says "value 50500 #3"'],
  );

  worker.kill('SIGTERM');
  assert.equal((await once(worker, 'exit'))[0], 0, worker.output());
});
