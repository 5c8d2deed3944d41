// `exactlyonce verify` against the real stack: a clean run holds; every kind of corruption made on
// purpose is reported precisely (partition/offset, or source + window) with a non-zero exit; offset
// gaps (transaction markers, aborted transactions), retention and lag are explained, not called loss.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { AuditReport, Violation } from '../../src/verify/report.js';
import { alertTopicKey, alertTopicValue } from '../../src/jobs/events/alerts.js';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { baseProperties, kafkaJS, type KafkaJSNamespace } from '../../src/kafka/client.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, testConfig } from '../helpers.js';
import { assertExactlyOnce, connectionArgs, drainWith, generate } from '../pipeline.js';

interface Verified {
  code: number | null;
  report: AuditReport & { auditRun: { id: string } | { error: string } | null };
  stderr: string;
}

async function verify(config: ConnectionConfig, extra: string[] = []): Promise<Verified> {
  // --full: each check below must judge every offset again, not only those after the last proof.
  const r = await runCli(['verify', ...connectionArgs(config), '--json', '--full', ...extra]);
  assert.ok(r.stdout.trim().length > 0, `verify printed a report (stderr: ${r.stderr})`);
  return { code: r.code, report: JSON.parse(r.stdout) as Verified['report'], stderr: r.stderr };
}

/** What identifies a violation: its kind and partition/offset, or its alert and where. */
function ids(vs: readonly Violation[]): string[] {
  return vs
    .map((v) => (v.alert === undefined ? `${v.kind} ${v.partition}/${v.offset}` : `${v.kind} ${v.where} ${v.alert.source}@${v.alert.ts} ${v.alert.expected}->${v.alert.found}`))
    .sort();
}

async function assertFails(config: ConnectionConfig, expected: string[]): Promise<Verified> {
  const v = await verify(config);
  assert.deepEqual(ids(v.report.violations), [...expected].sort());
  assert.equal(v.report.ok, false);
  assert.equal(v.code, 9, 'exit code of EO_VERIFY_FAILED');
  assert.match(v.stderr, /error EO_VERIFY_FAILED: /);
  return v;
}

async function assertHolds(config: ConnectionConfig): Promise<Verified> {
  const v = await verify(config);
  assert.deepEqual(ids(v.report.violations), []);
  assert.equal(v.code, 0, v.stderr);
  assert.equal(v.report.ok, true);
  return v;
}

/** Runs one worker over a stream (`generate` with generateArgs) until it is drained, then stops it. */
const finishedRun = (t: TestContext, config: ConnectionConfig, session: Client, generateArgs: string[]) => drainWith(t, config, session, () => generate(config, generateArgs));

test('verify holds on a finished run and reports each corruption precisely, with a non-zero exit', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  await finishedRun(t, config, session, ['--count', '3000', '--no-delay', '--clients', '9', '--sources', '2', '--health-mix', '0:40,1:20,2:40', '--bad-ratio', '0.03', '--seed', '17']);
  const ks = config.keyspace;

  const clean = await assertHolds(config);
  const r = clean.report;
  assert.equal(r.totals.records, 3000);
  assert.equal(r.totals.stored + r.totals.quarantined, 3000);
  assert.ok(r.totals.quarantined > 0);
  assert.equal(r.totals.lag, '0');
  assert.ok(r.alerts !== null && r.alerts.settled && r.alerts.expected > 0, 'the run raised alerts');
  assert.equal(r.alerts.table.found, r.alerts.expected);
  assert.equal(r.alerts.topic.found, r.alerts.expected);
  assert.ok(clean.report.auditRun !== null && 'id' in clean.report.auditRun, 'the run is recorded');
  const runs = await session.execute(`SELECT ok, summary FROM ${ks}.audit_runs`);
  assert.equal(runs.rowLength, 1);
  assert.equal(runs.first()['ok'], true);
  assert.equal(JSON.parse(runs.first()['summary'] as string).records, 3000);
  // The pipeline tests' check is this auditor too.
  const ledger = await assertExactlyOnce(session, config);
  assert.deepEqual([ledger.records, ledger.stored, ledger.quarantined], [3000, r.totals.stored, r.totals.quarantined]);
  assert.equal(Object.values(ledger.reasons).reduce((a, b) => a + b, 0), ledger.quarantined);

  const ends = new Map(r.partitions.map((p) => [p.partition, BigInt(p.logEnd)]));
  const pick = async (table: string, partition: number) => (await session.execute(`SELECT * FROM ${ks}.${table} WHERE partition = ? LIMIT 1`, [partition], { prepare: true })).first();
  const reinsert = async (table: string, row: Record<string, unknown>) => {
    const cols = Object.keys(row);
    await session.execute(`INSERT INTO ${ks}.${table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map((c) => row[c]), { prepare: true });
  };

  // 1. An events row deleted: that offset is missing.
  const deleted = await pick('events', 1);
  await session.execute(`DELETE FROM ${ks}.events WHERE partition = 1 AND offset = ?`, [deleted['offset']], { prepare: true });
  await assertFails(config, [`missing 1/${deleted['offset']}`]);
  await reinsert('events', deleted);

  // 2. Rows for offsets the topic does not have: beyond the log end, and in a partition it lacks.
  const beyond = ends.get(0)! + 5n;
  await session.execute(`INSERT INTO ${ks}.events (partition, offset, id, ts, source, client, health) VALUES (0, ?, 1, 0, 's', 'c', 2)`, [String(beyond)], { prepare: true });
  await session.execute(`INSERT INTO ${ks}.events (partition, offset, id, ts, source, client, health) VALUES (7, 0, 1, 0, 's', 'c', 2)`);
  const extra = await assertFails(config, [`extra 0/${beyond}`, 'extra 7/0']);
  assert.equal(extra.report.unknownPartitions[0]?.partition, 7);
  await session.execute(`DELETE FROM ${ks}.events WHERE partition = 0 AND offset = ?`, [String(beyond)], { prepare: true });
  await session.execute(`DELETE FROM ${ks}.events WHERE partition = 7`);

  // 3. One field changed: that row mismatches, naming the column.
  const changed = await pick('events', 2);
  await session.execute(`UPDATE ${ks}.events SET client = 'someone else' WHERE partition = 2 AND offset = ?`, [changed['offset']], { prepare: true });
  const mismatch = await assertFails(config, [`mismatch 2/${changed['offset']}`]);
  assert.match(mismatch.report.violations[0]!.message, /client "someone else" ≠ /);
  await reinsert('events', changed);

  // 4. A quarantine row deleted: that malformed record is missing.
  const quarantined = (await session.execute(`SELECT * FROM ${ks}.quarantine WHERE partition = 0 LIMIT 1`)).first();
  await session.execute(`DELETE FROM ${ks}.quarantine WHERE partition = 0 AND offset = ?`, [quarantined['offset']], { prepare: true });
  const q = await assertFails(config, [`missing 0/${quarantined['offset']}`]);
  assert.match(q.report.violations[0]!.message, /a malformed record \(\w+\) has no row in quarantine/);
  await reinsert('quarantine', quarantined);

  // Alert rows are written USING TIMESTAMP (window end µs + count); corruptions and repairs use later ones.
  let ts = BigInt(Date.now()) * 1000n;
  const alerts = (await session.execute(`SELECT source, ts, event_count FROM ${ks}.alerts LIMIT 2`)).rows;
  assert.equal(alerts.length, 2);
  const [a1, a2] = alerts.map((a) => ({ source: a['source'] as string, ts: (a['ts'] as Date).getTime(), eventCount: a['event_count'] as number }));
  const setAlert = (a: { source: string; ts: number; eventCount: number }) =>
    session.execute(`INSERT INTO ${ks}.alerts (source, ts, event_count) VALUES (?, ?, ?) USING TIMESTAMP ?`, [a.source, new Date(a.ts), a.eventCount, String((ts += 1000n))], { prepare: true });

  // 5. An alert count changed in the table.
  await setAlert({ ...a1!, eventCount: a1!.eventCount + 1 });
  await assertFails(config, [`alert_count table ${a1!.source}@${a1!.ts} ${a1!.eventCount}->${a1!.eventCount + 1}`]);
  await setAlert(a1!);

  // 6. An alert dropped from the table.
  await session.execute(`DELETE FROM ${ks}.alerts USING TIMESTAMP ? WHERE source = ? AND ts = ?`, [String((ts += 1000n)), a2!.source, new Date(a2!.ts)], { prepare: true });
  await assertFails(config, [`alert_missing table ${a2!.source}@${a2!.ts} ${a2!.eventCount}->null`]);
  await setAlert(a2!);

  // 7. A wrong revision published last on the alerts topic.
  const producer = new Producer(config);
  await producer.connect();
  t.after(() => producer.close());
  const wrong = { ...a2!, eventCount: a2!.eventCount - 3 };
  await producer.send(config.alertsTopic, [{ key: alertTopicKey(wrong.source, wrong.ts), value: alertTopicValue(wrong) }]);
  await assertFails(config, [`alert_count topic ${a2!.source}@${a2!.ts} ${a2!.eventCount}->${wrong.eventCount}`]);
  await producer.send(config.alertsTopic, [{ key: alertTopicKey(a2!.source, a2!.ts), value: alertTopicValue(a2!) }]);

  // Everything repaired: it holds again; every run was recorded.
  await assertHolds(config);
  const recorded = await session.execute(`SELECT ok FROM ${ks}.audit_runs`);
  assert.deepEqual(recorded.rows.map((x) => x['ok'] as boolean).sort(), [false, false, false, false, false, false, false, true, true]);

  // The human summary names the partition and offset.
  await session.execute(`DELETE FROM ${ks}.events WHERE partition = 1 AND offset = ?`, [deleted['offset']], { prepare: true });
  const human = await runCli(['verify', ...connectionArgs(config), '--no-record', '--full']);
  assert.equal(human.code, 9);
  assert.match(human.stdout, new RegExp(`partition 1 offset ${deleted['offset']}: a valid event has no row in events|partition 1 offset ${deleted['offset']}: a malformed`));
  assert.match(human.stdout, /^ 1 +\| 0 +\| 0 +\| \d+ +\| \d+ +\| 0 +\| [\d,]+ +\| [\d,]+ +\| [\d,]+ +\| 1 +\|/m);
  assert.match(human.stdout, /VIOLATIONS: 1 \(missing 1\)/);
  assert.equal((await session.execute(`SELECT ok FROM ${ks}.audit_runs`)).rowLength, 9, '--no-record records nothing');
});

test('offset gaps (transaction markers, an aborted transaction), retention and lag are explained, not loss', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  void admin;

  // Partition 0 starts with a committed transaction (its marker takes an offset) and an aborted one
  // (its records are never returned to a read_committed consumer, and its marker takes one more).
  const { Kafka } = kafkaJS();
  const tx = new Kafka({}).producer({ ...baseProperties(config, 'verify-test-tx'), 'transactional.id': `verify-test-${config.topic}` } as unknown as KafkaJSNamespace.ProducerConstructorConfig);
  await tx.connect();
  const event = (i: number) => JSON.stringify({ id: i, ts: 1_700_000_000_000 + i, source: 'tx', client: 'tx', health: 2 });
  const send = async (n: number, commit: boolean) => {
    const t1 = await tx.transaction();
    await t1.send({ topic: config.topic, messages: Array.from({ length: n }, (_, i) => ({ key: 'tx', value: event(i), partition: 0 })) });
    await (commit ? t1.commit() : t1.abort());
  };
  await send(20, true); // offsets 0..19, marker 20
  await send(5, false); // offsets 21..25 aborted, marker 26
  await tx.disconnect();

  await finishedRun(t, config, session, ['--count', '900', '--no-delay', '--clients', '9', '--seed', '3']);

  // Retention: the first 50 records of partition 1 are deleted after they were stored.
  const raw = new Kafka({}).admin(baseProperties(config, 'verify-test-admin') as unknown as KafkaJSNamespace.AdminConstructorConfig);
  await raw.connect();
  await raw.deleteTopicRecords({ topic: config.topic, partitions: [{ partition: 1, offset: '50' }] });
  await raw.disconnect();

  // Lag: records produced while no worker runs.
  await generate(config, ['--count', '90', '--no-delay', '--clients', '9', '--seed', '4']);

  const v = await assertHolds(config);
  const [p0, p1] = v.report.partitions;
  assert.deepEqual(p0!.gaps, { offsets: 7, ranges: 1, examples: ['20..26'] });
  assert.equal(p0!.records, Number(p0!.checkpoint) - 7);
  assert.equal(p1!.logStart, '50');
  assert.equal(p1!.belowLogStart, 50);
  assert.equal(v.report.totals.lag, '90');
  assert.equal(v.report.alerts?.settled, false, 'alerts are not settled while the pipeline lags');

  const human = await runCli(['verify', ...connectionArgs(config), '--no-record', '--full']);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /partition 0: 7 offset\(s\) in 1 gap\(s\) the broker does not return \(transaction markers, aborted transactions, compaction\) — not a loss; e\.g\. 20\.\.26/);
  assert.match(human.stdout, /partition 1: offsets 0\.\.49 were deleted by retention; 50 row\(s\) stored for them are kept and not checked/);
  assert.match(human.stdout, /not settled/);
});
