/**
 * `exactlyonce bench` works end to end on a tiny scale, on both commit logs of the local Cassandra (it
 * restarts the node for each and leaves it as it was): every case runs and reports a rate, the ratios
 * are numbers, the stage breakdown is read from the workers, the JSON and the chart are written, the
 * goals are judged, and nothing the bench created is left behind.
 * How fast anything is, is the benchmark's business, not this test's.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import type { BenchResults } from '../../bench/results.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { stackCommitlogSync } from '../../src/stack/index.js';
import { BROKERS, CASSANDRA, cassandraSession, localStack, runCli, testConfig, waitFor } from '../helpers.js';

test('bench runs every case on a few thousand events and writes its results', async (t) => {
  const out = mkdtempSync(path.join(os.tmpdir(), 'eo-bench-smoke-'));
  t.after(() => rmSync(out, { recursive: true, force: true }));
  const config = testConfig();
  const session = await cassandraSession(t, config);
  const stack = await localStack();
  const before = stackCommitlogSync(stack, 'cassandra') ?? 'periodic';

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
    1_500_000,
  );
  assert.equal(r.code, 0, `bench failed:\n${r.stderr.slice(-4000)}`);

  // One run on each commit log of the local Cassandra, which is left with the one it had.
  assert.equal(stackCommitlogSync(stack, 'cassandra') ?? 'periodic', before);
  assert.match(r.stderr, new RegExp(`restarting the local Cassandra with commitlog_sync: ${before === 'periodic' ? 'batch' : 'periodic'}…`));
  const runs = (['periodic', 'batch'] as const).map((mode) => [mode, JSON.parse(readFileSync(path.join(out, `latest-${mode}.json`), 'utf8')) as BenchResults] as const);
  for (const [mode, results] of runs) {
    assert.equal(results.commitlog, mode);
    const expected = ['ceiling', 'clientKafkaJS', 'clientConsume', 'baseline', 'exactlyOnce1', 'exactlyOnce2', 'exactlyOnce1Alerts', 'latency25', 'latency50', 'latency75', 'memoryBehind', 'sinkLog', 'sinkUpsert', 'sinkAggregate', 'sinkWide', 'sinkMemoryBehind', 'sinkAggregateGroups'];
    assert.deepEqual(Object.keys(results.cases).sort(), [...expected].sort());
    for (const name of expected) {
      const c = results.cases[name]!;
      assert.ok(Number.isFinite(c.eventsPerSec) && c.eventsPerSec > 0, `${mode} ${name}.eventsPerSec = ${c.eventsPerSec}`);
    }
    for (const name of ['clientKafkaJS', 'clientConsume']) assert.equal(results.cases[name]!.events, 3000, `${name} read the whole topic`);
    for (const name of ['latency25', 'latency50', 'latency75']) {
      const l = results.cases[name]!.latency!;
      assert.ok(l.samples > 0 && Number.isFinite(l.p50Ms) && l.p50Ms <= l.p95Ms && l.p95Ms <= l.p99Ms, `${name}: ${JSON.stringify(l)}`);
    }
    // The sink drained the same topics: every record of the pre-produced events, and of the memory case's.
    for (const name of ['sinkLog', 'sinkUpsert', 'sinkAggregate', 'sinkWide']) assert.equal(results.cases[name]!.events, 3000, `${name} drained the events`);
    const writes = results.cases['sinkAggregate']!.cassandraWritesPer1000Events;
    assert.ok(typeof writes === 'number' && writes > 0 && writes < 1000, `the aggregate sink wrote ${writes} rows per 1,000 records: fewer than one per record`);
    assert.equal(results.cases['sinkMemoryBehind']!.events, 5000);
    assert.equal(results.cases['sinkAggregateGroups']!.events, 5000);
    for (const ratio of ['sinkLogToExactlyOnce', 'sinkUpsertToExactlyOnce', 'sinkLogCpuToExactlyOnce', 'sinkUpsertCpuToExactlyOnce', 'sinkAggregateToLog', 'sinkWideToLog'] as const) {
      assert.ok(Number.isFinite(results.ratios[ratio]), `${ratio} = ${results.ratios[ratio]}`);
    }
    for (const name of ['exactlyOnce1', 'exactlyOnce2', 'memoryBehind', 'sinkLog', 'sinkMemoryBehind', 'sinkAggregateGroups']) {
      for (const p of results.cases[name]!.processes) assert.ok(p.peakRssMiB !== null && p.peakRssMiB > 0, `${name} ${p.role} peak RSS`);
    }
    // Where the batches' time went, read from the workers' /metrics: every stage of a batch was timed.
    // (A drain this small may be over by the poll its window starts at: then every batch counts.)
    const stages = results.cases['exactlyOnce1']!.stages!;
    assert.ok(stages !== undefined, `${mode}: exactlyOnce1 has a stage breakdown`);
    const known = ['checkpoint', 'checkpoint_wait', 'decode', 'identity', 'idle', 'queued', 'rows'];
    assert.deepEqual(Object.keys(stages).filter((k) => !known.includes(k)), [], JSON.stringify(stages));
    assert.ok((stages['checkpoint']?.batches ?? 0) > 0, JSON.stringify(stages));
    // The latency case's window is its seconds of production: every stage of a record's path is in it.
    const live = results.cases['latency25']!.stages!;
    for (const stage of ['queued', 'identity', 'decode', 'rows']) assert.ok((live[stage]?.batches ?? 0) > 0, `latency25 ${stage}: ${JSON.stringify(live)}`);
    assert.equal(results.cases['exactlyOnce2']!.processes.length, 2);
    assert.ok(Number.isFinite(results.ratios.exactlyOnceToBaseline), `exactlyOnceToBaseline = ${results.ratios.exactlyOnceToBaseline}`);
    assert.ok(Number.isFinite(results.ratios.exactlyOnceToCeiling), `exactlyOnceToCeiling = ${results.ratios.exactlyOnceToCeiling}`);
    assert.ok(Number.isFinite(results.ratios.workerCpuToClient), `workerCpuToClient = ${results.ratios.workerCpuToClient}`);
    assert.ok(Number.isFinite(results.ratios.workerCpuToClientConsume), `workerCpuToClientConsume = ${results.ratios.workerCpuToClientConsume}`);
    assert.ok(results.versions['node'] !== undefined && results.versions['cassandra'] !== undefined);
    assert.equal(typeof results.machine['cpus'], 'number');
    const svg = readFileSync(path.join(out, `latest-${mode}.svg`), 'utf8');
    assert.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    const stamped = path.join(out, `bench-${results.startedAt.replace(/[:]/g, '').replace(/\.\d+Z$/, 'Z')}-${mode}`);
    assert.ok(existsSync(`${stamped}.json`) && existsSync(`${stamped}.svg`));
    for (const name of expected) assert.match(r.stdout, new RegExp(`^ ${name} +\\|`, 'm'));
  }

  // A table per commit log on stdout, then the goals with a column for each.
  assert.equal(r.stdout.match(/^ case +\| events +\| events\/s/gm)?.length, 2);
  assert.match(r.stdout, /^Cassandra commit log: periodic\n/);
  assert.match(r.stdout, /\n goal +\| commit log: periodic +\| commit log: batch *\n/);
  assert.match(r.stdout, /\n worker CPU ≤ 15 ms \/ 1k events +\| [\d.]+ ms (NOT )?met +\| [\d.]+ ms (NOT )?met +\n/);

  // Nothing the runs created is left: no keyspace, no topic.
  // (The bench restarted Cassandra under this session: its driver reconnects in a while.)
  const keyspaces = await waitFor(() => session.execute('SELECT keyspace_name FROM system_schema.keyspaces').catch(() => undefined), {
    timeoutMs: 120_000,
    message: "the test's session reconnects to the restarted Cassandra",
  });
  const admin = new KafkaAdmin(config);
  t.after(() => admin.close());
  const topics = await admin.listTopics();
  for (const [, results] of runs) {
    assert.deepEqual(keyspaces.rows.map((row) => row['keyspace_name'] as string).filter((k) => k.startsWith(`eo_bench_${results.runId}`)), []);
    assert.deepEqual(topics.filter((topic) => topic.startsWith(`eo-bench-${results.runId}`)), []);
  }
});

test('bench --commitlog: a bad mode, or a mode asked of servers that are not the local single node, is one coded line and nothing runs', async (t) => {
  // An empty stack directory: no local Cassandra is known there, as for a user's own cluster.
  const elsewhere = mkdtempSync(path.join(os.tmpdir(), 'eo-bench-elsewhere-'));
  t.after(() => rmSync(elsewhere, { recursive: true, force: true }));
  const cases: Array<[string[], RegExp]> = [
    [['--commitlog', 'sometimes'], /^error EO_CONFIG_INVALID: --commitlog: expected periodic, batch, both or as-is \(got 'sometimes'\)\n$/],
    [['--commitlog', 'batch'], /^error EO_USAGE: --commitlog: the bench switches the commit log of the local single-node stack's Cassandra only \(not a cluster, a secured stack or other servers\); use --commitlog as-is\n$/],
  ];
  for (const [args, stderr] of cases) {
    const r = await runCli(['bench', ...['--brokers', BROKERS, '--cassandra', CASSANDRA], ...args], { EXACTLYONCE_STACK_DIR: elsewhere });
    assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
    assert.match(r.stderr, stderr, args.join(' '));
    assert.equal(r.stdout, '', args.join(' '));
  }
});
