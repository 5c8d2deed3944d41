// Issue 39 item 3 against the stack: an aggregate sink with closeAfter publishes each window to a
// compacted topic once a Kafka partition's watermark passes its end + closeAfter. The windows closed,
// the topic's latest message per window (equal to the row once every contributing partition closed
// it), a late record (applied, published again, counted), a worker SIGKILLed between the phases (the
// new one reads the watermarks back from Cassandra), and verify --job: it passes, then fails on a
// forged message of a closed window (mismatched) and on one of a window no partition closed (extra).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readTopic } from '../../src/kafka/log-reader.js';
import { applySinkSchema, connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, startCli, topicsAdmin, waitFor, waitSinkDrained } from '../helpers.js';
import { freePort } from '../pipeline.js';

const BASE = Date.UTC(2026, 0, 5, 9, 0, 0); // a window start (1 min windows)
const S = 1000;

async function metric(port: number, name: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const m = new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

test('closeAfter: windows published once a partition\'s watermark passes them, the latest message equal to the row, a late record applied and published again; verify --job proves the topic', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const closed = `${config.topic}.closed`;
  const file = sinkConfigFile(t, 'totals.yaml', [
    'name: totals',
    `topic: ${config.topic}`,
    'table: totals',
    'mode: aggregate',
    'groupBy: [customer]',
    'window: { time: at, size: 1m }',
    'closeAfter: 30s',
    `closedTopic: ${closed}`,
    'columns:',
    '  customer: text',
    '  at: timestamp',
    '  amount: bigint',
    'aggregates:',
    '  orders: count',
    '  total: sum(amount)',
    '  largest: max(amount)',
  ]);
  const producer = await connectedProducer(t, config);
  const send = (records: Array<[partition: number, customer: string, atMs: number, amount: number]>) =>
    producer.send(config.topic, records.map(([partition, customer, at, amount]) => ({ key: null, partition, value: JSON.stringify({ customer, at: new Date(at).toISOString(), amount }) })));

  // Without its closed topic the worker refuses, naming the command that creates it compacted.
  const args = await applySinkSchema(config, file);
  const refused = await runCli(['run', ...args]);
  assert.notEqual(refused.code, 0);
  const name = closed.replace(/\./g, '\\.');
  assert.match(refused.stderr, new RegExp(`output topic ${name} does not exist .*; run \`exactlyonce topic create --topic ${name} --no-alerts --compacted\``));
  topicsAdmin(t, config, [closed]);
  const created = await runCli(['topic', 'create', '--brokers', config.brokers.join(','), '--topic', closed, '--no-alerts', '--compacted', '--partitions', '2']);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /created, 2 partitions, replication factor 1, compacted/);

  // Phase 1: window 0 on both partitions; partition 0 reads on to 100 s (past 60 s + 30 s): it closes window 0, partition 1 (at 50 s) does not.
  await send([
    [0, 'a', BASE + 10 * S, 5], [1, 'a', BASE + 20 * S, 7], [0, 'b', BASE + 30 * S, 11], [1, 'c', BASE + 50 * S, 13],
    [0, 'a', BASE + 100 * S, 1],
  ]);
  const port = await freePort();
  const first = { args, worker: startCli(t, ['run', ...args, '--session-timeout-ms', '6000', '--metrics-port', String(port)]) };
  await waitSinkDrained(session, config, admin, { worker: first.worker });

  const latest = async () => {
    const out = new Map<string, Record<string, unknown>>();
    await readTopic(config, closed, (records) => {
      for (const r of records) out.set(r.key!.toString(), JSON.parse(r.value!.toString()) as Record<string, unknown>);
    });
    return out;
  };
  const key = (customer: string, start: number) => JSON.stringify([customer, start]);
  const msg = (customer: string, start: number, orders: number, total: number, largest: number) => ({
    customer,
    window_start: new Date(start).toISOString(),
    window_end: new Date(start + 60 * S).toISOString(),
    orders: String(orders),
    total: String(total),
    largest: String(largest),
  });
  // Window 0 of a (both partitions), b (partition 0) and c (partition 1): partition 0 closed it, so a and b are
  // published; c has no record on partition 0, and partition 1 has not closed it. Window 1 is open everywhere.
  assert.deepEqual(await latest(), new Map([[key('a', BASE), msg('a', BASE, 2, 12, 7)], [key('b', BASE), msg('b', BASE, 1, 11, 11)]]));
  assert.equal(await metric(port, 'exactlyonce_sink_late_total'), 0);

  // Phase 2, after a SIGKILL (the next worker reads the watermarks back): partition 1 reads on to 95 s and
  // closes window 0 for a and c; then a late record of a's window 0 on partition 0, which closed it already.
  first.worker.kill('SIGKILL');
  await new Promise((r) => first.worker.once('exit', r));
  await send([[1, 'c', BASE + 95 * S, 2]]);
  const port2 = await freePort();
  const second = startCli(t, ['run', ...first.args, '--session-timeout-ms', '6000', '--metrics-port', String(port2)]);
  await waitSinkDrained(session, config, admin, { worker: second });
  await send([[0, 'a', BASE + 40 * S, 100]]);
  await waitSinkDrained(session, config, admin, { worker: second });
  assert.equal(await waitFor(async () => ((await metric(port2, 'exactlyonce_sink_late_total')) === 1 ? true : undefined), { timeoutMs: 30_000, message: 'the late record counted' }), true);
  assert.deepEqual(await latest(), new Map([[key('a', BASE), msg('a', BASE, 3, 112, 100)], [key('b', BASE), msg('b', BASE, 1, 11, 11)], [key('c', BASE), msg('c', BASE, 1, 13, 13)]]));
  // The rows agree with the messages, and window 1 has rows but no message.
  const rows = await session.execute(`SELECT customer, window_start, orders, total, largest FROM ${config.keyspace}.totals`);
  assert.deepEqual(
    rows.rows.map((r) => `${r['customer']}@${(r['window_start'] as Date).getTime() - BASE}:${r['orders']}/${r['total']}/${r['largest']}`).sort(),
    ['a@0:3/112/100', 'a@60000:1/1/1', 'b@0:1/11/11', 'c@0:1/13/13', 'c@60000:1/2/2'],
  );
  // Nothing left open for window 0 on either partition; window 1 is open on both.
  const open = await session.execute(`SELECT partition, customer, window_start FROM ${config.keyspace}.totals_closing`);
  assert.deepEqual(open.rows.filter((r) => r['customer'] !== null).map((r) => `${r['partition']}:${r['customer']}@${(r['window_start'] as Date).getTime() - BASE}`).sort(), ['0:a@60000', '1:c@60000']);

  const ok = await runCli(['verify', ...first.args, '--no-record', '--json']);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);

  // A forged message: a's window 0 with another total (mismatched), and c's window 1, which no partition closed (extra).
  await producer.send(closed, [
    { key: key('a', BASE), value: JSON.stringify({ ...msg('a', BASE, 3, 999, 100) }) },
    { key: key('c', BASE + 60 * S), value: JSON.stringify(msg('c', BASE + 60 * S, 1, 2, 2)) },
  ]);
  const bad = await runCli(['verify', ...first.args, '--no-record', '--json']);
  assert.equal(bad.code, 9, bad.stdout + bad.stderr);
  const failed = JSON.parse(bad.stdout) as { totals: Record<string, number>; violations?: Array<{ message: string }> };
  assert.deepEqual({ missing: failed.totals['missing'], extra: failed.totals['extra'], mismatched: failed.totals['mismatched'] }, { missing: 0, extra: 1, mismatched: 1 });
});
