import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { httpAccess, httpToken, isLoopback, refusal } from '../../src/engine/http-access.js';
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
