// Issue 39: a sink in mode aggregate against the stack. Counts, exact decimal and integer sums, min,
// max and avg per customer and hopping window, with late records, bad records and a filter, through a
// worker SIGKILLed mid-run, the topic gaining a partition, and two workers merging the same windows at
// once. The result table is compared row by row with what the records give (computed here, apart from
// the sink's code), and verify --job proves every partial and every row from the log — and fails on a
// changed partial.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, growTopic, runCli, sinkConfigFile, startCli, startSinkJob, verifyPasses, waitFor, waitSinkDrained } from '../helpers.js';

const N = 3000;
const BASE = Date.UTC(2026, 0, 5, 9, 0, 0);
const WINDOW = 60_000;
const SLIDE = 30_000;
const customer = (i: number) => (i % 101 === 0 ? undefined : `c${i % 5}`);
const placedAt = (i: number) => BASE + ((i * 7919) % 600_000); // out of order over ten minutes: late records
const cents = (i: number) => BigInt((i * 37) % 10_000) + 1n; // 0.01 … 100.00
const items = (i: number) => (i % 11 === 0 ? undefined : i % 7);
const malformed = (i: number) => i % 97 === 0; // total is no decimal: quarantined (bad_value)
const filtered = (i: number) => i % 13 === 0 && !malformed(i) && customer(i) !== undefined;
const centsText = (c: bigint) => `${c < 0n ? '-' : ''}${(c < 0n ? -c : c) / 100n}.${String((c < 0n ? -c : c) % 100n).padStart(2, '0')}`;

function record(i: number): string {
  return JSON.stringify({
    ...(customer(i) === undefined ? {} : { customer: customer(i) }),
    placedAt: new Date(placedAt(i)).toISOString(),
    total: malformed(i) ? 'n/a' : centsText(cents(i)),
    ...(items(i) === undefined ? {} : { items: items(i) }),
    status: filtered(i) ? 'test' : 'paid',
  });
}

/** The rows the records give, computed here: per customer and window start. */
function expectedRows(): Map<string, Record<string, string>> {
  const acc = new Map<string, { orders: bigint; revenue: bigint; items: bigint; itemsN: bigint; largest: bigint; smallest: bigint; first: number }>();
  for (let i = 0; i < N; i++) {
    if (malformed(i) || customer(i) === undefined || filtered(i)) continue;
    const t = placedAt(i);
    for (let start = Math.floor(t / SLIDE) * SLIDE - WINDOW + SLIDE; start <= t; start += SLIDE) {
      const k = `${customer(i)}|${start}`;
      const a = acc.get(k) ?? { orders: 0n, revenue: 0n, items: 0n, itemsN: 0n, largest: -1n, smallest: 1n << 62n, first: Infinity };
      a.orders++;
      a.revenue += cents(i);
      if (items(i) !== undefined) {
        a.items += BigInt(items(i)!);
        a.itemsN++;
      }
      if (cents(i) > a.largest) a.largest = cents(i);
      if (cents(i) < a.smallest) a.smallest = cents(i);
      a.first = Math.min(a.first, t);
      acc.set(k, a);
    }
  }
  return new Map(
    [...acc].map(([k, a]) => [
      k,
      {
        window_end: String(Number(k.split('|')[1]) + WINDOW),
        orders: String(a.orders),
        revenue: centsText(a.revenue),
        items: String(a.items),
        largest: centsText(a.largest),
        smallest: centsText(a.smallest),
        first_at: String(a.first),
        avg_items: a.itemsN === 0n ? 'null' : String(Number(a.items) / Number(a.itemsN)),
      },
    ]),
  );
}

test('an aggregate sink: exact counts, sums, min, max and avg per group and hopping window, through a SIGKILL, a partition added and two workers merging at once; verify --job proves it', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 3);
  const sink = {
    name: 'order_totals',
    topic: config.topic,
    table: 'order_totals',
    mode: 'aggregate',
    groupBy: ['customer'],
    window: { time: 'placed_at', size: '1m', slide: '30s' },
    where: { not: { field: 'value.status', equals: 'test' } },
    columns: { customer: 'text', placed_at: { type: 'timestamp', field: 'placedAt' }, total: { type: 'decimal', required: true }, items: 'int' },
    aggregates: { orders: 'count', revenue: 'sum(total)', items: 'sum(items)', largest: 'max(total)', smallest: 'min(total)', first_at: 'min(placed_at)', avg_items: 'avg(items)' },
  };
  const file = sinkConfigFile(t, 'totals.json', JSON.stringify(sink, null, 2));
  const send = async (from: number, to: number, partitions: number) =>
    (await connectedProducer(t, config)).send(
      config.topic,
      Array.from({ length: to - from }, (_, k) => ({ key: null, value: record(from + k), partition: (from + k) % partitions })),
    );
  await send(0, N / 2, 3);
  const { args, worker } = await startSinkJob(t, config, file);
  // SIGKILL while it works: a batch's partials may be written and its merge or checkpoint not.
  await waitFor(
    async () => {
      const r = await session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints`);
      return r.rows.some((row) => BigInt(String(row['next_offset'])) > 0n) ? true : undefined;
    },
    { timeoutMs: 120_000, message: 'the first worker moves a checkpoint' },
  );
  worker.kill('SIGKILL');
  await new Promise((r) => worker.once('exit', r));
  // The topic gains a partition: a group's records need not share one, so the sink goes on.
  await growTopic(config, config.topic, 4);
  await waitFor(async () => ((await admin.partitionCount(config.topic)) === 4 ? true : undefined), { timeoutMs: 60_000, message: 'the topic has 4 partitions' });
  await send(N / 2, N, 4);
  const run = ['run', ...args, '--session-timeout-ms', '6000'];
  const b = startCli(t, run);
  const c = startCli(t, run);
  await waitSinkDrained(session, config, admin, { timeoutMs: 300_000, worker: b });
  assert.equal(c.exitCode, null, 'the second worker still runs');

  const want = expectedRows();
  const r = await session.execute(`SELECT customer, window_start, window_end, orders, revenue, items, largest, smallest, first_at, avg_items FROM ${config.keyspace}.order_totals`);
  const got = new Map(
    r.rows.map((row) => [
      `${row['customer']}|${(row['window_start'] as Date).getTime()}`,
      {
        window_end: String((row['window_end'] as Date).getTime()),
        orders: String(row['orders']),
        revenue: String(row['revenue']),
        items: String(row['items']),
        largest: String(row['largest']),
        smallest: String(row['smallest']),
        first_at: String((row['first_at'] as Date).getTime()),
        avg_items: row['avg_items'] === null ? 'null' : String(row['avg_items']),
      },
    ]),
  );
  assert.equal(got.size, want.size, 'one row per customer and window the records fall in');
  for (const [k, row] of want) assert.deepEqual(got.get(k), row, `the row of ${k}`);

  const quarantined = Array.from({ length: N }, (_, i) => i).filter((i) => malformed(i) || customer(i) === undefined);
  const report = await verifyPasses(args);
  const filteredCount = Array.from({ length: N }, (_, i) => i).filter(filtered).length;
  assert.deepEqual(
    { ...report.totals, filtered: report.partitions.reduce((n, p) => n + (p.skipped?.['filtered'] ?? 0), 0) },
    { ...report.totals, records: N, stored: N - quarantined.length - filteredCount, quarantined: quarantined.length, missing: 0, extra: 0, mismatched: 0, filtered: filteredCount },
  );
  assert.equal(report.partitions.length, 4, 'the added partition is verified too');
  const reasons = await session.execute(`SELECT offset, reason FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(
    reasons.rows.map((row) => row['reason'] as string).sort(),
    quarantined.map((i) => (customer(i) === undefined ? 'missing_field' : 'bad_value')).sort(),
  );

  const text = await runCli(['verify', ...args, '--no-record']);
  assert.match(text.stdout, /^job order_totals \(aggregate: table order_totals and order_totals_partials, every partial and row from the log start\)/m);

  // A partial changed behind the sink's back (one record more, at a timestamp above the sink's): verify fails, naming it.
  const one = (await session.execute(`SELECT customer, window_start, partition, records FROM ${config.keyspace}.order_totals_partials LIMIT 1`)).first();
  await session.execute(
    `UPDATE ${config.keyspace}.order_totals_partials USING TIMESTAMP ${2n ** 50n} SET records = ? WHERE customer = ? AND window_start = ? AND partition = ?`,
    [BigInt(String(one['records'])) + 1n, one['customer'], one['window_start'], one['partition']],
    { prepare: true },
  );
  const bad = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.equal(bad.code, 9, bad.stdout + bad.stderr);
  const failed = JSON.parse(bad.stdout) as { totals: Record<string, number> };
  assert.deepEqual({ missing: failed.totals['missing'], extra: failed.totals['extra'], mismatched: failed.totals['mismatched'] }, { missing: 0, extra: 0, mismatched: 2 }, 'the partial, and the row that is no longer its partials\' merge');
});

// What verify does not judge yet is counted, not dropped: rows merged from partials written by batches
// beyond the checkpoint (here a checkpoint reset below them) are reported as ahead of the checkpoint.
test('an aggregate sink whose checkpoint is below its partials: verify passes and counts each row ahead of the checkpoint', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 1);
  const sink = { name: 'counts', topic: config.topic, table: 'counts', mode: 'aggregate', groupBy: ['customer'], window: { time: 'at', size: '1h' }, columns: { customer: 'text', at: 'timestamp' }, aggregates: { orders: 'count' } };
  const file = sinkConfigFile(t, 'counts.json', JSON.stringify(sink));
  // Offsets 0..9: customer a at the even ones, b at the odd ones, all in one window.
  const records = Array.from({ length: 10 }, (_, i) => ({ key: null, value: JSON.stringify({ customer: i % 2 === 0 ? 'a' : 'b', at: new Date(BASE + i * 1000).toISOString() }), partition: 0 }));
  await (await connectedProducer(t, config)).send(config.topic, records);
  const { args, worker } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin, { worker });
  worker.kill('SIGTERM');
  await waitFor(async () => (worker.exitCode !== null ? true : undefined), { timeoutMs: 60_000, message: 'the worker stops' });
  assert.equal(worker.exitCode, 0, worker.output());
  const reset = await runCli(['checkpoints', 'reset', ...args, '--partition', '0', '--to', '5']);
  assert.equal(reset.code, 0, reset.stdout + reset.stderr);
  const report = await verifyPasses(args);
  // a's partial is through offset 8 and b's through 9, both at or beyond the checkpoint 5 and below the
  // log end: each partial is judged against the records read up to it, and the two rows merged from
  // them, which a batch in flight may not have merged yet, are not judged: counted.
  assert.deepEqual(
    [report.totals['records'], report.totals['stored'], report.totals['missing'], report.totals['extra'], report.totals['mismatched'], report.totals['aheadOfCheckpoint']],
    [5, 5, 0, 0, 0, 2],
  );
});
