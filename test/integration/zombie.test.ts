import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { freshKeyspace, freshTopic, testConfig } from '../helpers.js';
import { stopWorkers, assertExactlyOnce, generate, sleep, startWorker, waitDrained, watchCheckpoints } from '../pipeline.js';

// A worker frozen (SIGSTOP) past its session timeout loses its partitions to the others; when it
// wakes (SIGCONT) it still holds batches in flight and writes them late. Its writes must neither move
// a checkpoint backwards nor change a stored row.
test('a zombie worker woken after its partitions moved changes nothing', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 6);
  const watch = watchCheckpoints(t, session, config);
  const producing = generate(config, ['--count', '20000', '--rate', '1000', '--clients', '24', '--seed', '99', '--bad-ratio', '0.01']);
  const zombie = startWorker(t, config);
  await sleep(3000);
  const others = [startWorker(t, config), startWorker(t, config)];
  await sleep(4000);
  zombie.kill('SIGSTOP');
  await sleep(15_000); // > the 6 s session timeout: the group moves the zombie's partitions
  zombie.kill('SIGCONT');
  await producing;
  await waitDrained(session, config);
  await stopWorkers([zombie, ...others]);
  assert.match(zombie.output(), /"msg":"lost partitions|"msg":"revoked partitions/, 'the zombie lost its partitions');
  const { regressions, polls } = await watch.stop();
  assert.deepEqual(regressions, []);
  assert.ok(polls > 50, `checkpoints were watched (${polls} polls)`);
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 20000);
  t.diagnostic(JSON.stringify(ledger));
});
