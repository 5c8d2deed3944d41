// Issue 37 item 3 against the stack: rows expire at their record's Kafka timestamp + TTL whenever they
// are written. A record already past it is not written (exactlyonce_sink_expired_total) and verify
// --job counts it as expired, not missing; after a SIGKILL and a replay from the log start, the rows
// are written again with the TTL left, not a fresh one. Per-record TTLs (ttlField) that are negative or
// not numbers are quarantined (bad_ttl), and an upsert key whose last record expired has no row.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, sinkConfigFile, startCli, startSinkJob, testConfig, waitFor, waitSinkDrained } from '../helpers.js';
import { freePort } from '../pipeline.js';

async function metric(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

type Skipped = { partitions: Array<{ skipped?: Record<string, number> }>; totals: { records: number; stored: number; quarantined: number; missing: number; mismatched: number; extra: number } };
const skipped = (r: Skipped, why: string) => r.partitions.reduce((n, p) => n + (p.skipped?.[why] ?? 0), 0);

test('log sink with ttl: 1h: rows expire at record time + 1 h; expired records are counted, not written, and verify --job says expired; a replay after SIGKILL writes the TTL left', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  const file = sinkConfigFile(t, 'sink.yaml', ['name: readings', `topic: ${config.topic}`, 'table: readings', 'mode: log', 'ttl: 1h', 'columns:', '  n: int']);
  const producer = new Producer(config);
  t.after(() => producer.close());
  const now = Date.now();
  const LIVE = 20;
  const EXPIRED = 6;
  // Live: 30 min old (about 30 min left, far more than the test takes); expired: 2 h old.
  const ts = (n: number) => (n < LIVE ? now - 30 * 60_000 + n * 1000 : now - 2 * 3600_000);
  await producer.send(config.topic, Array.from({ length: LIVE + EXPIRED }, (_, n) => ({ key: null, value: JSON.stringify({ n }), partition: n % 2, timestampMs: ts(n) })));
  const port = await freePort();
  const { args, worker } = await startSinkJob(t, config, file, ['--metrics-port', String(port)]);
  await waitSinkDrained(session, config, admin);
  assert.equal(await waitFor(async () => ((await metric(port, 'exactlyonce_sink_expired_total')) === EXPIRED ? true : undefined), { timeoutMs: 30_000, message: 'expired counted' }), true);

  /** Every row's n, TTL and write time, and the TTL each may have at most now (record time + 1 h − now, rounded up). */
  const read = async () => {
    const r = await session.execute(`SELECT n, TTL(n) AS ttl, WRITETIME(n) AS wt FROM ${config.keyspace}.readings`);
    const at = Date.now();
    return r.rows.map((row) => ({ n: row['n'] as number, ttl: row['ttl'] as number, wt: BigInt(String(row['wt'])), most: Math.ceil((ts(row['n'] as number) + 3600_000 - at) / 1000) + 1 }));
  };
  const first = await read();
  assert.deepEqual(first.map((r) => r.n).sort((a, b) => a - b), Array.from({ length: LIVE }, (_, n) => n), 'only the live records have rows');
  for (const r of first) assert.ok(r.ttl > 0 && r.ttl <= r.most, `row ${r.n}: TTL ${r.ttl} s, at most ${r.most} s left`);

  const verify = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  const report = JSON.parse(verify.stdout) as Skipped;
  assert.deepEqual({ ...report.totals, expired: skipped(report, 'expired') }, { ...report.totals, records: LIVE + EXPIRED, stored: LIVE, quarantined: 0, missing: 0, mismatched: 0, extra: 0, expired: EXPIRED });
  const text = await runCli(['verify', ...args, '--no-record']);
  assert.match(text.stdout, /partition 0: no row, rightly, for 3 expired \(their TTL passed\)/);

  // SIGKILL, then a replay of the whole log: every row is written again, with the TTL left then.
  worker.kill('SIGKILL');
  await new Promise((r) => worker.once('exit', r));
  await new Promise((r) => setTimeout(r, 3000));
  const reset = await runCli(['checkpoints', 'reset', ...args, '--all', '--to', 'earliest']);
  assert.equal(reset.code, 0, reset.stderr);
  startCli(t, ['run', ...args, '--session-timeout-ms', '6000']);
  const before = new Map(first.map((r) => [r.n, r.wt]));
  const again = await waitFor(
    async () => {
      const rows = await read();
      return rows.length === LIVE && rows.every((r) => r.wt > before.get(r.n)!) ? rows : undefined;
    },
    { timeoutMs: 120_000, message: 'every row written again by the replay' },
  );
  for (const r of again) {
    assert.ok(r.ttl > 0 && r.ttl <= r.most, `replayed row ${r.n}: TTL ${r.ttl} s, at most ${r.most} s left (a fresh TTL would be 3600)`);
    assert.ok(r.ttl < first.find((f) => f.n === r.n)!.ttl, `replayed row ${r.n}: its TTL shrank (${r.ttl} s)`);
  }
  await waitSinkDrained(session, config, admin);
  const after = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.equal(after.code, 0, after.stdout + after.stderr);
  assert.equal(skipped(JSON.parse(after.stdout) as Skipped, 'expired'), EXPIRED);
});

test('upsert sink with ttlField from a header: bad TTLs are quarantined (bad_ttl) and later records flow; a key whose last record expired has no row; verify --job exact', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  const file = sinkConfigFile(t, 'sink.yaml', ['name: sessions', `topic: ${config.topic}`, 'table: sessions', 'mode: upsert', 'key: [id]', 'ttlField: header.ttl', 'columns:', '  id: bigint', '  v: text']);
  const producer = new Producer(config);
  t.after(() => producer.close());
  const now = Date.now();
  const r = (id: number, v: string, ttl: string, ageMs = 0) => ({ key: String(id), value: JSON.stringify({ id, v }), timestampMs: now - ageMs, headers: { ttl } });
  await producer.send(config.topic, [
    r(1, 'a', '3600'), // live
    r(2, 'b', '3600'),
    r(2, 'b2', '60', 3600_000), // its last record is long expired: deletes the key
    r(3, 'c', '3600'),
    r(3, 'c2', 'soon'), // bad_ttl: the row stays c
    r(4, 'd', '-5'), // bad_ttl: no row
    r(5, 'e', '3600'), // after the bad ones: flows
  ]);
  const { args } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin);
  const rows = await session.execute(`SELECT id, v, TTL(v) AS ttl FROM ${config.keyspace}.sessions`);
  assert.deepEqual(rows.rows.map((x) => [String(x['id']), x['v']]).sort(), [['1', 'a'], ['3', 'c'], ['5', 'e']]);
  // Each expires at its record's time + 3600 s: what is left is 3600 less the seconds since (a slow start-up is not a failure).
  const since = Math.ceil((Date.now() - now) / 1000);
  for (const x of rows.rows) assert.ok((x['ttl'] as number) >= 3600 - since - 1 && (x['ttl'] as number) <= 3601, `TTL ${String(x['ttl'])}, ${since} s after the records' time`);
  const q = await session.execute(`SELECT reason, detail FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(q.rows.map((x) => [x['reason'], x['detail']]).sort(), [
    ['bad_ttl', 'ttlField header.ttl is negative: -5'],
    ['bad_ttl', 'ttlField header.ttl is not a number of seconds: "soon"'],
  ]);
  const verify = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  const report = JSON.parse(verify.stdout) as Skipped;
  assert.deepEqual({ quarantined: report.totals.quarantined, missing: report.totals.missing, mismatched: report.totals.mismatched, extra: report.totals.extra, expired: skipped(report, 'expired') }, { quarantined: 2, missing: 0, mismatched: 0, extra: 0, expired: 1 });
});
