// Topics written by transactional producers (Kafka Streams, Flink with exactly-once on): aborted
// records and transaction markers are never delivered to the worker (read_committed), so no batch ever
// ends after them; the worker's checkpoints must still reach the end of what can be read, the last
// stable offset, and lag, `checkpoints list`, verify and the dashboard must count to it. A transaction
// left open holds back everything after it: shown apart (held), named by the stall warning, and read
// once the broker aborts it. Issue 24 (the case: 20 transactions of 100 events, 2 of 3 committed, the
// last aborted: checkpoints stuck at 652/651/651 of 687/687/686, lag 106 for ever, three stall warnings).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { generate as generateEvents } from '../../src/jobs/events/generator.js';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { startDashboard } from '../../src/dashboard/dashboard.js';
import { parsePrometheus, select } from '../../src/dashboard/prometheus.js';
import { LOG_END_REFRESH_MS, STALL_AFTER_MS } from '../../src/engine/metrics.js';
import type { KafkaAdmin, Watermarks } from '../../src/kafka/admin.js';
import { readTopic } from '../../src/kafka/log-reader.js';
import { TransactionalProducer, type OutgoingRecord } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, repoRoot, runCli, testConfig, waitFor } from '../helpers.js';
import { assertExactlyOnce, checkpoints, connectionArgs, startServedWorker, stopWorkers, waitDrained, type Worker } from '../pipeline.js';

/** Valid events and a few malformed ones (quarantined), spread over 12 keys and so over every partition. */
function events(count: number, seed: number): OutgoingRecord[] {
  return [...generateEvents({ eventsPerKey: 0, count, clients: 12, sources: 3, healthMix: [50, 20, 30], badRatio: 0.01, seed })].map((r) => ({ key: r.key, value: r.value }));
}

/** What a read_committed consumer reads of the topic: the readable records' count, and each partition's last readable offset. */
async function readable(config: ConnectionConfig): Promise<{ records: number; last: Map<number, bigint> }> {
  const last = new Map<number, bigint>();
  let records = 0;
  await readTopic(config, config.topic, (rs) => {
    records += rs.length;
    for (const r of rs) last.set(r.partition, r.offset);
  });
  return { records, last };
}

/** One gauge or counter of a worker's /metrics, per partition. */
async function perPartition(worker: { port: number }, name: string): Promise<Map<number, number>> {
  const text = await (await fetch(`http://127.0.0.1:${worker.port}/metrics`)).text();
  return new Map(select(parsePrometheus(text), `exactlyonce_${name}`).map((s) => [Number(s.labels['partition']), s.value]));
}

/**
 * Waits until a worker's per-partition series equal `expected` exactly. (A worker on a busy machine can
 * lose its partitions for a moment, a session timeout, and their gauges leave /metrics until they come back.)
 */
async function gauges(worker: Worker & { port: number }, name: string, expected: ReadonlyMap<number, number>): Promise<void> {
  let last = new Map<number, number>();
  await waitFor(
    async () => {
      last = await perPartition(worker, name);
      return last.size === expected.size && [...expected].every(([p, v]) => last.get(p) === v);
    },
    { timeoutMs: 60_000, message: `${name} ${JSON.stringify([...expected])}` },
  ).catch((e: unknown) => {
    // What the worker last served, and its last log lines: a failure on CI must say what happened.
    const tail = worker.output().split('\n').filter((l) => !l.includes('"level":20')).slice(-25).join('\n');
    throw new Error(`${(e as Error).message} (last seen ${JSON.stringify([...last])}); the worker's last lines:\n${tail}`, { cause: e });
  });
}

const zeros = new Map([[0, 0], [1, 0], [2, 0]]);

const byPartition = (marks: readonly Watermarks[], f: (w: Watermarks) => bigint | number) => new Map(marks.map((w) => [w.partition, f(w)]));
const numbers = (m: ReadonlyMap<number, bigint | number>) => new Map([...m].map(([p, v]) => [p, Number(v)]));

/** `checkpoints list --json`: per partition checkpoint, log end, lag and held. */
async function listed(config: ConnectionConfig): Promise<Array<{ partition: number; checkpoint: string | null; logEnd: string; lag: string; held: string }>> {
  const r = await runCli(['checkpoints', 'list', '--json', ...connectionArgs(config)]);
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim().split('\n').map((l) => JSON.parse(l) as { partition: number; checkpoint: string | null; logEnd: string; lag: string; held: string });
}

/** The dashboard's view of the partitions (lag and held per partition, total lag), from a dashboard started on the worker. */
async function dashboardView(t: TestContext, config: ConnectionConfig, worker: { port: number }) {
  const d = await startDashboard(config, { port: 0, host: '127.0.0.1', workerMetrics: [`127.0.0.1:${worker.port}`], intervalMs: 250 });
  t.after(() => d.close());
  return async () =>
    waitFor(
      () => {
        const s = d.collector.snapshot();
        // (A round whose Cassandra or Kafka read timed out leaves a partition's checkpoint or held unknown.)
        return s !== undefined && s.partitions.length > 0 && s.partitions.every((p) => p.checkpoint !== null && p.lag !== null && p.held !== null) && s;
      },
      { timeoutMs: 30_000, message: 'the dashboard has a snapshot with every partition' },
    );
}

/** The stored checkpoints, read again while Cassandra answers with an error (overloaded on a busy machine). */
const storedCheckpoints = (session: Client, config: ConnectionConfig) =>
  waitFor(() => checkpoints(session, config), { timeoutMs: 60_000, message: 'the checkpoints can be read' });

/** The worker's stall warnings, as logged. */
const stallLines = (worker: Worker) => worker.output().split('\n').filter((l) => l.includes('checkpoint stalled'));

test('20 transactions of 100 events, 2 of 3 committed, the last aborted: checkpoints reach the log ends, lag 0 in /metrics, checkpoints list, verify and the dashboard, and no stall', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  const producer = new TransactionalProducer(config, `eo-test-${config.topic}`);
  t.after(() => producer.close());
  const records = events(2000, 2424);
  for (let i = 0; i < 20; i++) {
    const commit = i % 3 !== 1; // 1, 4, …, 19 aborted: 13 committed, the last aborted
    assert.equal(await producer.write(config.topic, records.slice(i * 100, (i + 1) * 100), commit), commit ? 'committed' : 'aborted');
  }
  // The coordinator writes a transaction's markers after it answered the commit or abort, so the last
  // stable offset can trail the log end for a moment on a busy machine.
  const settled = () =>
    waitFor(
      async () => {
        const m = await admin.watermarks(config.topic);
        return m.every((w) => w.stable === w.high) ? m : undefined;
      },
      { timeoutMs: 30_000, message: 'no transaction is open: every last stable offset reaches its log end' },
    );
  let marks = await settled();
  assert.deepEqual(byPartition(marks, (w) => w.stable), byPartition(marks, (w) => w.high), 'no transaction is open');
  const log = await readable(config);
  assert.equal(log.records, 1300);
  // Every partition ends with records a read_committed consumer never gets (the last, aborted transaction and the markers).
  for (const w of marks) assert.ok(log.last.get(w.partition)! + 1n < w.high, `partition ${w.partition}: last readable ${log.last.get(w.partition)}, log end ${w.high}`);

  const worker = await startServedWorker(t, config);
  await waitDrained(session, config, 120_000);
  const drainedAt = Date.now();
  // The log ends again: once (a CI run), every partition's end had moved on by one control record after
  // the first read, and the worker had stepped over it too.
  marks = await settled();
  await waitDrained(session, config, 120_000);
  assert.deepEqual(await storedCheckpoints(session, config), byPartition(marks, (w) => w.high), 'every checkpoint at its log end');
  const ledger = await assertExactlyOnce(session, config); // verify's auditor: lag 0 on every partition, nothing missing or extra
  assert.equal(ledger.records, 1300);
  assert.equal(ledger.stored + ledger.quarantined, 1300);

  const high = numbers(byPartition(marks, (w) => w.high));
  await gauges(worker, 'checkpoint_offset', high);
  await gauges(worker, 'lag_records', zeros);
  await gauges(worker, 'transaction_held_records', zeros);
  // The checkpoint stepped once over each partition's unreadable end: from after its last readable record to the log end.
  assert.deepEqual(await perPartition(worker, 'unreadable_offsets_skipped_total'), numbers(byPartition(marks, (w) => w.high - log.last.get(w.partition)! - 1n)));

  assert.deepEqual(
    (await listed(config)).map((r) => [r.partition, r.checkpoint, r.logEnd, r.lag, r.held]),
    marks.map((w) => [w.partition, String(w.high), String(w.high), '0', '0']),
  );
  const snapshot = await (await dashboardView(t, config, worker))();
  assert.deepEqual(snapshot.partitions.map((p) => [p.partition, p.checkpoint, p.logEnd, p.lag, p.held]), marks.map((w) => [w.partition, Number(w.high), Number(w.high), 0, 0]));
  assert.equal(snapshot.totals.lag, 0);

  // Nothing is left to read, so nothing stalls: no warning once the stall threshold has passed.
  await waitFor(() => Date.now() - drainedAt > STALL_AFTER_MS + 2 * LOG_END_REFRESH_MS, { timeoutMs: 120_000, message: 'the stall threshold passes' });
  assert.deepEqual(stallLines(worker), []);
  // (Served as 0 for every owned partition from its assignment, 1 while stalled.)
  assert.deepEqual(await perPartition(worker, 'partition_stalled'), new Map(marks.map((w) => [w.partition, 0])), 'never stalled');
  await stopWorkers([worker]);
});

/**
 * Starts an upstream producer in a process of its own that opens a transaction, sends `count` events
 * into it and waits; the test SIGKILLs it, so the transaction stays open until the broker aborts it
 * (after `timeoutMs`, its transaction.timeout.ms, plus up to the broker's 10 s cleanup interval).
 * Resolves with when its producer said the transaction was open.
 */
async function abandonTransaction(config: ConnectionConfig, count: number, timeoutMs: number): Promise<number> {
  const code = `
    import { generate } from ${JSON.stringify(`${repoRoot}src/jobs/events/generator.ts`)};
    import { TransactionalProducer } from ${JSON.stringify(`${repoRoot}src/kafka/producer.ts`)};
    const config = { brokers: ${JSON.stringify(config.brokers)}, kafkaConfig: {} };
    const p = new TransactionalProducer(config, 'eo-test-abandoned-${config.topic}', { 'transaction.timeout.ms': ${timeoutMs}, 'message.timeout.ms': ${timeoutMs} });
    const records = [...generate({ eventsPerKey: 0, count: ${count}, clients: 12, sources: 3, healthMix: [50, 20, 30], badRatio: 0, seed: 77 })].map((r) => ({ key: r.key, value: r.value }));
    await p.writeOpen(${JSON.stringify(config.topic)}, records);
    process.stdout.write('open\\n');
    setInterval(() => undefined, 1000);
  `;
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  try {
    await waitFor(() => output.includes('open\n') || child.exitCode !== null, { timeoutMs: 120_000, message: 'the upstream producer opens its transaction' });
    assert.ok(output.includes('open\n'), `the upstream producer failed: ${output}`);
    return Date.now();
  } finally {
    child.kill('SIGKILL');
    if (child.exitCode === null && child.signalCode === null) await once(child, 'exit');
  }
}

test('a transaction left open (its producer SIGKILLed) until the broker aborts it: held apart and named by the stall warning, then read past', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin: KafkaAdmin = await freshTopic(t, config, 3);
  const producer = new TransactionalProducer(config, `eo-test-${config.topic}`);
  t.after(() => producer.close());
  const worker = await startServedWorker(t, config);
  const [first, later] = [events(300, 31), events(300, 32)];
  assert.equal(await producer.write(config.topic, first, true), 'committed');
  await waitDrained(session, config, 120_000);

  // 150 events in a transaction whose producer dies; then 300 committed by another producer: held back behind it.
  // Its timeout leaves room for the checks below on a slow machine; its clock starts with its first
  // record, which is before the producer says it is open (a moment's slack below).
  const TXN_TIMEOUT_MS = 150_000;
  const openedAt = await abandonTransaction(config, 150, TXN_TIMEOUT_MS);
  assert.equal(await producer.write(config.topic, later, true), 'committed');
  // The commit returns before the coordinator has written its markers: read a moment early, a
  // partition's end was one control record short of where it stays (a CI run, every held gauge off by
  // one). Read again until two reads a second apart agree.
  const key = (m: readonly Watermarks[]) => m.map((w) => `${w.partition}:${w.stable}:${w.high}`).join(' ');
  let previous = await admin.watermarks(config.topic);
  const open = await waitFor(
    async () => {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await admin.watermarks(config.topic);
      const same = key(now) === key(previous);
      previous = now;
      return same ? now : undefined;
    },
    { timeoutMs: 60_000, message: 'the log ends stop moving after the commit' },
  );
  for (const w of open) assert.ok(w.stable < w.high, `partition ${w.partition}: the open transaction holds back [${w.stable}, ${w.high})`);
  const held = numbers(byPartition(open, (w) => w.high - w.stable));

  // Everything readable is stored; what the open transaction holds is not lag but held, everywhere.
  await waitDrained(session, config, 120_000);
  assert.deepEqual(await storedCheckpoints(session, config), byPartition(open, (w) => w.stable));
  await gauges(worker, 'transaction_held_records', held);
  await gauges(worker, 'lag_records', zeros);
  assert.deepEqual(
    (await listed(config)).map((r) => [r.partition, r.checkpoint, r.lag, r.held]),
    open.map((w) => [w.partition, String(w.stable), '0', String(w.high - w.stable)]),
  );
  const view = await dashboardView(t, config, worker);
  assert.deepEqual((await view()).partitions.map((p) => [p.partition, p.lag, p.held]), open.map((w) => [w.partition, 0, Number(w.high - w.stable)]));
  assert.equal((await assertExactlyOnce(session, config)).records, 300, 'verify: the first 300 are readable and stored, lag 0');

  // The checkpoints stand still behind the open transaction: the stall warning says so, with its age.
  // (Every stall line, now and later, must name it: a partition lost and assigned again on a busy
  // machine may warn twice, never for another cause.)
  const everyStallNamesTheTransaction = () => {
    for (const line of stallLines(worker)) {
      const msg = (JSON.parse(line) as { msg: string }).msg;
      const [, p] = /^partition (\d+):/.exec(msg)!;
      const w = open.find((m) => m.partition === Number(p))!;
      assert.match(
        msg,
        new RegExp(
          `^partition ${p}: checkpoint stalled at ${w.stable} with ${w.high - w.stable} records behind for \\d+ s; cause: a transaction open for at least \\d+ s holds back offsets ${w.stable}\\.\\.${w.high - 1n} \\(${w.high - w.stable} records\\): ` +
            "a read_committed consumer gets them once its producer commits or aborts it, or the broker aborts it after the producer's transaction\\.timeout\\.ms$",
        ),
      );
    }
  };
  const stalledPartitions = () => new Set(stallLines(worker).map((l) => (JSON.parse(l) as { partition: number }).partition));
  await waitFor(() => stalledPartitions().size === 3, { timeoutMs: STALL_AFTER_MS + 60_000, message: 'a stall warning for each partition' });
  assert.ok(Date.now() - openedAt < TXN_TIMEOUT_MS - 5_000, 'the transaction was still open when the warnings came (else raise its timeout)');
  everyStallNamesTheTransaction();

  // The broker aborts it: the 300 committed after it become readable, and the checkpoints reach the log ends.
  await waitFor(async () => (await admin.watermarks(config.topic)).every((w) => w.stable === w.high), { timeoutMs: TXN_TIMEOUT_MS + 120_000, message: 'the broker aborts the transaction' });
  const marks = await admin.watermarks(config.topic);
  await waitDrained(session, config, 120_000);
  assert.deepEqual(await storedCheckpoints(session, config), byPartition(marks, (w) => w.high));
  assert.equal((await assertExactlyOnce(session, config)).records, 600, 'the abandoned 150 were never stored');
  assert.equal((await readable(config)).records, 600);
  await gauges(worker, 'transaction_held_records', zeros);
  await gauges(worker, 'lag_records', zeros);
  everyStallNamesTheTransaction();
  if (!/"msg":"(lost|revoked) partitions/.test(worker.output())) {
    // (A partition assigned again starts unstalled, and so is not said to move again.)
    await waitFor(() => worker.output().split('checkpoint moving again').length === 4, { timeoutMs: 30_000, message: 'each partition moving again' });
    assert.equal(stallLines(worker).length, 3, 'one stall warning per partition');
  }
  await stopWorkers([worker]);
});
