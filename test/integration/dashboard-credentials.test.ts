// The dashboard sends its bearer token only to addresses an operator configured (issue 42 item 6):
// --worker-metrics entries and self-registered workers on --scrape-allow hosts (this machine's
// loopback names by default), never to another host that a row of the `workers` table names — a
// table the worker role can write. Listeners on 127.0.0.1 and 127.0.0.2 stand in for a worker and a
// stranger, and record the Authorization header of every request.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { test, type TestContext } from 'node:test';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { startDashboard } from '../../src/dashboard/dashboard.js';
import { freshKeyspace, testConfig, waitFor } from '../helpers.js';

const TOKEN = 'dashboard-credentials-test-token';

/** A listener on `host` that records the Authorization header of each /metrics request and answers `status`. */
async function listener(t: TestContext, host: string, status: number): Promise<{ address: string; seen: Array<string | null> }> {
  const seen: Array<string | null> = [];
  const server = createServer((req, res) => {
    if ((req.url ?? '').startsWith('/metrics')) seen.push(req.headers.authorization ?? null);
    res.writeHead(status, { 'content-type': 'text/plain' }).end(status === 200 ? '' : 'a token is required\n');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  t.after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { address: `${host}:${(server.address() as { port: number }).port}`, seen };
}

async function register(session: Client, config: ConnectionConfig, workerId: string, address: string): Promise<void> {
  const [host, port] = address.split(':');
  await session.execute(
    `INSERT INTO ${config.keyspace}.workers (worker_id, host, metrics_port, topic, group_id, pid, started_at, heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL 600`,
    [workerId, host, Number(port), config.topic, config.group, 1, new Date(), new Date()],
    { prepare: true },
  );
}

test("the token goes to --worker-metrics and --scrape-allow addresses only, never to a host a workers row names", async (t) => {
  const saved = process.env['EXACTLYONCE_HTTP_TOKEN'];
  process.env['EXACTLYONCE_HTTP_TOKEN'] = TOKEN;
  t.after(() => (saved === undefined ? delete process.env['EXACTLYONCE_HTTP_TOKEN'] : (process.env['EXACTLYONCE_HTTP_TOKEN'] = saved)));
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const local = await listener(t, '127.0.0.1', 200); // a worker on this machine, registered
  const stranger = await listener(t, '127.0.0.2', 401); // another host, registered by whoever can write the table
  const named = await listener(t, '127.0.0.2', 200); // another host, named by the operator
  await register(session, config, 'local', local.address);
  await register(session, config, 'stranger', stranger.address);

  const dashboard = await startDashboard(config, { port: 0, host: '127.0.0.1', workerMetrics: [named.address], intervalMs: 200 });
  t.after(() => dashboard.close());
  await waitFor(() => local.seen.length >= 2 && stranger.seen.length >= 2 && named.seen.length >= 2, { timeoutMs: 30_000, message: 'every listener is scraped twice' });
  await dashboard.close();
  assert.deepEqual([...new Set(local.seen)], [`Bearer ${TOKEN}`], '127.0.0.1 is allowed by default');
  assert.deepEqual([...new Set(named.seen)], [`Bearer ${TOKEN}`], 'an address the operator named');
  assert.deepEqual([...new Set(stranger.seen)], [null], 'a host only a workers row names never sees the token');
  const view = dashboard.collector.snapshot()?.workers.find((w) => w.address === stranger.address);
  assert.equal(view?.up, false);
  assert.equal(view?.error, '/metrics answered HTTP 401: the token is sent only to --worker-metrics addresses and --scrape-allow hosts, and 127.0.0.2 is neither');

  // With --scrape-allow 127.0.0.2 the operator allows that host: its registered worker gets the token.
  stranger.seen.length = 0;
  local.seen.length = 0;
  const allowing = await startDashboard(config, { port: 0, host: '127.0.0.1', workerMetrics: [], scrapeAllow: ['127.0.0.2'], intervalMs: 200 });
  t.after(() => allowing.close());
  await waitFor(() => local.seen.length >= 2 && stranger.seen.length >= 2, { timeoutMs: 30_000, message: 'both registered listeners are scraped twice' });
  await allowing.close();
  assert.deepEqual([...new Set(stranger.seen)], [`Bearer ${TOKEN}`]);
  assert.deepEqual([...new Set(local.seen)], [null], 'the allow list replaces the default');
});
