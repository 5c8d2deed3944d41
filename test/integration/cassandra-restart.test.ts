import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { connect, RECONNECT_MAX_MS, type Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { startServer, stopServer } from '../../src/stack/index.js';
import { freshKeyspace, freshTopic, localStack, testConfig, waitFor } from '../helpers.js';
import { assertExactlyOnce, generate, startServedWorker, waitDrained, waitProgress, waitReadyz, timeline } from '../pipeline.js';

/** The end of an outage test: the worker stops cleanly on SIGTERM, and each of the `records` is stored exactly once. */
async function stopAndProve(t: TestContext, worker: Awaited<ReturnType<typeof startServedWorker>>, session: Client, config: ConnectionConfig, records: number, phases: ReturnType<typeof timeline>): Promise<void> {
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, records);
  t.diagnostic(`${phases}; ${JSON.stringify(ledger)}`);
}

test('Cassandra stopped and restarted under a running worker: no loss, no duplicate, the worker recovers', async (t) => {
  const stack = await localStack();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  // A second client that lives through the restart and is then shut down: none of its connections
  // may outlive shutdown() (the driver used to leave the old host's pool reconnecting).
  const probe = await connect(config);
  const probeId = String((probe as unknown as { options: { id: unknown } }).options.id);
  // The Host objects the driver replaces after the outage (src/cassandra/session.ts shuts them down).
  const replaced: Array<{ address: string; pool: { isClosing(): boolean } }> = [];
  probe.on('hostRemove', (host: (typeof replaced)[number]) => replaced.push(host));
  const phases = timeline();
  const mark = phases.mark;
  const worker = await startServedWorker(t, config);
  const producing = generate(config, ['--count', '15000', '--rate', '1000', '--clients', '9', '--seed', '11', '--bad-ratio', '0.01']);
  await waitReadyz(worker, (r) => r.status === 200 && /owns partitions/.test(r.detail), 'ready, owning partitions');
  await waitProgress(worker, session, config, admin);
  mark('the worker works');
  assert.equal(await stopServer(stack, 'cassandra'), true);
  mark('Cassandra stopped');
  // Cassandra stays down until the worker has noticed: its next write failed and it retries.
  await waitReadyz(worker, (r) => r.status === 503 && /Cassandra not answering/.test(r.detail), 'not ready: Cassandra not answering');
  mark('the worker noticed');
  await startServer(stack, 'cassandra');
  mark('Cassandra started');
  await waitReadyz(worker, (r) => r.status === 200, 'ready again once Cassandra answers');
  mark('the worker is ready again');
  await producing;
  await waitFor(() => session.execute('SELECT now() FROM system.local').then(() => true), { timeoutMs: 60_000, message: 'the test session reconnects' });
  await waitFor(() => probe.execute('SELECT now() FROM system.local').then(() => true), { timeoutMs: 60_000, message: 'the probe client reconnects' });
  await probe.shutdown();
  // No pool of the shut-down client is left to reconnect later (the driver bug: a replaced Host's pool
  // kept reconnecting on its own), and the server sees none of its connections once it has noticed
  // the closed sockets.
  assert.deepEqual(replaced.filter((h) => !h.pool.isClosing()).map((h) => h.address), [], 'replaced hosts whose pool still reconnects');
  await waitDrained(session, config);
  mark('drained');
  assert.equal(worker.exitCode, null, 'the worker survived the outage');
  const probeConnections = async () => {
    const clients = await session.execute('SELECT port, client_options FROM system_views.clients');
    return clients.rows.filter((r) => r['client_options']?.['CLIENT_ID'] === probeId).map((r) => r['port'] as number);
  };
  await waitFor(async () => (await probeConnections()).length === 0, { timeoutMs: 120_000, message: 'the server sees no connection of the shut-down client' }).catch(async (e: Error) => {
    assert.deepEqual(await probeConnections(), [], `connections of a shut-down client (${e.message})`);
  });
  mark('no connection of the probe left');
  assert.match(worker.output(), /Cassandra is not answering; retrying/);
  assert.match(worker.output(), /Cassandra answers again/);
  await stopAndProve(t, worker, session, config, 15000, phases);
});

// The driver's default reconnection schedule doubles its wait from 1 s up to 10 minutes: after an
// outage of a minute and more, a worker would wait for its next attempt (up to about as long again)
// before it wrote anything, though Cassandra answered long before. Waits are capped at 5 s
// (src/cassandra/session.ts), so a worker answers within seconds of Cassandra's return.
test('Cassandra down for over a minute: the worker answers again within seconds of its return, not at the next of ever longer waits', async (t) => {
  const stack = await localStack();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  const phases = timeline();
  const mark = phases.mark;
  const worker = await startServedWorker(t, config);
  const producing = generate(config, ['--count', '6000', '--rate', '50', '--clients', '9', '--seed', '12']);
  await waitReadyz(worker, (r) => r.status === 200 && /owns partitions/.test(r.detail), 'ready, owning partitions');
  await waitProgress(worker, session, config, admin);
  mark('the worker works');
  assert.equal(await stopServer(stack, 'cassandra'), true);
  const stoppedAt = Date.now();
  mark('Cassandra stopped');
  await waitReadyz(worker, (r) => r.status === 503 && /Cassandra not answering/.test(r.detail), 'not ready: Cassandra not answering');
  // Down 75 s: with the driver's default schedule, its attempts fall about 63 and 127 s after the outage began.
  await new Promise((r) => setTimeout(r, Math.max(0, stoppedAt + 75_000 - Date.now())));
  await startServer(stack, 'cassandra');
  const startedAt = Date.now();
  mark('Cassandra started');
  await waitReadyz(worker, (r) => r.status === 200, 'ready again once Cassandra answers', 180_000);
  const took = Date.now() - startedAt;
  mark('the worker is ready again');
  assert.ok(took < 20_000, `the worker answered ${(took / 1000).toFixed(1)} s after Cassandra was back (${phases})`);
  await producing;
  await waitFor(() => session.execute('SELECT now() FROM system.local').then(() => true), { timeoutMs: 60_000, message: 'the test session reconnects' });
  await waitDrained(session, config);
  mark('drained');
  await stopAndProve(t, worker, session, config, 6000, phases);
});

// The driver (4.10) started a control-connection refresh from each of its health listeners and each
// failed refresh's timer without asking whether one was under way, and attached two sets of listeners
// when it re-initialised after every node was down: refreshes multiplied with each outage, and two
// that overlapped nulled each other's connection until one failed reading it and, started by a timer,
// ended the process with an unhandled rejection (a worker died so in CI's chaos --transition-crashes).
// src/cassandra/session.ts runs one refresh at a time. Through three restarts, each attempt the driver
// schedules comes when scheduled, never sooner (a second chain's attempt falls in between: 400 ms and
// more before it, without the fix), none starts while Cassandra stays up after a reconnect, and no
// rejection escapes.
test('Cassandra restarted three times: the driver reconnects on one schedule, never two refreshes at once, and no rejection escapes', async (t) => {
  const stack = await localStack();
  const client = await connect(testConfig());
  t.after(() => client.shutdown());
  const escaped: string[] = [];
  const onRejection = (e: unknown) => escaped.push(String((e as Error)?.stack ?? e));
  process.on('unhandledRejection', onRejection);
  t.after(() => process.off('unhandledRejection', onRejection));
  const lines: Array<{ at: number; msg: string }> = [];
  client.on('log', (level: string, className: string, msg: string) => {
    if (className === 'ControlConnection' && /Trying to acquire|scheduling reconnection in|and up to date/.test(msg)) lines.push({ at: performance.now(), msg });
  });
  const upSince: number[] = [];
  for (let i = 0; i < 3; i++) {
    assert.equal(await stopServer(stack, 'cassandra'), true);
    await startServer(stack, 'cassandra');
    await waitFor(() => client.execute('SELECT now() FROM system.local').then(() => true, () => false), { timeoutMs: 120_000, message: `the client answers after restart ${i + 1}` });
    const upToDate = await waitFor(() => [...lines].reverse().find((l) => l.msg.includes('and up to date') && l.at > (upSince.at(-1) ?? 0)), { timeoutMs: 60_000, message: `the control connection is up to date after restart ${i + 1}` });
    upSince.push(upToDate.at);
    await new Promise((r) => setTimeout(r, Math.max(0, upToDate.at + 2 * RECONNECT_MAX_MS - performance.now())));
  }
  const early: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const scheduled = /scheduling reconnection in (\d+)ms/.exec(lines[i - 1]!.msg);
    if (scheduled !== null && lines[i]!.msg.includes('Trying to acquire') && lines[i]!.at - lines[i - 1]!.at < Number(scheduled[1]) - 200) {
      early.push(`an attempt ${(lines[i]!.at - lines[i - 1]!.at).toFixed(0)} ms after one scheduled in ${scheduled[1]} ms`);
    }
  }
  assert.deepEqual(early, [], 'attempts of a second refresh chain');
  for (const since of upSince) {
    const after = lines.filter((l) => l.at > since && l.at < since + 2 * RECONNECT_MAX_MS);
    assert.deepEqual(after.map((l) => l.msg), [], 'refreshes while Cassandra stayed up after a reconnect');
  }
  assert.ok(lines.filter((l) => l.msg.includes('scheduling reconnection in')).length >= 3, 'each restart made the driver reconnect');
  assert.deepEqual(escaped, []);
});
