import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { freshKeyspaceAndTopic } from '../helpers.js';
import { FAST_FAILOVER, assertExactlyOnce, finishRun, generate, randomBetween, sleep, startWorker, timeline, waitProgress, watchCheckpoints } from '../pipeline.js';

test('a worker SIGKILLed at random moments and restarted stores every offset exactly once', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 3);
  const watch = watchCheckpoints(t, session, config);
  const producing = generate(config, ['--count', '20000', '--rate', '1000', '--clients', '12', '--health-mix', '0:60,1:30,2:10', '--bad-ratio', '0.01', '--seed', '42']);

  const phases = timeline();
  let worker = startWorker(t, config, FAST_FAILOVER);
  const kills = 6;
  for (let k = 0; k < kills; k++) {
    // Each worker is killed at a random moment of its work: once it owns the partitions and has moved
    // a checkpoint past where it resumed (or caught up), within the next second.
    await waitProgress(worker, session, config, admin);
    await sleep(randomBetween(0, 1000));
    worker.kill('SIGKILL');
    await once(worker, 'exit');
    worker = startWorker(t, config, FAST_FAILOVER);
  }
  phases.mark('killed');
  // The last worker may start after an earlier one drained the topic: finishRun stops it only once its
  // signal handlers are in place (a SIGTERM before that ends it by the signal, code null).
  await finishRun(producing, [worker], session, config, phases);

  const { regressions, polls } = await watch.stop();
  assert.deepEqual(regressions, []);
  assert.ok(polls > 10);
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 20000);
  assert.equal(ledger.stored + ledger.quarantined, 20000);
  assert.ok(ledger.quarantined > 0, 'the stream held malformed records');
  phases.mark('checked');
  t.diagnostic(`kills: ${kills}; ${phases}; ledger: ${JSON.stringify(ledger)}`);
});
