import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { freshKeyspaceAndTopic } from '../helpers.js';
import { FAST_FAILOVER, assertExactlyOnce, finishRun, generate, killOneAtWork, startWorker, waitOwns, waitProgress, timeline, watchCheckpoints } from '../pipeline.js';

test('3 workers killed and restarted at random, plus workers added and removed, store every offset exactly once', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 6);
  const watch = watchCheckpoints(t, session, config);
  const producing = generate(config, ['--count', '30000', '--rate', '2000', '--clients', '24', '--health-mix', '0:50,1:30,2:20', '--bad-ratio', '0.005', '--seed', '7']);

  const phases = timeline();
  const start = () => startWorker(t, config, FAST_FAILOVER);
  const workers = [start(), start(), start()];
  let kills = 0;
  let added = 0;
  let removed = 0;
  for (let step = 0; step < 10; step++) {
    if (step === 3 || step === 7) {
      const joining = start(); // scale out: a rebalance hands partitions over
      workers.push(joining);
      await waitOwns(joining);
      added++;
    } else if (step === 5) {
      const leaving = workers.shift()!; // scale in cleanly: SIGTERM, it leaves the group
      await waitProgress(leaving, session, config, admin); // it has partitions to hand over, and works on them
      leaving.kill('SIGTERM');
      const [code] = await once(leaving, 'exit');
      assert.equal(code, 0, leaving.output());
      removed++;
    } else {
      await killOneAtWork(workers, session, config, admin, start);
      kills++;
    }
  }
  phases.mark('faults done');
  await finishRun(producing, workers, session, config, phases);
  const { regressions } = await watch.stop();
  assert.deepEqual(regressions, []);
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 30000);
  assert.equal(ledger.stored + ledger.quarantined, 30000);
  phases.mark('checked');
  t.diagnostic(`kills ${kills}, added ${added}, removed ${removed}; ${phases}; ${JSON.stringify(ledger)}`);
});
