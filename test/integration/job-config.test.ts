// One job configuration (issue 15, item 2): the settings that change what a record becomes are stored
// with the job; workers and verify use them, refuse other values, and only `alerts rule` changes the rule.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { Alert } from '../../src/jobs/events/alert-rule.js';
import { alertTopicKey } from '../../src/jobs/events/alerts.js';
import { encodeEvent, type HealthCode } from '../../src/jobs/events/event.js';
import { RULE_CHANGE_MARK } from '../../src/jobs/events/event-job.js';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { JobBinding } from '../../src/engine/job-binding.js';
import { Producer } from '../../src/kafka/producer.js';
import { readTopic } from '../../src/kafka/log-reader.js';
import { alertsTable, recomputeAlerts } from '../alerts-check.js';
import { freshKeyspace, freshKeyspaceAndTopic, freshTopic, runCli, testConfig, waitFor } from '../helpers.js';
import { checkpoints, connectionArgs, sleep, startServedWorker, startWorker, stopWorkers, waitDrained, waitStarted } from '../pipeline.js';

/** Event time of the test's windows: a multiple of 10 s, so 5 s and 10 s windows both start there. */
const T = 1_700_000_000_000;

let nextId = 1n;
function event(source: string, ts: number, health: HealthCode = 2, client = 'c'): string {
  return encodeEvent({ id: nextId++, ts, source, client, health });
}

/** `n` events of one source spread over [from, from + 4000) ms of event time. */
function burst(source: string, from: number, n: number, health: HealthCode = 2): string[] {
  return Array.from({ length: n }, (_, i) => event(source, from + Math.floor((i * 4000) / n), health));
}

async function produce(config: ConnectionConfig, values: string[]): Promise<void> {
  const producer = new Producer(config);
  try {
    await producer.send(config.topic, values.map((value, i) => ({ key: `k${i % 7}`, value })));
  } finally {
    await producer.close();
  }
}

/** A fresh keyspace and topic of `partitions` whose job has run: a worker (`flags`) drained `n` events of source router and stopped. */
async function drainedOnce(t: TestContext, partitions: number, n: number, flags: string[] = []): Promise<{ config: ConnectionConfig; session: Client }> {
  const { config, session } = await freshKeyspaceAndTopic(t, partitions);
  const worker = startWorker(t, config, flags);
  await produce(config, burst('router', T, n));
  await waitDrained(session, config);
  await stopWorkers([worker]);
  return { config, session };
}

/** The `error …` lines of a command's stderr (logs are JSON lines there too). */
function errorLines(stderr: string): string[] {
  return stderr.split('\n').filter((l) => l.startsWith('error'));
}

function assertOneCodedLine(r: { code: number | null; stderr: string }, code: number, line: string): void {
  assert.deepEqual(errorLines(r.stderr), [line], r.stderr);
  assert.equal(r.code, code, r.stderr);
  assert.doesNotMatch(r.stderr, /^\s+at /m, 'no stack trace');
  assert.doesNotMatch(r.stderr, /internal error/);
}

async function verifyJson(config: ConnectionConfig, extra: string[] = []) {
  const r = await runCli(['verify', ...connectionArgs(config), '--json', '--no-record', ...extra]);
  assert.equal(r.code, 0, `verify failed: ${r.stderr}\n${r.stdout.slice(0, 4000)}`);
  return JSON.parse(r.stdout) as {
    ok: boolean;
    totals: { records: number; stored: number; quarantined: number };
    alerts: { rule: { windowMs: number; slideMs: number; threshold: number; health: number }; expected: number };
    settings: { maxRecordBytes: number; from: string };
  };
}

const mismatch = (ks: string, who: string, diffs: string[]) =>
  `error EO_JOB_CONFIG_MISMATCH: ${who} differs from the job stored in keyspace ${ks}: ${diffs.join('; ')}. ` +
  "Start it with the job's values (or leave the flags out: the stored ones are used); to change the job, use the command made for it";

test('a worker with another --max-record-bytes and --window-ms refuses, naming both; one without the flags runs with the stored values', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const first = startWorker(t, config, ['--max-record-bytes', '2048', '--window-ms', '10000']);
  await waitStarted(first);

  // Another limit, and the default window given explicitly: both differ from what the first stored.
  const second = await runCli(['run', ...connectionArgs(config), '--max-record-bytes', '4096', '--window-ms', '5000']);
  assertOneCodedLine(second, 5, mismatch(config.keyspace, 'this worker', ['max-record-bytes: the job has 2048, this worker 4096', 'window-ms: the job has 10000, this worker 5000']));
  await stopWorkers([first]);

  // A third worker without the flags: the job's 2048 bytes and 10 s windows sliding by 5 s.
  const third = startWorker(t, config);
  await waitStarted(third);
  assert.match(third.output(), /"settings":\{"max-record-bytes":2048,"window-ms":10000,"slide-ms":5000,"threshold":10,"alert-health":2\}.*"msg":"job settings: the job's/);
  await produce(config, [
    // 2,600 bytes: under the default limit (64 KiB), over the job's 2,048: quarantined as too large.
    event('big', T, 0, 'x'.repeat(2500)),
    // 6 + 6 Critical events: 12 in the 10 s window [T, T+10 s), 6 in each 5 s one: an alert only under the job's rule.
    ...burst('router', T, 6),
    ...burst('router', T + 5000, 6),
  ]);
  await waitDrained(session, config);
  await stopWorkers([third]);
  const quarantined = await session.execute(`SELECT reason FROM ${config.keyspace}.quarantine`);
  assert.deepEqual(quarantined.rows.map((r) => r['reason']), ['too_large']);
  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: T + 10_000, eventCount: 12 }]);

  // verify without flags audits with the job's settings.
  const v = await verifyJson(config);
  assert.equal(v.ok, true);
  assert.deepEqual(v.settings, { maxRecordBytes: 2048, rule: { windows: { sizeMs: 10000, slideMs: 5000 }, threshold: 10, health: 2 }, layout: { kind: 'original' }, from: 'job' });
  assert.deepEqual(v.alerts.rule, { windowMs: 10000, slideMs: 5000, threshold: 10, health: 2 });
  assert.equal(v.alerts.expected, 1);
  assert.equal(v.totals.quarantined, 1);
});

test("verify refuses settings or topics other than the job's", async (t) => {
  const { config } = await drainedOnce(t, 2, 4, ['--threshold', '3']);

  const args = connectionArgs(config);
  const ok = await verifyJson(config);
  assert.equal(ok.alerts.rule.threshold, 3, "verify without --threshold uses the job's");
  assert.equal(ok.alerts.expected, 1);
  const same = await verifyJson(config, ['--threshold', '3', '--max-record-bytes', String(64 * 1024)]);
  assert.equal(same.ok, true, 'explicit values equal to the job are fine');

  const threshold = await runCli(['verify', ...args, '--threshold', '10', '--no-record']);
  assertOneCodedLine(threshold, 5, mismatch(config.keyspace, 'verify', ['threshold: the job has 3, verify 10']));
  const limit = await runCli(['verify', ...args, '--max-record-bytes', '1024', '--slide-ms', '1000', '--no-record']);
  assertOneCodedLine(limit, 5, mismatch(config.keyspace, 'verify', ['max-record-bytes: the job has 65536, verify 1024', 'slide-ms: the job has 5000, verify 1000']));

  const other = `${config.topic}-other`;
  const topic = await runCli(['verify', ...args, '--topic', other, '--no-record']);
  assertOneCodedLine(
    topic,
    5,
    `error EO_TOPIC_MISMATCH: keyspace ${config.keyspace} serves topic ${config.topic}, not ${other}: one keyspace holds one topic's records (their rows are keyed by partition and offset). Use --topic ${config.topic}, or another --keyspace for ${other}`,
  );
  const alerts = await runCli(['verify', ...args, '--alerts-topic', `${config.alertsTopic}-other`, '--no-record']);
  assertOneCodedLine(
    alerts,
    5,
    `error EO_TOPIC_MISMATCH: keyspace ${config.keyspace} publishes to ${config.alertsTopic}, not ${config.alertsTopic}-other: use the same output topic flags as the job (e.g. --alerts-topic ${config.alertsTopic})`,
  );
  // With --skip-alerts the alerts topic is not read, so it does not matter.
  const skip = await runCli(['verify', ...args, '--alerts-topic', `${config.alertsTopic}-other`, '--skip-alerts', '--no-record']);
  assert.equal(skip.code, 0, skip.stderr);
});

/** Every message of the alerts topic, by key, in order (null: a tombstone). */
async function alertMessages(config: ConnectionConfig): Promise<Map<string, Array<number | null>>> {
  const byKey = new Map<string, Array<number | null>>();
  await readTopic(config, config.alertsTopic, (records) => {
    for (const r of records) {
      const key = r.key!.toString();
      const list = byKey.get(key) ?? [];
      list.push(r.value === null ? null : (JSON.parse(r.value.toString()) as { eventCount: number }).eventCount);
      byKey.set(key, list);
    }
  });
  return byKey;
}

function latestAlerts(messages: Map<string, Array<number | null>>): Map<string, number | null> {
  return new Map([...messages].map(([k, list]) => [k, list.at(-1)!]));
}

async function storedSettings(session: Client, config: ConnectionConfig) {
  return (await new JobBinding(session, config.keyspace).read('events'))!.settings;
}

test('alerts rule: recomputes the alerts of a drained job, lowers and deletes with tombstones, and later counts still win', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const args = connectionArgs(config);
  // The old rule: 10 s windows sliding by 5 s, threshold 10.
  const worker = await startServedWorker(t, config, ['--window-ms', '10000', '--slide-ms', '5000']);
  await produce(config, [
    ...burst('keep', T + 5000, 12), //   old: keep@T+10s 12, keep@T+15s 12      new: keep@T+10s 12 (unchanged)
    ...burst('lower', T, 4), //          old: lower@T+10s 15, lower@T+15s 11    new: lower@T+10s 11 (lowered)
    ...burst('lower', T + 5000, 11),
    ...burst('gone', T, 6), //           old: gone@T+10s 12                     new: none (deleted)
    ...burst('gone', T + 5000, 6),
    ...burst('new', T + 5000, 9), //     old: none (9 < 10)                     new: new@T+10s 9 (threshold 8)
    ...burst('new', T + 5000, 20, 1), // Warning: never counted
  ]);
  await waitDrained(session, config);
  const old: Alert[] = [
    { source: 'gone', ts: T + 10_000, eventCount: 12 },
    { source: 'keep', ts: T + 10_000, eventCount: 12 },
    { source: 'lower', ts: T + 10_000, eventCount: 15 },
    { source: 'keep', ts: T + 15_000, eventCount: 12 },
    { source: 'lower', ts: T + 15_000, eventCount: 11 },
  ];
  await waitFor(async () => JSON.stringify(await alertsTable(session, config)) === JSON.stringify(old), { timeoutMs: 30_000, message: 'the old alerts are stored' });
  const newRule = ['--window-ms', '5000', '--slide-ms', '5000', '--threshold', '8'];

  // A registered worker is running: refused, nothing changed.
  await waitFor(async () => (await session.execute(`SELECT worker_id FROM ${config.keyspace}.workers`)).rowLength === 1, { timeoutMs: 30_000, message: 'the worker is registered' });
  const busy = await runCli(['alerts', 'rule', ...args, ...newRule]);
  assert.equal(busy.code, 2, busy.stderr);
  assert.deepEqual(errorLines(busy.stderr).length, 1, busy.stderr);
  assert.match(
    errorLines(busy.stderr)[0]!,
    new RegExp(`^error EO_USAGE: 1 worker\\(s\\) of keyspace ${config.keyspace} are running: \\S+ pid ${worker.pid} \\(metrics port ${worker.port}\\)\\. Stop them first`),
  );
  assert.equal((await storedSettings(session, config))['window-ms'], 10000);
  assert.equal((await storedSettings(session, config))[RULE_CHANGE_MARK], undefined, 'the mark is taken back');
  await stopWorkers([worker]);

  // A dry run says what would change and writes nothing.
  const dry = await runCli(['alerts', 'rule', ...args, ...newRule, '--dry-run', '--json']);
  assert.equal(dry.code, 0, dry.stderr);
  const plan = JSON.parse(dry.stdout) as { table: Record<string, unknown>; topic: { published: number; tombstones: number } };
  assert.deepEqual(plan.table, { alerts: 3, unchanged: 1, added: 1, raised: 0, lowered: 1, deleted: 3, truncated: true });
  assert.deepEqual([plan.topic.published, plan.topic.tombstones], [2, 3]);
  assert.deepEqual(await alertsTable(session, config), old);
  assert.equal((await storedSettings(session, config))['window-ms'], 10000);
  const before = await alertMessages(config);

  // The change.
  const change = await runCli(['alerts', 'rule', ...args, ...newRule]);
  assert.equal(change.code, 0, change.stderr);
  t.diagnostic(change.stdout);
  const expected: Alert[] = [
    { source: 'keep', ts: T + 10_000, eventCount: 12 },
    { source: 'lower', ts: T + 10_000, eventCount: 11 },
    { source: 'new', ts: T + 10_000, eventCount: 9 },
  ];
  const rule = { windows: { sizeMs: 5000, slideMs: 5000 }, threshold: 8, health: 2 as const };
  assert.deepEqual(await recomputeAlerts(session, config, rule), expected, 'the test data give these alerts');
  assert.deepEqual(await alertsTable(session, config), expected);
  const after = await alertMessages(config);
  const latest = latestAlerts(after);
  for (const a of expected) assert.equal(latest.get(alertTopicKey(a.source, a.ts)), a.eventCount, `latest message of ${a.source}@${a.ts}`);
  for (const key of [`gone@${T + 10_000}`, `keep@${T + 15_000}`, `lower@${T + 15_000}`]) {
    assert.equal(latest.get(key), null, `${key}: a tombstone is its latest message`);
  }
  assert.equal([...latest.values()].filter((v) => v !== null).length, 3, 'no other alert on the topic');
  assert.equal(after.get(alertTopicKey('keep', T + 10_000))!.length, before.get(alertTopicKey('keep', T + 10_000))!.length, 'an unchanged alert is not published again');
  assert.deepEqual(await storedSettings(session, config), { 'max-record-bytes': 65536, 'window-ms': 5000, 'slide-ms': 5000, threshold: 8, 'alert-health': 2 });
  const rows = await session.execute(`SELECT DISTINCT source, window_end, rule FROM ${config.keyspace}.alert_window_counts`);
  assert.deepEqual([...new Set(rows.rows.map((r) => r['rule']))], ['h2/5000/5000'], "only the new rule's count rows are left");

  // verify audits with the stored rule: table and topic equal the recomputation.
  const v = await verifyJson(config);
  assert.equal(v.ok, true);
  assert.deepEqual(v.alerts.rule, { windowMs: 5000, slideMs: 5000, threshold: 8, health: 2 });
  assert.equal(v.alerts.expected, 3);

  // A worker of the old rule refuses now; one without flags counts with the new rule, and its counts
  // (here 13, below the old 15 of the same row, and a row the change deleted) win over the rewrite.
  const stale = await runCli(['run', ...args, '--window-ms', '10000']);
  assertOneCodedLine(stale, 5, mismatch(config.keyspace, 'this worker', ['window-ms: the job has 5000, this worker 10000']));
  const next = startWorker(t, config);
  await produce(config, [...burst('lower', T + 6000, 2), ...burst('gone', T + 6000, 3)]);
  await waitDrained(session, config);
  await stopWorkers([next]);
  const later = await recomputeAlerts(session, config, rule);
  assert.deepEqual(later, [
    { source: 'gone', ts: T + 10_000, eventCount: 9 },
    { source: 'keep', ts: T + 10_000, eventCount: 12 },
    { source: 'lower', ts: T + 10_000, eventCount: 13 },
    { source: 'new', ts: T + 10_000, eventCount: 9 },
  ]);
  assert.deepEqual(await alertsTable(session, config), later);
  assert.equal((await verifyJson(config)).ok, true);
});

test('an unfinished rule change stops workers and verify until the command is run again', async (t) => {
  const { config, session } = await drainedOnce(t, 1, 10);
  // As an interrupted `alerts rule --threshold 5` leaves it: the mark in the job's settings.
  const binding = new JobBinding(session, config.keyspace);
  const settings = (await binding.read('events'))!.settings;
  await binding.updateSettings('events', { ...settings, [RULE_CHANGE_MARK]: 'started 2024-01-01T00:00:00.000Z, to window 5000 ms, slide 5000 ms, threshold 5, health 2' });
  const args = connectionArgs(config);
  const unfinished = (who: string) =>
    `error EO_JOB_CONFIG_MISMATCH: ${who} cannot start: a change of the alert rule of keyspace ${config.keyspace} is unfinished (started 2024-01-01T00:00:00.000Z, to window 5000 ms, slide 5000 ms, threshold 5, health 2); ` +
    'the alerts are being rewritten. Run `exactlyonce alerts rule` again with the rule wanted to finish it';
  assertOneCodedLine(await runCli(['run', ...args]), 5, unfinished('this worker'));
  assertOneCodedLine(await runCli(['verify', ...args, '--no-record']), 5, unfinished('verify'));
  const finish = await runCli(['alerts', 'rule', ...args, '--threshold', '5']);
  assert.equal(finish.code, 0, finish.stderr);
  assert.deepEqual(await storedSettings(session, config), { ...settings, threshold: 5 });
  const v = await verifyJson(config);
  assert.equal(v.ok, true);
  assert.equal(v.alerts.expected, 1);
  await stopWorkers([startWorker(t, config)]);
});

test('a keyspace with the per-event alert index of an earlier version: workers refuse, coded, until `alerts rule` rebuilds the counts', async (t) => {
  const { config, session } = await drainedOnce(t, 1, 10);
  // As an earlier version left it: one index row per counted event, no counts.
  await session.execute(`TRUNCATE ${config.keyspace}.alert_window_counts`);
  for (let offset = 0; offset < 10; offset++) {
    await session.execute(`INSERT INTO ${config.keyspace}.alert_window_events (source, window_end, rule, partition, offset) VALUES ('router', ?, 'h2/5000/5000', 0, ?)`, [new Date(T + 5000), offset], { prepare: true });
  }
  const args = connectionArgs(config);
  assertOneCodedLine(
    await runCli(['run', ...args]),
    5,
    `error EO_JOB_CONFIG_MISMATCH: keyspace ${config.keyspace} holds alert index rows of an earlier version (${config.keyspace}.alert_window_events), whose counts workers no longer read. ` +
      'With every worker stopped, run `exactlyonce alerts rule` once (flags left out keep the stored rule): it rebuilds the per-partition counts from the stored events',
  );
  const rebuild = await runCli(['alerts', 'rule', ...args]);
  assert.equal(rebuild.code, 0, rebuild.stderr);
  assert.match(rebuild.stdout, /counts \S+\.alert_window_counts: 1 row\(s\) of rule h2\/5000\/5000 \(per window and partition\); 1 written; the per-event index \S+ of earlier versions was emptied/);
  assert.equal((await session.execute(`SELECT * FROM ${config.keyspace}.alert_window_events`)).rowLength, 0);
  const counts = await session.execute(`SELECT partition, event_count, through_offset FROM ${config.keyspace}.alert_window_counts`);
  assert.deepEqual(counts.rows.map((r) => [r['partition'], r['event_count'], String(r['through_offset'])]), [[0, 10, '9']]);
  // A worker runs again and adds to the rebuilt count.
  const next = startWorker(t, config);
  await produce(config, burst('router', T, 2));
  await waitDrained(session, config);
  await stopWorkers([next]);
  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: T + 5000, eventCount: 12 }]);
  assert.equal((await verifyJson(config)).ok, true);
});

test("the job's settings changed under a running worker (not registered, so `alerts rule` ran): its partitions stop, coded, and nothing more is stored", async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 2);
  const args = connectionArgs(config);
  const worker = startWorker(t, config); // no --metrics-port: `alerts rule` cannot see it
  await produce(config, burst('router', T, 10));
  const drained = await waitDrained(session, config);
  const change = await runCli(['alerts', 'rule', ...args, '--threshold', '5']);
  assert.equal(change.code, 0, change.stderr);
  const expected =
    `the job's settings stored in keyspace ${config.keyspace} changed under this worker: threshold: the job has 5, this worker 10. ` +
    'Its partitions are stopped at their checkpoints; restart the worker (without the flags, it runs with the stored settings)';
  const stops = () =>
    worker
      .output()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { level: number; msg: string; code?: string; partition?: number })
      .filter((l) => l.code === 'EO_JOB_CONFIG_MISMATCH');
  await waitFor(() => stops().length === 2, { timeoutMs: 30_000, message: 'both partitions stop' });
  // The worker may read the settings while the command runs (marked as changing) or after it.
  const marked = new RegExp(
    `^the job's settings stored in keyspace ${config.keyspace} changed under this worker: ${RULE_CHANGE_MARK}: the job has "started [^"]+", this worker none\\. Its partitions are stopped`,
  );
  const lines = stops().sort((a, b) => (a.partition ?? -1) - (b.partition ?? -1));
  assert.deepEqual(lines.map((l) => [l.level, l.partition, l.msg === lines[0]!.msg]), [[50, 0, true], [50, 1, true]], 'one error line per partition');
  if (lines[0]!.msg !== expected) assert.match(lines[0]!.msg, marked);
  // Records produced now are not stored by the stopped worker: its checkpoints stay.
  await produce(config, burst('router', T + 5000, 6));
  await sleep(3000);
  assert.deepEqual(await checkpoints(session, config), drained);
  await stopWorkers([worker]);
  // A worker started afresh runs with the stored rule and drains.
  const next = startWorker(t, config);
  await waitDrained(session, config);
  await stopWorkers([next]);
  assert.equal((await verifyJson(config)).ok, true);
});
