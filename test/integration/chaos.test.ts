// The bounded chaos scenario of CI: 50,000 events over 60 s, 10 SIGKILLs, a zombie, a Cassandra restart
// and a Kafka restart (of the shared local stack), workers added and removed, malformed bursts; then verify.
// The seeds are fixed, so that `make test` runs the same schedule every time; random seeds belong to
// `make soak` and to `exactlyonce chaos` run by hand (each prints its seed, to replay a failure).
// 2703006044 once planned a removal where kills had left one worker (see the schedule's unit test).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runChaos } from '../chaos-run.js';

const SEEDS = [2703006044];

for (const seed of SEEDS) test(`chaos seed ${seed}: no violation of exactly-once under kills, a zombie, server restarts and rebalances`, async (t) => {
  const figures = await runChaos(t, ['--events', '50000', '--duration', '60', '--kills', '10', '--zombies', '1', '--cassandra-restarts', '1', '--kafka-restarts', '1', '--seed', String(seed)]);
  assert.equal(figures.seed, seed);
  assert.equal(figures.records, 50000 + figures.injected);
  assert.ok(figures.faults['kills']! >= 10, `kills ${figures.faults['kills']}`);
  assert.equal(figures.faults['zombies'], 1);
  assert.equal(figures.faults['zombiesThatLostPartitions'], 1, 'the zombie owned partitions when frozen and found them gone');
  assert.equal(figures.faults['cassandraRestarts'], 1);
  assert.equal(figures.faults['kafkaRestarts'], 1);
  assert.equal(figures.faults['skipped'], 0);
});
