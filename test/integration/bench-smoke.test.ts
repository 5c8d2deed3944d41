/**
 * `exactlyonce bench` works end to end on a tiny scale: every case runs and reports a rate, the ratios
 * are numbers, the JSON and the chart are written, and nothing the bench created is left behind.
 * How fast anything is, is the benchmark's business, not this test's.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { BenchResults } from '../../bench/results.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { BROKERS, CASSANDRA, cassandraSession, runCli, testConfig } from '../helpers.js';

test('bench runs every case on a few thousand events and writes its results', async (t) => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'eo-bench-smoke-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const config = testConfig();
  const session = await cassandraSession(t, config);

  const r = await runCli(
    [
      'bench',
      ...['--brokers', BROKERS, '--cassandra', CASSANDRA],
      ...['--events', '3000', '--partitions', '3', '--workers', '2', '--repeat', '1'],
      ...['--ceiling-concurrency', '8,32', '--ceiling-sweep-events', '1000', '--alerts-events', '2000'],
      ...['--latency-seconds', '3', '--latency-warmup-seconds', '1', '--behind-events', '5000'],
      ...['--out', out],
    ],
    {},
    900_000,
  );
  assert.equal(r.code, 0, `bench failed:\n${r.stderr.slice(-4000)}`);

  const results = JSON.parse(readFileSync(path.join(out, 'latest.json'), 'utf8')) as BenchResults;
  const expected = ['ceiling', 'baseline', 'exactlyOnce1', 'exactlyOnce2', 'exactlyOnce1Alerts', 'latency25', 'latency50', 'latency75', 'memoryBehind'];
  assert.deepEqual(Object.keys(results.cases).sort(), [...expected].sort());
  for (const name of expected) {
    const c = results.cases[name]!;
    assert.ok(Number.isFinite(c.eventsPerSec) && c.eventsPerSec > 0, `${name}.eventsPerSec = ${c.eventsPerSec}`);
  }
  for (const name of ['latency25', 'latency50', 'latency75']) {
    const l = results.cases[name]!.latency!;
    assert.ok(l.samples > 0 && Number.isFinite(l.p50Ms) && l.p50Ms <= l.p95Ms && l.p95Ms <= l.p99Ms, `${name}: ${JSON.stringify(l)}`);
  }
  for (const name of ['exactlyOnce1', 'exactlyOnce2', 'memoryBehind']) {
    for (const p of results.cases[name]!.processes) assert.ok(p.peakRssMiB !== null && p.peakRssMiB > 0, `${name} ${p.role} peak RSS`);
  }
  assert.equal(results.cases['exactlyOnce2']!.processes.length, 2);
  assert.ok(Number.isFinite(results.ratios.exactlyOnceToBaseline), `exactlyOnceToBaseline = ${results.ratios.exactlyOnceToBaseline}`);
  assert.ok(Number.isFinite(results.ratios.exactlyOnceToCeiling), `exactlyOnceToCeiling = ${results.ratios.exactlyOnceToCeiling}`);
  assert.ok(results.versions['node'] !== undefined && results.versions['cassandra'] !== undefined);
  assert.equal(typeof results.machine['cpus'], 'number');

  // One table on stdout; the JSON and the chart beside it.
  assert.match(r.stdout, /^ case +\| events +\| events\/s/m);
  for (const name of expected) assert.match(r.stdout, new RegExp(`^ ${name} +\\|`, 'm'));
  const svg = readFileSync(path.join(out, 'latest.svg'), 'utf8');
  assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  const stamped = path.join(out, `bench-${results.startedAt.replace(/[:]/g, '').replace(/\.\d+Z$/, 'Z')}`);
  assert.ok(existsSync(`${stamped}.json`) && existsSync(`${stamped}.svg`));

  // Nothing the run created is left: no keyspace, no topic.
  const keyspaces = await session.execute('SELECT keyspace_name FROM system_schema.keyspaces');
  assert.deepEqual(keyspaces.rows.map((row) => row['keyspace_name'] as string).filter((k) => k.startsWith(`eo_bench_${results.runId}`)), []);
  const admin = new KafkaAdmin(config);
  t.after(() => admin.close());
  assert.deepEqual((await admin.listTopics()).filter((topic) => topic.startsWith(`eo-bench-${results.runId}`)), []);
});
