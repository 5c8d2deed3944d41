import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freshKeyspace, freshTopic, testConfig, waitFor } from '../helpers.js';
import { FAST_FAILOVER, stopWorkers, assertExactlyOnce, checkpoints, generate, ownedPartitions, startWorker, waitDrained, waitOwns, waitProgress, watchCheckpoints, timeline } from '../pipeline.js';

// A worker frozen (SIGSTOP) past its session timeout loses its partitions to the others; when it
// wakes (SIGCONT) it still holds batches in flight and writes them late. Its writes must neither move
// a checkpoint backwards nor change a stored row.
test('a zombie worker woken after its partitions moved changes nothing', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 6);
  const watch = watchCheckpoints(t, session, config);
  const producing = generate(config, ['--count', '20000', '--rate', '2000', '--clients', '24', '--seed', '99', '--bad-ratio', '0.01']);
  const phases = timeline();
  const mark = phases.mark;
  const zombie = startWorker(t, config, FAST_FAILOVER);
  const others = [startWorker(t, config, FAST_FAILOVER), startWorker(t, config, FAST_FAILOVER)];
  for (const w of [zombie, ...others]) await waitOwns(w); // the three share the partitions
  mark('the three own partitions');
  // Freeze the zombie while it works: it owns partitions and has just moved one of their checkpoints.
  await waitProgress(zombie, session, config, admin, { since: await checkpoints(session, config) });
  const marks = others.map((w) => w.output().length);
  const zombieMark = zombie.output().length;
  zombie.kill('SIGSTOP');
  mark('SIGSTOP');
  const frozen = [...ownedPartitions(zombie).keys()];
  const atStop = await checkpoints(session, config);
  assert.ok(frozen.length > 0, 'the zombie owned partitions when frozen');
  // Past the (3 s) session timeout the group gives the zombie's partitions to the others; wake it only
  // once their logs say so and each of those partitions has moved on under its new owner (or was done).
  await waitFor(
    async () => {
      const taken = frozen.every((p) => others.some((w, i) => (ownedPartitions(w).get(p)?.at ?? -1) >= marks[i]!));
      if (!taken) return false;
      const cps = await checkpoints(session, config);
      const ends = await admin.watermarks(config.topic);
      return frozen.every((p) => (cps.get(p) ?? -1n) > (atStop.get(p) ?? -1n) || cps.get(p) === ends.find((w) => w.partition === p)?.high);
    },
    { timeoutMs: 120_000, message: `the others take over the zombie's partitions ${frozen.join(',')} and move them on` },
  );
  zombie.kill('SIGCONT');
  mark('its partitions moved on; SIGCONT');
  const lostLine = /"msg":"lost partitions|"msg":"revoked partitions/;
  await waitFor(() => lostLine.test(zombie.output().slice(zombieMark)), { timeoutMs: 120_000, message: 'the woken zombie finds its partitions gone' });
  mark('the zombie found them gone');
  await producing;
  await waitDrained(session, config);
  mark('drained');
  await stopWorkers([zombie, ...others]);
  assert.match(zombie.output().slice(zombieMark), lostLine, 'the zombie lost its partitions (after it was frozen)');
  const { regressions, polls } = await watch.stop();
  assert.deepEqual(regressions, []);
  assert.ok(polls > 50, `checkpoints were watched (${polls} polls)`);
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 20000);
  t.diagnostic(`${phases}; ${JSON.stringify(ledger)}`);
});
