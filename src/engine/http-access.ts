/**
 * Who may use our HTTP servers (a worker's /metrics, the dashboard).
 *
 * - Bound to loopback (the default), only this machine can connect, but a web page in a local
 *   browser can still reach the server through DNS rebinding (a hostile name re-resolved to
 *   127.0.0.1): the `Host` header must then name a loopback address or `localhost`.
 * - Bound beyond loopback (EXACTLYONCE_METRICS_HOST / `dashboard --host`), every request must carry
 *   the token, from EXACTLYONCE_HTTP_TOKEN_FILE (a file, first line) or EXACTLYONCE_HTTP_TOKEN:
 *   `Authorization: Bearer <token>` (Prometheus: `authorization: { credentials_file: … }`), or, for a
 *   browser, `?token=<token>` once (the dashboard turns it into an HttpOnly cookie). Without a token
 *   such a server does not start.
 */
import { timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ExactlyOnceError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';

export const TOKEN_COOKIE = 'exactlyonce_token';

export interface HttpAccess {
  /** Required on every request when set. */
  readonly token: string | undefined;
  /** Host header names accepted (without port), or undefined for any. */
  readonly hosts: ReadonlySet<string> | undefined;
}

export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** The token from EXACTLYONCE_HTTP_TOKEN_FILE or EXACTLYONCE_HTTP_TOKEN, if any. */
export function httpToken(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const file = env['EXACTLYONCE_HTTP_TOKEN_FILE'];
  if (file !== undefined && file !== '') {
    let token: string;
    try {
      token = readFileSync(file, 'utf8').split(/\r?\n/)[0]!.trim();
    } catch (e) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `EXACTLYONCE_HTTP_TOKEN_FILE: ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { cause: e });
    }
    if (token.length < 16) throw new ExactlyOnceError('EO_CONFIG_INVALID', `EXACTLYONCE_HTTP_TOKEN_FILE: the token in ${file} is shorter than 16 characters`);
    return token;
  }
  const token = env['EXACTLYONCE_HTTP_TOKEN'];
  if (token === undefined || token === '') return undefined;
  if (token.length < 16) throw new ExactlyOnceError('EO_CONFIG_INVALID', 'EXACTLYONCE_HTTP_TOKEN: the token is shorter than 16 characters');
  return token;
}

/**
 * The access rule for a server bound to `bindHost`; `what` names it in the error when a token is
 * needed and missing (e.g. 'EXACTLYONCE_METRICS_HOST=0.0.0.0').
 */
export function httpAccess(bindHost: string, what: string, env: NodeJS.ProcessEnv = process.env): HttpAccess {
  const token = httpToken(env);
  if (isLoopback(bindHost)) return { token, hosts: new Set(['localhost', '127.0.0.1', '::1', bindHost.replace(/^\[|\]$/g, '')]) };
  if (token === undefined) {
    throw new ExactlyOnceError(
      'EO_CONFIG_INVALID',
      `${what} serves beyond this machine and needs a token: put one (16+ characters) in a file and set EXACTLYONCE_HTTP_TOKEN_FILE (or EXACTLYONCE_HTTP_TOKEN)`,
    );
  }
  return { token, hosts: undefined };
}

/** The Host header's name without its port. */
function hostName(header: string | undefined): string {
  if (header === undefined) return '';
  const m = /^\[([^\]]+)\](:\d+)?$/.exec(header);
  return (m !== null ? m[1]! : header.replace(/:\d+$/, '')).toLowerCase();
}

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** What our servers read of a request's target: the path (never percent-decoded) and the query. */
export interface RequestTarget {
  path: string;
  query: URLSearchParams;
}

/**
 * Splits a request's target without `new URL`, which throws on targets a stranger may send (`//`,
 * `//[`, `http://[`). Only the origin form (`/path?query`, RFC 9112 §3.2.1) is served; anything else
 * is a string saying why, which the servers answer with 400. The path is compared as sent, so `%`,
 * `%zz` or bytes that are not UTF-8 only ever fail to match (404); URLSearchParams decodes the query
 * leniently (a bad escape stays as it is).
 */
export function requestTarget(url: string | undefined): RequestTarget | string {
  const raw = url ?? '/';
  if (!raw.startsWith('/')) return 'the request target must be a path such as /metrics';
  const q = raw.indexOf('?');
  try {
    return { path: q < 0 ? raw : raw.slice(0, q), query: new URLSearchParams(q < 0 ? '' : raw.slice(q + 1)) };
  } catch {
    return 'the query string cannot be parsed';
  }
}

/** A token a request presents, or why what it presents cannot be read (answered 400). */
export type Presented = { token: string | undefined } | { malformed: string };

/** The token a request presents: bearer header, `?token=`, or the dashboard's cookie. Never throws. */
export function presentedToken(req: IncomingMessage): Presented {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^Bearer /i.test(auth)) return { token: auth.slice(7).trim() };
  const target = requestTarget(req.url);
  if (typeof target === 'string') return { malformed: target };
  const query = target.query.get('token');
  if (query !== null) return { token: query };
  // Only our own cookie is read: a browser also sends other applications' cookies for this host.
  const cookie = (req.headers.cookie ?? '').split(';').map((c) => c.trim()).find((c) => c.startsWith(`${TOKEN_COOKIE}=`));
  if (cookie === undefined) return { token: undefined };
  try {
    return { token: decodeURIComponent(cookie.slice(TOKEN_COOKIE.length + 1)) };
  } catch {
    return { malformed: `the ${TOKEN_COOKIE} cookie is not percent-encoded UTF-8` };
  }
}

/**
 * Why a request is refused (status and a short text that never echoes a token), or undefined to serve
 * it: 421 for a foreign Host header, 400 for a target or a cookie that cannot be read, 401 without the
 * right token. Never throws.
 */
export function refusal(req: IncomingMessage, access: HttpAccess): { status: number; text: string } | undefined {
  if (access.hosts !== undefined && !access.hosts.has(hostName(req.headers.host))) {
    return { status: 421, text: 'unexpected Host header: use http://127.0.0.1:<port>/ or http://localhost:<port>/\n' };
  }
  const target = requestTarget(req.url);
  if (typeof target === 'string') return { status: 400, text: `bad request: ${target}\n` };
  if (access.token !== undefined) {
    const given = presentedToken(req);
    if ('malformed' in given) return { status: 400, text: `bad request: ${given.malformed}\n` };
    if (given.token === undefined || !same(given.token, access.token)) return { status: 401, text: 'a token is required: Authorization: Bearer <token> (or ?token=<token> in a browser)\n' };
  }
  return undefined;
}

type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/**
 * A server's request handler that no request can throw past: what the handler throws (or its
 * promise rejects with) is logged and answered 500, or the connection is closed when the answer has
 * begun. A client that goes away in the middle of an answer is its own business, not an 'error' event
 * that would end the process.
 */
export function guarded(handler: Handler, log?: Pick<Logger, 'error'>): Handler {
  const failed = (req: IncomingMessage, res: ServerResponse, e: unknown) => {
    (log ?? createLogger('http')).error(
      { method: req.method, target: (req.url ?? '').slice(0, 200), err: e instanceof Error ? e.message : String(e) },
      'an HTTP request handler failed (a bug; please report it): answered 500',
    );
    try {
      if (res.headersSent) res.destroy();
      else res.writeHead(500, { 'content-type': 'text/plain' }).end('internal error\n');
    } catch {
      res.destroy();
    }
  };
  return (req, res) => {
    res.on('error', () => undefined);
    try {
      const done = handler(req, res);
      if (done !== undefined) done.catch((e: unknown) => failed(req, res, e));
    } catch (e) {
      failed(req, res, e);
    }
  };
}

/**
 * Server options that bound what a slow client can hold: the request line and headers within 10 s,
 * the whole request within 15 s, checked every 2 s (Node's defaults: 60 s, 300 s, every 30 s).
 */
export const SERVER_LIMITS = { headersTimeout: 10_000, requestTimeout: 15_000, connectionsCheckingInterval: 2_000 } as const;

/** What a server says at start about its access rule. */
export function accessNotice(access: HttpAccess): string {
  return access.token === undefined
    ? 'loopback only; requests must name localhost or 127.0.0.1 in their Host header'
    : 'every request needs the token (Authorization: Bearer <token>, from EXACTLYONCE_HTTP_TOKEN_FILE or EXACTLYONCE_HTTP_TOKEN)';
}

/** Headers that present our token to a server of ours (the dashboard scraping workers), if one is set. */
export function authHeaders(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const token = httpToken(env);
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}
