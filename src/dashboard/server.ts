/**
 * The dashboard's HTTP server: one static page (./static), the charting library straight from
 * node_modules (uPlot: works offline, no CDN), a JSON snapshot at /api/snapshot, and live updates as
 * server-sent events at /api/events (one `tick` event per collector round). A request it cannot read
 * is answered 400, and nothing a request carries can throw past the handler (engine/http-access.ts).
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { guarded, httpAccess, refusal, requestTarget, SERVER_LIMITS, TOKEN_COOKIE, type HttpAccess } from '../engine/http-access.js';
import type { Logger } from '../log.js';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Collector } from './collector.js';
import type { HistoryPoint, Snapshot } from './snapshot.js';

const staticDir = fileURLToPath(new URL('./static/', import.meta.url));
const uplotDir = join(dirname(createRequire(import.meta.url).resolve('uplot/package.json')), 'dist');

interface Asset {
  type: string;
  body: Buffer;
}

function assets(): Map<string, Asset> {
  const file = (path: string, type: string): Asset => ({ type, body: readFileSync(path) });
  return new Map([
    ['/', file(join(staticDir, 'index.html'), 'text/html; charset=utf-8')],
    ['/app.js', file(join(staticDir, 'app.js'), 'text/javascript; charset=utf-8')],
    ['/style.css', file(join(staticDir, 'style.css'), 'text/css; charset=utf-8')],
    ['/vendor/uplot.js', file(join(uplotDir, 'uPlot.iife.min.js'), 'text/javascript; charset=utf-8')],
    ['/vendor/uplot.css', file(join(uplotDir, 'uPlot.min.css'), 'text/css; charset=utf-8')],
  ]);
}

/** The dashboard's access rule on `host` (throws EO_CONFIG_INVALID beyond loopback without a token). */
export function dashboardAccess(host: string): HttpAccess {
  return httpAccess(host, `the dashboard (--host ${host})`);
}

export interface DashboardServer {
  server: Server;
  url: string;
  /** Who may use it: loopback with a Host check, or a token (see engine/http-access.ts). */
  access: HttpAccess;
  /** Ends the live streams and closes the server. Idempotent. */
  close(): Promise<void>;
}

export async function serveDashboard(
  collector: Collector,
  port: number,
  host = '127.0.0.1',
  access = dashboardAccess(host),
  log?: Pick<Logger, 'error'>,
): Promise<DashboardServer> {
  const files = assets();
  const streams = new Set<ServerResponse>();
  const send = (res: ServerResponse, event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  const onTick = (snapshot: Snapshot, point: HistoryPoint) => {
    for (const res of streams) send(res, 'tick', { snapshot, point });
  };
  collector.on('tick', onTick);

  const server = createServer(SERVER_LIMITS, guarded((req, res) => {
    const refused = refusal(req, access);
    if (refused !== undefined) {
      res.writeHead(refused.status, { 'content-type': 'text/plain' }).end(refused.text);
      return;
    }
    const target = requestTarget(req.url);
    if (typeof target === 'string') {
      res.writeHead(400, { 'content-type': 'text/plain' }).end(`bad request: ${target}\n`);
      return;
    }
    const path = target.path;
    // A browser opened with ?token=…: keep it in a cookie the page's own requests carry, and drop it
    // from the address bar. Only to a page of ours: a path such as `//elsewhere.example` would make
    // this an open redirect.
    const given = target.query.get('token');
    if (given !== null && access.token !== undefined) {
      const location = files.has(path) || path === '/index.html' ? path : '/';
      res.writeHead(303, { location, 'set-cookie': `${TOKEN_COOKIE}=${encodeURIComponent(given)}; HttpOnly; SameSite=Strict; Path=/` }).end();
      return;
    }
    const asset = files.get(path === '/index.html' ? '/' : path);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
    } else if (asset !== undefined) {
      res.writeHead(200, { 'content-type': asset.type, 'cache-control': 'no-cache' }).end(asset.body);
    } else if (path === '/api/snapshot') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ snapshot: collector.snapshot() ?? null, history: collector.history() }));
    } else if (path === '/api/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
      // The browser reconnects by itself after 2 s if the stream drops.
      res.write('retry: 2000\n\n');
      send(res, 'hello', { snapshot: collector.snapshot() ?? null, history: collector.history() });
      streams.add(res);
      req.on('close', () => streams.delete(res));
    } else if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/favicon.ico') {
      res.writeHead(204).end();
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  }, log));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address();
  const actualPort = typeof address === 'object' && address !== null ? address.port : port;
  let closing: Promise<void> | undefined;
  return {
    server,
    url: `http://${host.includes(':') ? `[${host}]` : host}:${actualPort}/`,
    access,
    close() {
      closing ??= new Promise<void>((resolve) => {
        collector.off('tick', onTick);
        for (const res of streams) res.end();
        streams.clear();
        server.close(() => resolve());
        server.closeAllConnections();
      });
      return closing;
    },
  };
}
