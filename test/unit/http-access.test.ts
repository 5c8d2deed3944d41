import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { httpAccess, httpToken, isLoopback, presentedToken, refusal, requestTarget } from '../../src/engine/http-access.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import { serveMetrics } from '../../src/engine/metrics-server.js';
import { ExactlyOnceError } from '../../src/errors.js';

const TOKEN = 'a-token-of-32-characters-or-so!!';
const req = (headers: Record<string, string>, url = '/metrics') => ({ headers, url }) as unknown as IncomingMessage;

test('loopback names', () => {
  for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]', 'LOCALHOST']) assert.ok(isLoopback(h), h);
  for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '127.0.0.1.evil.com']) assert.ok(!isLoopback(h), h);
});

test('on loopback the Host header must name this machine (DNS rebinding); no token needed', () => {
  const a = httpAccess('127.0.0.1', 'x', {});
  assert.equal(a.token, undefined);
  assert.equal(refusal(req({ host: '127.0.0.1:8090' }), a), undefined);
  assert.equal(refusal(req({ host: 'localhost:8090' }), a), undefined);
  assert.equal(refusal(req({ host: '[::1]:8090' }), a), undefined);
  assert.equal(refusal(req({ host: 'evil.example:8090' }), a)?.status, 421);
  assert.equal(refusal(req({}), a)?.status, 421);
});

test('beyond loopback a token is required to start, and on every request', () => {
  assert.throws(
    () => httpAccess('0.0.0.0', 'the dashboard (--host 0.0.0.0)', {}),
    (e: unknown) =>
      e instanceof ExactlyOnceError && e.code === 'EO_CONFIG_INVALID' &&
      e.message === 'the dashboard (--host 0.0.0.0) serves beyond this machine and needs a token: put one (16+ characters) in a file and set EXACTLYONCE_HTTP_TOKEN_FILE (or EXACTLYONCE_HTTP_TOKEN)',
  );
  const a = httpAccess('0.0.0.0', 'x', { EXACTLYONCE_HTTP_TOKEN: TOKEN });
  assert.equal(refusal(req({ host: 'box:9100' }), a)?.status, 401);
  assert.equal(refusal(req({ host: 'box:9100', authorization: 'Bearer wrong' }), a)?.status, 401);
  assert.equal(refusal(req({ host: 'box:9100', authorization: `Bearer ${TOKEN}` }), a), undefined);
  assert.equal(refusal(req({ host: 'box:9100' }, `/?token=${encodeURIComponent(TOKEN)}`), a), undefined);
  assert.equal(refusal(req({ host: 'box:9100', cookie: `a=b; exactlyonce_token=${encodeURIComponent(TOKEN)}` }), a), undefined);
  // The refusal never echoes what was presented.
  assert.ok(!refusal(req({ host: 'box', authorization: 'Bearer guessed-token-value' }), a)!.text.includes('guessed'));
});

test('the token comes from a file (first line) or the environment; a short one is refused', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'eo-http-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'token');
  writeFileSync(file, `${TOKEN}\n`, { mode: 0o600 });
  assert.equal(httpToken({ EXACTLYONCE_HTTP_TOKEN_FILE: file, EXACTLYONCE_HTTP_TOKEN: 'ignored-because-file-wins' }), TOKEN);
  assert.equal(httpToken({}), undefined);
  assert.throws(() => httpToken({ EXACTLYONCE_HTTP_TOKEN: 'short' }), /shorter than 16 characters/);
});

test('a metrics server bound beyond loopback answers 401 without the token and 200 with it', async (t) => {
  const saved = process.env['EXACTLYONCE_HTTP_TOKEN'];
  process.env['EXACTLYONCE_HTTP_TOKEN'] = TOKEN;
  t.after(() => (saved === undefined ? delete process.env['EXACTLYONCE_HTTP_TOKEN'] : (process.env['EXACTLYONCE_HTTP_TOKEN'] = saved)));
  const server = await serveMetrics(new EngineMetrics(), 0, () => true, '0.0.0.0');
  t.after(() => server.close());
  const port = (server.address() as { port: number }).port;
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 401);
  const ok = await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(ok.status, 200);
  assert.equal(await ok.text(), 'ok\n');
});

test('a loopback metrics server refuses a foreign Host header', async (t) => {
  const server = await serveMetrics(new EngineMetrics(), 0, () => true, '127.0.0.1');
  t.after(() => server.close());
  const port = (server.address() as { port: number }).port;
  assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
  const http = await import('node:http');
  const status = await new Promise<number>((resolve, reject) =>
    http.get({ host: '127.0.0.1', port, path: '/healthz', headers: { host: 'rebound.example' } }, (res) => resolve(res.statusCode ?? 0)).on('error', reject),
  );
  assert.equal(status, 421);
});

test('what a stranger sends never throws: unreadable targets and cookies are 400, a missing or wrong token 401', () => {
  const withToken = { token: TOKEN, hosts: undefined };
  const loopback = httpAccess('127.0.0.1', 'x', {});
  const badTarget = 'bad request: the request target must be a path such as /metrics\n';
  const badCookie = 'bad request: the exactlyonce_token cookie is not percent-encoded UTF-8\n';
  const unauthorized = { status: 401, text: 'a token is required: Authorization: Bearer <token> (or ?token=<token> in a browser)\n' };
  const long = `/${'a'.repeat(100_000)}`;
  const cases: Array<{ url: string | undefined; headers: Record<string, string>; presented: unknown; withToken: unknown; loopback: unknown }> = [
    // `new URL('//', base)` throws "Invalid URL": a path of two slashes is a path like any other here.
    { url: '//', headers: {}, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
    { url: '//[', headers: {}, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
    { url: '/%', headers: {}, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
    { url: '/%zz?token=%zz', headers: {}, presented: { token: '%zz' }, withToken: unauthorized, loopback: undefined },
    { url: '/\u00ff\u00fe?token=\u00ff', headers: {}, presented: { token: '\u00ff' }, withToken: unauthorized, loopback: undefined },
    { url: long, headers: {}, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
    { url: '/?token=', headers: {}, presented: { token: '' }, withToken: unauthorized, loopback: undefined },
    { url: 'http://[', headers: {}, presented: { malformed: 'the request target must be a path such as /metrics' }, withToken: { status: 400, text: badTarget }, loopback: { status: 400, text: badTarget } },
    { url: '*', headers: {}, presented: { malformed: 'the request target must be a path such as /metrics' }, withToken: { status: 400, text: badTarget }, loopback: { status: 400, text: badTarget } },
    { url: '', headers: {}, presented: { malformed: 'the request target must be a path such as /metrics' }, withToken: { status: 400, text: badTarget }, loopback: { status: 400, text: badTarget } },
    // decodeURIComponent throws "URI malformed" on these.
    { url: '/', headers: { cookie: 'exactlyonce_token=%' }, presented: { malformed: 'the exactlyonce_token cookie is not percent-encoded UTF-8' }, withToken: { status: 400, text: badCookie }, loopback: undefined },
    { url: '/', headers: { cookie: 'a=1; exactlyonce_token=%E0%A4%A' }, presented: { malformed: 'the exactlyonce_token cookie is not percent-encoded UTF-8' }, withToken: { status: 400, text: badCookie }, loopback: undefined },
    { url: '/', headers: { cookie: 'exactlyonce_token=%ff' }, presented: { malformed: 'the exactlyonce_token cookie is not percent-encoded UTF-8' }, withToken: { status: 400, text: badCookie }, loopback: undefined },
    // Another application's cookie for this host is not ours to read.
    { url: '/', headers: { cookie: 'other=%; exactlyonce_token=' + encodeURIComponent(TOKEN) }, presented: { token: TOKEN }, withToken: undefined, loopback: undefined },
    { url: '//', headers: { authorization: `Bearer ${TOKEN}` }, presented: { token: TOKEN }, withToken: undefined, loopback: undefined },
    { url: '/', headers: { authorization: 'Bearer' }, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
    { url: '/', headers: { authorization: 'Basic %' }, presented: { token: undefined }, withToken: unauthorized, loopback: undefined },
  ];
  for (const c of cases) {
    const r = req({ host: '127.0.0.1:9100', ...c.headers }, c.url as string);
    const label = `${JSON.stringify(c.url?.slice(0, 20))} ${JSON.stringify(c.headers)}`;
    assert.deepEqual(presentedToken(r), c.presented, label);
    assert.deepEqual(refusal(r, withToken), c.withToken, label);
    assert.deepEqual(refusal(r, loopback), c.loopback, label);
  }
  // A foreign Host header is judged first, whatever the target.
  assert.equal(refusal(req({ host: 'evil.example', cookie: 'exactlyonce_token=%' }, 'http://['), loopback)?.status, 421);
});

test('requestTarget: the path as sent, the query decoded leniently, anything but a path refused', () => {
  const t = requestTarget('//a/%zz?x=%zz&token=a%20b');
  assert.ok(typeof t !== 'string');
  assert.equal(t.path, '//a/%zz');
  assert.deepEqual([...t.query], [['x', '%zz'], ['token', 'a b']]);
  assert.equal((requestTarget(undefined) as { path: string }).path, '/');
  assert.equal(requestTarget('http://x/metrics'), 'the request target must be a path such as /metrics');
});

test('a handler that throws is answered 500 and logged once, and the server goes on serving', async (t) => {
  const logged: Array<{ fields: Record<string, unknown>; msg: string }> = [];
  const log = { error: (fields: Record<string, unknown>, msg: string) => logged.push({ fields, msg }) };
  const metrics = new EngineMetrics();
  const source = { registry: metrics.registry, workerId: 'w', health: { readiness: (): never => { throw new Error('readiness broke'); } } };
  const server = await serveMetrics(source, 0, () => true, '127.0.0.1', httpAccess('127.0.0.1', 'x', {}), log as never);
  t.after(() => server.close());
  const port = (server.address() as { port: number }).port;
  const res = await fetch(`http://127.0.0.1:${port}/readyz`);
  assert.equal(res.status, 500);
  assert.equal(await res.text(), 'internal error\n');
  assert.deepEqual(logged, [{ fields: { method: 'GET', target: '/readyz', err: 'readiness broke' }, msg: 'an HTTP request handler failed (a bug; please report it): answered 500' }]);
  const ok = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(ok.status, 200);
});
