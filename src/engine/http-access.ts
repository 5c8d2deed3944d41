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
import type { IncomingMessage } from 'node:http';
import { ExactlyOnceError } from '../errors.js';

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

/** The token a request presents: bearer header, `?token=`, or the dashboard's cookie. */
export function presentedToken(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (auth !== undefined && /^Bearer /i.test(auth)) return auth.slice(7).trim();
  const query = new URL(req.url ?? '/', 'http://x').searchParams.get('token');
  if (query !== null) return query;
  const cookie = (req.headers.cookie ?? '').split(';').map((c) => c.trim()).find((c) => c.startsWith(`${TOKEN_COOKIE}=`));
  return cookie === undefined ? undefined : decodeURIComponent(cookie.slice(TOKEN_COOKIE.length + 1));
}

/** Why a request is refused (status and a short text that never echoes a token), or undefined to serve it. */
export function refusal(req: IncomingMessage, access: HttpAccess): { status: number; text: string } | undefined {
  if (access.hosts !== undefined && !access.hosts.has(hostName(req.headers.host))) {
    return { status: 421, text: 'unexpected Host header: use http://127.0.0.1:<port>/ or http://localhost:<port>/\n' };
  }
  if (access.token !== undefined) {
    const given = presentedToken(req);
    if (given === undefined || !same(given, access.token)) return { status: 401, text: 'a token is required: Authorization: Bearer <token> (or ?token=<token> in a browser)\n' };
  }
  return undefined;
}

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
