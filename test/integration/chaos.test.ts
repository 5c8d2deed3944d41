// The bounded chaos scenario of CI: 50,000 events over 60 s, 10 SIGKILLs, a zombie, a Cassandra restart
// and a Kafka restart (of the shared local stack), workers added and removed, malformed bursts; then verify.
// The seeds are fixed, so that `make test` runs the same schedule every time; random seeds belong to
// `make soak` and to `exactlyonce chaos` run by hand (each prints its seed, to replay a failure).
// 2703006044 once planned a removal where kills had left one worker (see the schedule's unit test).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BROKERS, CASSANDRA, runCli } from '../helpers.js';

const SEEDS = [2703006044];

for (const seed of SEEDS) test(`chaos seed ${seed}: no violation of exactly-once under kills, a zombie, server restarts and rebalances`, async (t) => {
  const r = await runCli(
    ['chaos', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--events', '50000', '--duration', '60', '--kills', '10', '--zombies', '1', '--cassandra-restarts', '1', '--kafka-restarts', '1', '--seed', String(seed), '--json'],
    {},
    15 * 60_000,
  );
  t.diagnostic(r.stdout.split('\n').filter((l) => /^chaos seed|^ {2}(records|faults|checkpoints|violations):|^ {4}(problem|warning):|^checked/.test(l)).join('\n'));
  assert.equal(r.code, 0, `chaos seed ${seed} failed:\n${r.stdout.slice(-6000)}\n${r.stderr.slice(-3000)}`);
  const figures = JSON.parse(r.stdout.trim().split('\n').filter((l) => l.startsWith('{"seed"')).pop()!) as {
    seed: number;
    events: number;
    injected: number;
    records: number;
    faults: Record<string, number>;
    checkpointRegressions: string[];
    violations: number;
    problems: string[];
    wallMs: number;
  };
  assert.equal(figures.seed, seed);
  assert.equal(figures.violations, 0);
  assert.deepEqual(figures.problems, []);
  assert.deepEqual(figures.checkpointRegressions, []);
  assert.equal(figures.records, 50000 + figures.injected);
  assert.ok(figures.faults['kills']! >= 10, `kills ${figures.faults['kills']}`);
  assert.equal(figures.faults['zombies'], 1);
  assert.equal(figures.faults['zombiesThatLostPartitions'], 1, 'the zombie owned partitions when frozen and found them gone');
  assert.equal(figures.faults['cassandraRestarts'], 1);
  assert.equal(figures.faults['kafkaRestarts'], 1);
  assert.equal(figures.faults['skipped'], 0);
});
