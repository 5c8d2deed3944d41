// Cassandra on its default commit log (periodic: synced every 10 s) forgets, when SIGKILLed, what it
// acknowledged since the last sync: rows and checkpoints alike. The worker that keeps its partitions
// must notice that a checkpoint it saw acknowledged went back, read from there again and write the
// lost rows again (src/engine/lost-writes.ts); `verify` then finds nothing missing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { killServer, stackCommitlogSync, stopServer } from '../../src/stack/index.js';
import { freshKeyspace, freshTopic, localStack, runCli, testConfig, waitFor } from '../helpers.js';
import { checkpoints, connectionArgs, generate, ownedPartitions, restartCassandra as restart, sleep, startServedWorker, stopWorkers, timeline, waitDrained, waitProgress, wideLossWindow } from '../pipeline.js';

type Worker = Awaited<ReturnType<typeof startServedWorker>>;

/** The worker's EO_WRITES_LOST lines: one per rewind. */
function rewindLines(worker: Worker): string[] {
  return worker.output().split('\n').filter((l) => l.includes('"code":"EO_WRITES_LOST"'));
}

/** Every checkpoint reaches its log end (else the worker's warnings and errors say why), then verify is exact: nothing missing, the alerts exact (table and topic). */
async function drainedAndExact(worker: Worker, session: Parameters<typeof waitDrained>[0], config: ReturnType<typeof testConfig>, phases: ReturnType<typeof timeline>, produced: number): Promise<void> {
  await waitDrained(session, config).catch((e: Error) => {
    // What the worker said (its warnings and errors) is what explains a partition that never drains.
    const said = worker.output().split('\n').filter((l) => /"level":(40|50)|"level":"(warn|error)"/.test(l));
    throw new Error(`${e.message}; ${phases}; the worker's warnings and errors:\n${said.slice(-40).join('\n')}`);
  });
  phases.mark('drained');
  const verify = await runCli(['verify', ...connectionArgs(config)]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  assert.match(verify.stdout, new RegExp(`checked ${produced.toLocaleString('en-US')} records`));
  assert.match(verify.stdout, /table \S+\.alerts: found \d+, wrong 0 \(missing 0, extra 0, count 0\)/);
  assert.match(verify.stdout, /topic \S+: found \d+ \(latest of \d+ messages\), wrong 0 \(missing 0, extra 0, count 0\)/);
}

async function assertOneCountPerRewind(worker: Worker, rewinds: string[]): Promise<void> {
  const metrics = await (await fetch(`http://127.0.0.1:${worker.port}/metrics`)).text();
  const counted = [...metrics.matchAll(/^exactlyonce_lost_writes_total\{partition="\d+"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  assert.equal(counted, rewinds.length, 'one count of exactlyonce_lost_writes_total per rewind');
}

/** The commit log's sync period of the rolling-restart test: longer than all its steps, from Cassandra's start to its SIGKILL. */
const ROLLING_SYNC_MS = 300_000;

/** Events per round; the rate keeps every round's writes within the commit log's 10 s window. */
const PER_ROUND = 3000;

test('Cassandra SIGKILLed on the periodic commit log while records flow: lost acknowledged writes are written again, verify finds none missing', async (t) => {
  const stack = { ...(await localStack()), commitlogSync: 'periodic' as const };
  const phases = timeline();
  if (stackCommitlogSync(stack, 'cassandra') !== 'periodic') {
    // The stack runs the other mode: this test is about the default one.
    await killServer(stack, 'cassandra');
    await restart(stack);
    phases.mark('Cassandra restarted on the periodic commit log');
  }
  assert.equal(stackCommitlogSync(stack, 'cassandra'), 'periodic');
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  // A long session timeout: the worker keeps its partitions while it is held still (below).
  const worker = await startServedWorker(t, config, ['--session-timeout-ms', '180000']);
  let produced = 0;
  const lost: string[] = [];
  // Each round: records flow, the worker checkpoints them, then it is held still (SIGSTOP) and at once
  // Cassandra is SIGKILLed and started again; the checkpoints are read before and after, while the
  // worker cannot write, and the worker goes on (SIGCONT) with its partitions and in-memory position.
  // Cassandra (periodic, uncompressed) replays its commit log up to the last marker, written every
  // 100 ms: the worker's writes of the last few ms are gone unless a marker fell in between; rounds
  // go on until one round lost a checkpoint.
  for (let round = 1; lost.length === 0 && round <= 6; round++) {
    const since = await checkpoints(session, config);
    const flowing = generate(config, ['--count', String(PER_ROUND), '--rate', '1500', '--clients', '9', '--seed', String(round)]);
    produced += PER_ROUND;
    await waitProgress(worker, session, config, admin, { since });
    await waitFor(async () => [...(await checkpoints(session, config))].some(([p, o]) => o >= (since.get(p) ?? 0n) + 500n), { timeoutMs: 120_000, message: 'a checkpoint moves 500 records' });
    process.kill(worker.pid!, 'SIGSTOP');
    try {
      const before = await checkpoints(session, config);
      assert.equal(await killServer(stack, 'cassandra'), true);
      phases.mark(`round ${round}: worker held, SIGKILL Cassandra`);
      await restart(stack);
      const after = await waitFor(() => checkpoints(session, config).catch(() => undefined), { timeoutMs: 120_000, message: 'the test session reads the checkpoints again' });
      for (const [p, o] of before) if ((after.get(p) ?? -1n) < o) lost.push(`partition ${p}: ${o} -> ${after.get(p) ?? 'none'}`);
      phases.mark(`round ${round}: Cassandra back`);
    } finally {
      process.kill(worker.pid!, 'SIGCONT');
    }
    await flowing;
  }
  assert.notDeepEqual(lost, [], 'Cassandra forgot no acknowledged checkpoint in six SIGKILLs (is its commit log periodic?)');
  phases.mark(`checkpoints lost: ${lost.join(', ')}`);
  // Records go on flowing after the crash: the worker's next checkpoints would cover the hole.
  await generate(config, ['--count', String(PER_ROUND), '--rate', '1500', '--clients', '9', '--seed', '99']);
  produced += PER_ROUND;
  await drainedAndExact(worker, session, config, phases, produced);
  const rewinds = rewindLines(worker);
  assert.ok(rewinds.length >= 1, `the worker says it writes the lost records again (lost: ${lost.join(', ')})`);
  assert.match(rewinds[0]!, /Cassandra lost acknowledged writes \(its checkpoint is (\d+|gone), below \d+, written and acknowledged before/);
  await assertOneCountPerRewind(worker, rewinds);
  t.diagnostic(`${phases}; ${rewinds.length} rewinds; ${produced} records`);
});

test('Cassandra SIGKILLed twice while the worker runs (not held): no partition stalls, and verify finds none missing', async (t) => {
  const stack = { ...(await localStack()), commitlogSync: 'periodic' as const };
  assert.equal(stackCommitlogSync(stack, 'cassandra'), 'periodic', 'the test before leaves the stack on the periodic commit log');
  const phases = timeline();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  const worker = await startServedWorker(t, config, ['--session-timeout-ms', '180000']);
  let produced = 0;
  // Unlike the test above the worker is never held: its writes and checkpoints in flight fail with
  // the crash, are retried while Cassandra restarts, and find the loss once it is back — the old
  // task's batches too, after its partition was already rewound for a new owner.
  // Two rounds at least, and until the worker found a loss (a commit log sync just before the SIGKILL
  // can leave nothing to lose).
  for (let round = 1; round <= 2 || (rewindLines(worker).length === 0 && round <= 6); round++) {
    const since = await checkpoints(session, config);
    const flowing = generate(config, ['--count', String(PER_ROUND), '--rate', '3000', '--clients', '9', '--seed', String(round)]);
    produced += PER_ROUND;
    await waitProgress(worker, session, config, admin, { since });
    await waitFor(async () => [...(await checkpoints(session, config))].some(([p, o]) => o >= (since.get(p) ?? 0n) + 500n), { timeoutMs: 120_000, message: 'a checkpoint moves 500 records' });
    assert.equal(await killServer(stack, 'cassandra'), true);
    phases.mark(`round ${round}: SIGKILL Cassandra`);
    await restart(stack);
    await waitFor(() => checkpoints(session, config).catch(() => undefined), { timeoutMs: 120_000, message: 'the test session reads the checkpoints again' });
    phases.mark(`round ${round}: Cassandra back`);
    await flowing;
  }
  await generate(config, ['--count', String(PER_ROUND), '--rate', '3000', '--clients', '9', '--seed', '99']);
  produced += PER_ROUND;
  await drainedAndExact(worker, session, config, phases, produced);
  const said = rewindLines(worker);
  assert.ok(said.length >= 1, 'the worker found a loss and wrote the lost records again');
  await assertOneCountPerRewind(worker, said);
  t.diagnostic(`${phases}; ${said.length} rewinds; ${produced} records`);
});

test('a rolling restart, then Cassandra SIGKILLed on the periodic commit log: the new owner finds the checkpoints it planned from gone and writes every lost record again', async (t) => {
  const phases = timeline();
  // Cassandra started afresh, its first sync a whole period away (5 minutes, where this test's steps
  // take well under one): every checkpoint A writes is still unsynced at the SIGKILL. On a stack
  // already running, the sync's phase is unknown and may fall between A's last checkpoint and the
  // SIGKILL, leaving nothing to lose.
  const stack = await wideLossWindow(phases, { periodMs: ROLLING_SYNC_MS, fresh: true });
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  // Worker A drains 6,000 events and stops cleanly (a rolling restart); worker B takes its partitions,
  // planned from the checkpoints A left, which Cassandra has acknowledged but not synced.
  const a = await startServedWorker(t, config);
  await generate(config, ['--count', '6000', '--rate', '6000', '--clients', '9', '--seed', '1']);
  const drained = await waitDrained(session, config);
  assert.equal([...drained.values()].reduce((n, o) => n + o, 0n), 6000n);
  phases.mark('A drained 6,000');
  await stopWorkers([a]);
  const b = await startServedWorker(t, config, ['--session-timeout-ms', '180000']);
  await waitFor(() => ownedPartitions(b).size === 3, { timeoutMs: 120_000, message: 'B owns the 3 partitions' });
  const planned = [...ownedPartitions(b).values()].map((o) => o.start);
  assert.deepEqual(planned.filter((s) => typeof s !== 'bigint'), [], `B planned every partition from A's checkpoints (${planned.join(',')})`);
  phases.mark('B owns 0,1,2');
  await sleep(1000);
  const sinceStart = Date.now() - stack.restartedAt!;
  assert.ok(sinceStart < ROLLING_SYNC_MS, `the SIGKILL comes before Cassandra's first commit log sync (${sinceStart} ms after its restart, the period ${ROLLING_SYNC_MS} ms)`);
  assert.equal(await killServer(stack, 'cassandra'), true);
  phases.mark('SIGKILL Cassandra');
  await restart(stack);
  const after = await waitFor(() => checkpoints(session, config).catch(() => undefined), { timeoutMs: 120_000, message: 'the test session reads the checkpoints again' });
  const lost = [...drained].filter(([p, o]) => (after.get(p) ?? -1n) < o).map(([p, o]) => `partition ${p}: ${o} -> ${after.get(p) ?? 'none'}`);
  assert.notDeepEqual(lost, [], 'Cassandra forgot the checkpoints A wrote less than a sync period before the SIGKILL');
  phases.mark(`Cassandra back; checkpoints lost: ${lost.join(', ')}`);
  await generate(config, ['--count', '3000', '--rate', '3000', '--clients', '9', '--seed', '2']);
  await drainedAndExact(b, session, config, phases, 9000);
  const rewinds = rewindLines(b);
  assert.ok(rewinds.length >= 1, `B says it writes the lost records again (lost: ${lost.join(', ')})`);
  await assertOneCountPerRewind(b, rewinds);
  t.diagnostic(`${phases}; ${rewinds.length} rewinds`);
});

test('rows lost while their checkpoint survived (a ring), the owner SIGKILLed before it could write them again: the next owner reads again from where its checkpoint says', async (t) => {
  const phases = timeline();
  const stack = await localStack();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  // A window wider than this test's few seconds of writing: every batch of A's is in it.
  const window = ['--lost-writes-window-ms', '120000'];
  const a = await startServedWorker(t, config, window);
  await generate(config, ['--count', '3000', '--rate', '3000', '--clients', '9', '--seed', '1']);
  const drained = await waitDrained(session, config);
  assert.equal([...drained.values()].reduce((n, o) => n + o, 0n), 3000n);
  phases.mark('A drained 3,000');
  process.kill(a.pid!, 'SIGKILL');
  // What a ring loses when the replicas that held rows crash before syncing while the checkpoint's
  // others live (a single node loses rows and checkpoints together): the rows, injected here.
  await session.execute(`TRUNCATE ${config.keyspace}.events`);
  // The crashed node starts again (stopped cleanly here: it loses nothing more, and its start is new).
  await stopServer(stack, 'cassandra');
  await restart(stack);
  const after = await waitFor(() => checkpoints(session, config).catch(() => undefined), { timeoutMs: 120_000, message: 'the test session reads the checkpoints again' });
  assert.deepEqual(after, drained, 'the checkpoints survived');
  phases.mark('A SIGKILLed; its rows lost, its checkpoints intact; Cassandra restarted');
  const b = await startServedWorker(t, config, window);
  await generate(config, ['--count', '1500', '--rate', '3000', '--clients', '9', '--seed', '2']);
  await drainedAndExact(b, session, config, phases, 4500);
  const replays = b.output().split('\n').filter((l) => /may have forgotten rows acknowledged/.test(l));
  assert.equal(replays.length, 3, `one read again per partition:\n${replays.join('\n')}`);
  const metrics = await (await fetch(`http://127.0.0.1:${b.port}/metrics`)).text();
  assert.deepEqual([...metrics.matchAll(/^exactlyonce_crash_replays_total\{partition="(\d+)"\} (\d+)$/gm)].map((m) => `${m[1]}:${m[2]}`).sort(), ['0:1', '1:1', '2:1']);
  t.diagnostic(`${phases}`);
});
