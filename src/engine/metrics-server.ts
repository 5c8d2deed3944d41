/**
 * Serves a worker's /metrics (Prometheus text format), /healthz (the process is alive and its event
 * loop answers) and /readyz (running, has been through a group assignment, and neither Kafka nor
 * Cassandra is known to be down; see ServerHealth.readiness).
 *
 * Binds 127.0.0.1 unless EXACTLYONCE_METRICS_HOST says otherwise (e.g. 0.0.0.0 so that Prometheus or
 * the dashboard on another host can scrape it); beyond loopback it requires a token (http-access.ts).
 * A request it cannot read (a target such as `//`, a malformed token cookie) is answered 400, and
 * nothing a request carries can throw past the handler (http-access.ts `guarded`).
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';
import type { Logger } from '../log.js';
import { guarded, httpAccess, refusal, requestTarget, SERVER_LIMITS, type HttpAccess } from './http-access.js';

/** What the server serves: a worker's EngineMetrics, or any process's registry (`verify --every`). */
export interface MetricsSource {
  readonly registry: Registry;
  /** Who serves, for the index page: `exactlyonce worker <id>`. */
  readonly workerId: string;
  readonly health: { readiness(): { ready: boolean; detail: string } };
  /** The index page's name of the process (default: worker). */
  readonly role?: string;
}

export function metricsBindHost(env: NodeJS.ProcessEnv = process.env): string {
  return env['EXACTLYONCE_METRICS_HOST'] || '127.0.0.1';
}

/** The access rule of the metrics server bound to `host` (throws EO_CONFIG_INVALID beyond loopback without a token). */
export function metricsAccess(host = metricsBindHost()): HttpAccess {
  return httpAccess(host, `the metrics server (EXACTLYONCE_METRICS_HOST=${host})`);
}

export async function serveMetrics(
  metrics: MetricsSource,
  port: number,
  running: () => boolean,
  host = metricsBindHost(),
  access = metricsAccess(host),
  log?: Pick<Logger, 'error'>,
): Promise<Server> {
  const server = createServer(SERVER_LIMITS, guarded(async (req, res) => {
    const refused = refusal(req, access);
    if (refused !== undefined) {
      res.writeHead(refused.status, { 'content-type': 'text/plain' }).end(refused.text);
      return;
    }
    const target = requestTarget(req.url);
    const path = typeof target === 'string' ? undefined : target.path;
    if (path === '/metrics') {
      let text: string;
      try {
        text = await metrics.registry.metrics();
      } catch (e) {
        res.writeHead(500, { 'content-type': 'text/plain' }).end(`${String(e)}\n`);
        return;
      }
      res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text);
    } else if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const r = running() ? metrics.health.readiness() : { ready: false, detail: 'not ready: starting' };
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' }).end(`${r.detail}\n`);
    } else if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`exactlyonce ${metrics.role ?? 'worker'} ${metrics.workerId}: /metrics /healthz /readyz\n`);
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  }, log));
  // Scrapers keep connections open; they must not hold the process up at shutdown.
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
