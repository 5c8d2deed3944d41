import assert from 'node:assert/strict';
import { once } from 'node:events';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as delay } from 'node:timers/promises';
import { killServer, startServer } from '../../src/stack/index.js';
import { freshKeyspace, freshTopic, localStack, repoRoot, startCli, testConfig, waitFor } from '../helpers.js';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { assertExactlyOnce, generate, startServedWorker, startWorker, waitDrained, waitProgress, waitReadyz, timeline } from '../pipeline.js';

/** The process's exit code, or undefined if it is still running after `ms`. */
async function exitWithin(worker: { exitCode: number | null } & NodeJS.EventEmitter, ms: number): Promise<number | null | undefined> {
  if (worker.exitCode !== null) return worker.exitCode;
  return Promise.race([once(worker, 'exit').then(([code]) => code as number | null), delay(ms, undefined, { ref: false })]);
}

/** The worker's log lines at error level (pino's 50 and above). */
function errorLines(output: string): string[] {
  return output.split('\n').filter((l) => /^\{.*"level":(5|6)\d/.test(l));
}

// A worker told to stop while Kafka is down (brokers restarted under a rolling update of the workers,
// a node drained at the wrong moment) must still stop, and cleanly: a batch in flight waiting on the
// brokers (the topic-identity check before its write, an alert's send) is abandoned before its
// checkpoint, and read again by the next owner. It used to wait out the Kafka client's timeouts, over
// a minute per call, and a chaos run saw one hold its partitions for 300 s.
test('a worker SIGTERMed while Kafka is down, with batches in flight, exits cleanly at once; the next worker reads every record exactly once', async (t) => {
  const stack = await localStack();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  const phases = timeline();
  const mark = phases.mark;
  await generate(config, ['--count', '30000', '--rate', '100000', '--clients', '9', '--seed', '12', '--bad-ratio', '0.01']);
  mark('30000 records produced');
  // A generous deadline for a loaded machine: the stop takes seconds (the group leave, the producer's
  // flush); waiting out the Kafka client's timeouts took over a minute.
  const worker = await startServedWorker(t, config, ['--stop-timeout', '60']);
  await waitProgress(worker, session, config, admin);
  mark('the worker works');
  assert.equal(await killServer(stack, 'kafka'), true);
  mark('Kafka SIGKILLed');
  let restarted = false;
  t.after(async () => {
    if (!restarted) await startServer(stack, 'kafka');
  });
  // Its batches meanwhile reach for the brokers (the identity check each batch waits for).
  await delay(2000);
  worker.kill('SIGTERM');
  const started = Date.now();
  const code = await exitWithin(worker, 120_000);
  const tookMs = Date.now() - started;
  mark(`the worker exited (${code}) after ${tookMs} ms`);
  await startServer(stack, 'kafka');
  restarted = true;
  mark('Kafka started');
  assert.notEqual(code, undefined, `the worker did not exit within 120 s of its SIGTERM:\n${worker.output()}`);
  // Exit 0 is a stop that finished: within its deadline (60 s), else it would be EO_STOP_TIMEOUT, exit 4.
  assert.equal(code, 0, worker.output());
  // Seconds (the group leave without a coordinator, the producer's flush): 8–15 s measured here; waiting
  // out the Kafka client's timeouts took over 80 s.
  assert.ok(tookMs < 45_000, `the stop took ${tookMs} ms`);
  assert.deepEqual(errorLines(worker.output()), [], 'a stop while Kafka is down is no error');
  assert.match(worker.output(), /"msg":"worker stopped"/);
  const next = startWorker(t, config);
  await waitDrained(session, config);
  mark('drained by the next worker');
  next.kill('SIGTERM');
  const [nextCode] = await once(next, 'exit');
  assert.equal(nextCode, 0, next.output());
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 30000);
  t.diagnostic(`${phases}; ${JSON.stringify(ledger)}`);
});

// A worker told to stop while it is still starting, waiting for brokers that are down, exits 0 within
// seconds (its stop takes ~2 s; the exit then waits for the Kafka clients' close, 11 s measured), with
// no error line, whatever the start was waiting on when the stop abandoned it.
test('a worker SIGTERMed while starting, with Kafka down, exits cleanly within seconds', async (t) => {
  const stack = await localStack();
  const config = testConfig();
  await freshKeyspace(t, config);
  await freshTopic(t, config, 2);
  assert.equal(await killServer(stack, 'kafka'), true);
  t.after(() => startServer(stack, 'kafka'));
  const worker = startWorker(t, config);
  // Starting: its first calls to the brokers are under way, and retried.
  await waitFor(() => /"server":"Kafka".*"msg":"Kafka is not answering/.test(worker.output()) || undefined, { timeoutMs: 60_000, message: 'the worker says it waits for Kafka' });
  worker.kill('SIGTERM');
  const started = Date.now();
  const code = await exitWithin(worker, 60_000);
  const tookMs = Date.now() - started;
  assert.equal(code, 0, worker.output());
  assert.ok(tookMs < 30_000, `the stop took ${tookMs} ms`);
  assert.deepEqual(errorLines(worker.output()), [], 'a stop while starting is no error');
  t.diagnostic(`exited 0 ${tookMs} ms after its SIGTERM`);
});

// Whatever a stop waits for — here a job's close hook that never returns — it gives up at its
// deadline, says so with a code at error level, and exits: a stop never waits past --stop-timeout.
test('a stop that cannot finish gives up at --stop-timeout with EO_STOP_TIMEOUT (exit 4), naming what it waited for', async (t) => {
  await localStack();
  const config = testConfig();
  await freshKeyspace(t, config);
  await freshTopic(t, config, 2);
  const job = ['--job', join(repoRoot, 'test', 'fixtures', 'slow-assign-job.ts'), '--job-option', 'closeDelayMs=600000'];
  const worker = startCli(t, ['run', ...connectionArgs(config), '--session-timeout-ms', '6000', '--stop-timeout', '10', ...job]);
  await waitFor(() => /assigned partitions/.test(worker.output()), { timeoutMs: 120_000, message: 'the worker owns partitions' });
  worker.kill('SIGTERM');
  const started = Date.now();
  const code = await exitWithin(worker, 60_000);
  const tookMs = Date.now() - started;
  assert.equal(code, 4, worker.output());
  assert.ok(tookMs >= 10_000, `gave up after ${tookMs} ms, before its deadline`);
  const coded = errorLines(worker.output()).filter((l) => l.includes('"code":"EO_STOP_TIMEOUT"'));
  assert.equal(coded.length, 1, worker.output());
  assert.match(coded[0]!, /did not stop within 10000 ms: still waiting for the job's close; it exits all the same/);
  assert.match(worker.output(), /error EO_STOP_TIMEOUT: /);
  t.diagnostic(`exited ${code} after ${tookMs} ms`);
});
