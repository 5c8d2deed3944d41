// A stranger's requests never kill our HTTP servers (issue 42 item 6): a worker's metrics server and
// the dashboard's, each without and with a token, run in a child process (test/fixtures/
// http-servers.ts) so that an uncaught exception ends that process instead of being caught by
// node:test. Arbitrary raw requests go over TCP in batches; after each batch every server must still
// answer /healthz 200, and no request may have been answered 500 (a handler that threw).
// Seeded: the seed is printed; FUZZ_SEED=<seed> runs the same requests again.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import fc from 'fast-check';

const TOKEN = 'fuzz-token-of-more-than-16-chars';
const fixture = fileURLToPath(new URL('../fixtures/http-servers.ts', import.meta.url));
type Name = 'metrics' | 'metricsToken' | 'dashboard' | 'dashboardToken';
const NAMES: readonly Name[] = ['metrics', 'metricsToken', 'dashboard', 'dashboardToken'];

/** Batches (FUZZ_RUNS), and requests per batch: 100 × 30 = 3,000 requests, bounded in time too (TIME_LIMIT_MS). */
const RUNS = Number(process.env['FUZZ_RUNS'] || 100);
const BATCH = 30;
const TIME_LIMIT_MS = 60_000;
/** How long a request waits for the first byte of an answer (none comes to a request left unfinished), in ms. */
const ANSWER_WAIT_MS = 250;

interface RawRequest {
  server: Name;
  bytes: Buffer;
  /** Send only this many bytes, then stall until the end of the batch (a slow client). */
  stallAt: number | undefined;
}

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const latin1 = (s: string) => Buffer.from(s, 'latin1');

/** Text Node's parser lets through to the handlers in a target: printable ASCII but spaces and a few more. */
const visible = (maxLength: number) => fc.string({ maxLength }).map((s) => s.replace(/[ "#<>\\^`{|}]/g, ''));
const piece = fc.oneof(
  fc.constantFrom('/', '//', '///', '%', '%zz', '%E0%A4%A', '%ff', '%00', '?', '??', '[', ']', '..', '.', ';', '&', '=', 'token=', 'token=%', `token=${TOKEN}`, '\u00e9', '\u{1F600}'),
  fc.constantFrom('healthz', 'metrics', 'readyz', 'api/snapshot', 'api/events', 'index.html', 'app.js', 'vendor/uplot.js', 'favicon.ico'),
  visible(12),
  // Unicode, percent-encoded (as a browser sends it).
  fc.string({ maxLength: 6, unit: 'binary' }).map((u) => { try { return encodeURIComponent(u); } catch { return '%ED%A0%80'; } }),
).map(utf8);
const target = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom('/', '//', '/%', '/%zz', '/?token=%', '/?token=%zz', 'http://[', '//[', '*', '/healthz', '/readyz', '/metrics', '/api/snapshot', '/api/events', `/?token=${TOKEN}`, `//evil.example?token=${TOKEN}`, 'http://x/metrics').map(utf8) },
  { weight: 6, arbitrary: fc.array(piece, { maxLength: 8 }).map((ps) => Buffer.concat([utf8('/'), ...ps])) },
  // Raw unicode and bytes that are not UTF-8 (Node's parser refuses most), and long targets (some past
  // Node's 16 KiB header limit).
  { weight: 1, arbitrary: fc.string({ minLength: 1, maxLength: 6, unit: 'binary' }).map((u) => utf8(`/${u}`)) },
  { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 40 }).map((b) => Buffer.concat([utf8('/'), Buffer.from(b)])) },
  { weight: 1, arbitrary: fc.integer({ min: 1_000, max: 40_000 }).map((n) => utf8(`/${'a'.repeat(n)}`)) },
);
const method = fc.oneof(
  { weight: 9, arbitrary: fc.constantFrom('GET', 'GET', 'GET', 'GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'PROPFIND') },
  { weight: 1, arbitrary: fc.constantFrom('CONNECT', 'BREW', 'get', '') },
  { weight: 1, arbitrary: fc.string({ maxLength: 8, unit: 'binary-ascii' }) },
);
const headerName = fc.oneof(
  fc.constantFrom('Host', 'Cookie', 'Authorization', 'Content-Length', 'Transfer-Encoding', 'Connection', 'Expect', 'Upgrade', 'Accept', 'X-Forwarded-For'),
  fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/),
);
const headerValue = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('exactlyonce_token=%', 'exactlyonce_token=%zz', `exactlyonce_token=${TOKEN}`, 'a=%; exactlyonce_token=%E0%A4%A', `Bearer ${TOKEN}`, 'Bearer %', 'Bearer', 'Basic %', '127.0.0.1', 'localhost', '[', '//', '[::1]', '-1', '99999999999999999999', 'chunked', 'close', '100-continue', 'websocket') },
  { weight: 6, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 20, unit: 'binary' }).map((s) => s.replace(/[\r\n\u0000]/g, '')) },
).map(utf8);
const header = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(headerName, headerValue).map(([n, v]) => Buffer.concat([utf8(n), utf8(': '), v])) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 40 }).map((b) => Buffer.from(b)) },
  // Past Node's header limit (16 KiB by default): answered 431 by Node itself.
  { weight: 1, arbitrary: fc.integer({ min: 10_000, max: 70_000 }).map((n) => latin1(`X-Huge: ${'h'.repeat(n)}`)) },
);
const request: fc.Arbitrary<RawRequest> = fc
  .record({
    server: fc.constantFrom(...NAMES),
    method,
    target,
    version: fc.oneof({ weight: 12, arbitrary: fc.constantFrom('HTTP/1.1', 'HTTP/1.0') }, { weight: 1, arbitrary: fc.constantFrom('HTTP/2.0', 'HTTP/9', '') }),
    // Mostly a Host header that passes the loopback rule and the token, so that most requests reach the handlers.
    host: fc.constantFrom('Host: 127.0.0.1', 'Host: 127.0.0.1', 'Host: 127.0.0.1', 'Host: localhost:1', 'Host: [::1]', 'Host: evil.example', 'Host: [', undefined),
    auth: fc.constantFrom(`Authorization: Bearer ${TOKEN}`, `Cookie: exactlyonce_token=${TOKEN}`, undefined),
    headers: fc.array(header, { maxLength: 3 }),
    // Bare LF line ends, and raw unicode in header values, Node refuses (400): rarely, so that most requests reach the handlers.
    eol: fc.oneof({ weight: 12, arbitrary: fc.constant('\r\n') }, { weight: 1, arbitrary: fc.constant('\n') }),
    // A body with its length, or (rarely) bytes after the head that Node reads as a next request.
    body: fc.oneof(
      { weight: 4, arbitrary: fc.constant(undefined) },
      { weight: 2, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => ({ sized: true, bytes: Buffer.from(b) })) },
      { weight: 1, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => ({ sized: false, bytes: Buffer.from(b) })) },
    ),
    stall: fc.oneof({ weight: 9, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.double({ min: 0.05, max: 0.95, noNaN: true }) }),
  })
  .map((r) => {
    const eol = utf8(r.eol);
    const lines = [Buffer.concat([utf8(r.method), utf8(' '), r.target, utf8(' '), utf8(r.version)])];
    if (r.host !== undefined) lines.push(utf8(r.host));
    if (r.auth !== undefined) lines.push(utf8(r.auth));
    lines.push(...r.headers);
    if (r.body?.sized === true) lines.push(utf8(`Content-Length: ${r.body.bytes.length}`));
    const head = Buffer.concat(lines.flatMap((l) => [l, eol]));
    const bytes = Buffer.concat([head, eol, r.body?.bytes ?? Buffer.alloc(0)]);
    return { server: r.server, bytes, stallAt: r.stall === null ? undefined : Math.floor(bytes.length * r.stall) };
  });

/** Sends one raw request; resolves with the answer's status (0: none within the wait, or the connection closed). */
function send(port: number, r: RawRequest, held: Array<() => void>): Promise<number> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let answer = '';
    let done = false;
    const finish = (status: number) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (r.stallAt === undefined) socket.destroy();
      resolve(status);
    };
    const timer = setTimeout(() => finish(0), ANSWER_WAIT_MS);
    socket.on('error', () => finish(0));
    socket.on('close', () => finish(0));
    socket.on('data', (d: Buffer) => {
      answer += d.toString('latin1');
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(answer);
      if (m !== null) finish(Number(m[1]));
      else if (answer.length >= 12) finish(-1);
    });
    socket.on('connect', () => {
      if (r.stallAt === undefined) {
        socket.write(r.bytes);
      } else {
        // Half a request, then nothing until the batch ends.
        socket.write(r.bytes.subarray(0, r.stallAt));
        held.push(() => socket.destroy());
      }
    });
  });
}

async function healthz(port: number, token: boolean): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}/healthz`, { headers: token ? { authorization: `Bearer ${TOKEN}` } : {}, signal: AbortSignal.timeout(5_000) });
  return { status: res.status, text: await res.text() };
}

test('raw requests from a stranger (paths, methods, headers, cookies, huge headers, slow clients) never stop the metrics or the dashboard server', { timeout: 180_000 }, async (t) => {
  const seed = process.env['FUZZ_SEED'] !== undefined ? Number(process.env['FUZZ_SEED']) : (Date.now() ^ (Math.random() * 0x7fffffff)) | 0;
  t.diagnostic(`FUZZ_SEED=${seed}`);
  process.stdout.write(`# http fuzz: FUZZ_SEED=${seed} reproduces this run\n`);

  const child = spawn(process.execPath, ['--import', 'tsx', fixture, TOKEN], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EXACTLYONCE_LOG_FORMAT: 'json' } });
  t.after(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const ports = await new Promise<Record<Name, number>>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as Record<Name, number>);
    });
    child.once('exit', (code) => reject(new Error(`the servers' process exited (${code}) before serving: ${stderr}`)));
  });

  const started = Date.now();
  const statuses = new Map<number, number>();
  let sent = 0;
  let last: RawRequest[] = [];
  let failure = '';
  const shown = (r: RawRequest) => `${r.server} ${JSON.stringify(r.bytes.subarray(0, 300).toString('latin1'))}${r.stallAt !== undefined ? ` (stalled after ${r.stallAt} bytes)` : ''}`;

  async function runBatch(batch: RawRequest[]): Promise<void> {
    const held: Array<() => void> = [];
    try {
      // All at once: a stalled client holds its connection while the others are served.
      const answers = await Promise.all(batch.map((r) => send(ports[r.server], r, held)));
      answers.forEach((status, i) => {
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        assert.notEqual(status, 500, `answered 500 (a handler threw): ${shown(batch[i]!)}\n${stderr}`);
      });
      sent += answers.length;
      for (const name of NAMES) {
        const h = await healthz(ports[name], name.endsWith('Token')).catch((e: unknown) => ({ status: 0, text: String(e) }));
        assert.deepEqual(h, { status: 200, text: 'ok\n' }, `${name} /healthz while ${held.length} slow clients hold a connection; the servers' process ${child.exitCode === null ? 'runs' : `exited (${child.exitCode})`}:\n${stderr}`);
      }
    } finally {
      for (const release of held) release();
    }
  }

  await fc.assert(
    fc.asyncProperty(fc.array(request, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
      last = batch;
      await runBatch(batch).catch((e: unknown) => {
        failure = (e as Error).message;
        throw e;
      });
    }),
    { seed, numRuns: RUNS, endOnFailure: true, interruptAfterTimeLimit: TIME_LIMIT_MS },
  ).catch(() => {
    // fast-check's own message prints the batch as byte arrays (megabytes with huge headers): ours is short.
    throw new Error(`FUZZ_SEED=${seed}: ${failure}\nthe last batch:\n${last.map(shown).join('\n')}`);
  });
  t.diagnostic(`${sent} requests; answers by status (0: none, or the connection closed): ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  // Every batch ran, unless the time limit cut the run short (a slow machine: fewer requests, same checks).
  if (Date.now() - started < TIME_LIMIT_MS) assert.equal(sent, RUNS * BATCH);
  assert.equal(stderr, '', 'the servers logged nothing (no handler failed)');
});
