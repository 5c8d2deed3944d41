import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { connect } from '../../src/cassandra/session.js';
import { startServer, stopServer } from '../../src/stack/index.js';
import { freshKeyspace, freshTopic, localStack, testConfig, waitFor } from '../helpers.js';
import { assertExactlyOnce, generate, sleep, startWorker, waitDrained } from '../pipeline.js';

test('Cassandra stopped and restarted under a running worker: no loss, no duplicate, the worker recovers', async (t) => {
  const stack = await localStack();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  // A second client that lives through the restart and is then shut down: none of its connections
  // may outlive shutdown() (the driver used to leave the old host's pool reconnecting).
  const probe = await connect(config);
  const probeId = String((probe as unknown as { options: { id: unknown } }).options.id);
  const worker = startWorker(t, config);
  const producing = generate(config, ['--count', '15000', '--rate', '1000', '--clients', '9', '--seed', '11', '--bad-ratio', '0.01']);
  await sleep(4000);
  assert.equal(await stopServer(stack, 'cassandra'), true);
  await sleep(3000);
  await startServer(stack, 'cassandra');
  await producing;
  await waitFor(() => session.execute('SELECT now() FROM system.local').then(() => true), { timeoutMs: 60_000, message: 'the test session reconnects' });
  await waitFor(() => probe.execute('SELECT now() FROM system.local').then(() => true), { timeoutMs: 60_000, message: 'the probe client reconnects' });
  await probe.shutdown();
  await waitDrained(session, config);
  assert.equal(worker.exitCode, null, 'the worker survived the outage');
  await sleep(15_000); // past the driver's reconnection delays of the outage
  const clients = await session.execute('SELECT port, client_options FROM system_views.clients');
  assert.deepEqual(clients.rows.filter((r) => r['client_options']?.['CLIENT_ID'] === probeId).map((r) => r['port']), [], 'connections of a shut-down client');
  assert.match(worker.output(), /Cassandra is not answering; retrying/);
  assert.match(worker.output(), /Cassandra answers again/);
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 15000);
  t.diagnostic(JSON.stringify(ledger));
});
