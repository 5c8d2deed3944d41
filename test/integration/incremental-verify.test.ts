// `verify` continues from the last recorded proof (src/verify/proof-plan.ts): it checks only what
// came after, says so, and does not claim the rest; `--full` checks everything again; a proof made
// under another reset epoch or other job settings is not trusted; alert windows are judged where new
// records fall.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { AuditReport, Violation } from '../../src/verify/report.js';
import { encodeEvent } from '../../src/jobs/events/event.js';
import type { ConnectionConfig } from '../../src/config.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, testConfig } from '../helpers.js';
import { connectionArgs, drainWith, generate } from '../pipeline.js';

type Report = AuditReport & { auditRun: { id: string } | { error: string } | null };

async function verify(config: ConnectionConfig, extra: string[] = []): Promise<{ code: number | null; report: Report; stderr: string }> {
  const r = await runCli(['verify', ...connectionArgs(config), '--json', ...extra]);
  assert.ok(r.stdout.trim().length > 0, `verify printed a report (stderr: ${r.stderr})`);
  return { code: r.code, report: JSON.parse(r.stdout) as Report, stderr: r.stderr };
}

const ids = (vs: readonly Violation[]) =>
  vs.map((v) => (v.alert === undefined ? `${v.kind} ${v.partition}/${v.offset}` : `${v.kind} ${v.where} ${v.alert.source}@${v.alert.ts} ${v.alert.expected}->${v.alert.found}`)).sort();
const col = (r: AuditReport, f: (p: AuditReport['partitions'][number]) => string | number | null) => r.partitions.map(f);

test('a second verify checks only the new records, says so, and misses a corruption below the proof that --full finds', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const gen = (n: number, seed: number) => generate(config, ['--count', String(n), '--no-delay', '--clients', '9', '--sources', '2', '--health-mix', '0:40,1:20,2:40', '--bad-ratio', '0.03', '--seed', String(seed)]);
  await drainWith(t, config, session, () => gen(3000, 21));

  const first = await verify(config);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.report.mode, 'full');
  assert.equal(first.report.totals.records, 3000);
  assert.equal(first.report.proofRecorded, true);
  assert.deepEqual(col(first.report, (p) => p.provedTo), col(first.report, (p) => p.checkpoint), 'proved up to the checkpoints');
  assert.deepEqual(col(first.report, (p) => p.startedOver), ['no proof recorded yet', 'no proof recorded yet', 'no proof recorded yet']);
  const proved = col(first.report, (p) => p.checkpoint);

  // A corruption below the proof, then 600 new records.
  const ks = config.keyspace;
  const victim = (await session.execute(`SELECT offset FROM ${ks}.events WHERE partition = 1 LIMIT 1`)).first();
  await session.execute(`UPDATE ${ks}.events SET client = 'tampered' WHERE partition = 1 AND offset = ?`, [victim['offset']], { prepare: true });
  await drainWith(t, config, session, () => gen(600, 22));

  const second = await verify(config);
  assert.equal(second.code, 0, `the incremental run does not see the corruption below the proof: ${second.stderr}`);
  assert.equal(second.report.mode, 'incremental');
  assert.equal(second.report.totals.records, 600);
  assert.deepEqual(col(second.report, (p) => p.checkedFrom), proved, 'each partition checked from where the first proof ended');
  assert.deepEqual(col(second.report, (p) => p.startedOver), [null, null, null]);
  assert.equal(second.report.continues?.runId, first.report.runId);
  assert.ok(second.report.alerts !== null && second.report.alerts.incremental && second.report.alerts.settled);
  const human = await runCli(['verify', ...connectionArgs(config), '--no-record']);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, /INCREMENTAL: each partition from where the last recorded proof ended \(run [0-9a-f-]+ at [0-9T:.Z-]+\) up to the stored checkpoints/);
  assert.match(human.stdout, /The 3,600 offset\(s\) below were proved by earlier runs and were NOT checked again by this one; `verify --full` checks everything\./);
  assert.match(human.stdout, /checked 0 records/, 'nothing new since the second run');

  // --full checks everything again and finds it; its proof of partition 1 stops there.
  const full = await verify(config, ['--full']);
  assert.equal(full.code, 9);
  assert.equal(full.report.mode, 'full');
  assert.equal(full.report.totals.records, 3600);
  assert.deepEqual(ids(full.report.violations), [`mismatch 1/${victim['offset']}`]);
  assert.deepEqual(col(full.report, (p) => p.startedOver), ['--full', '--full', '--full']);
  assert.equal(full.report.partitions[1]!.provedTo, String(victim['offset']));

  // The next incremental run starts partition 1 at the violation, so it is reported until repaired.
  const again = await verify(config);
  assert.equal(again.code, 9);
  assert.deepEqual(ids(again.report.violations), [`mismatch 1/${victim['offset']}`]);
  assert.equal(again.report.partitions[1]!.checkedFrom, String(victim['offset']));
  assert.deepEqual([again.report.partitions[0]!.records, again.report.partitions[2]!.records], [0, 0]);

  // A reset epoch: that partition is not trusted, the others continue.
  const reset = await runCli(['checkpoints', 'reset', ...connectionArgs(config), '--partition', '0', '--to', String(proved[0])]);
  assert.equal(reset.code, 0, reset.stderr);
  const afterReset = await verify(config, ['--skip-alerts']);
  assert.equal(afterReset.report.mode, 'incremental');
  assert.match(afterReset.report.partitions[0]!.startedOver ?? '', /^the checkpoint was reset \(epoch 0 when proved, 1 now\)$/);
  assert.equal(afterReset.report.partitions[0]!.checkedFrom, '0');
  assert.equal(afterReset.report.partitions[0]!.records, Number(afterReset.report.partitions[0]!.checkpoint));
  assert.equal(afterReset.report.partitions[2]!.startedOver, null);
  assert.equal(afterReset.report.partitions[2]!.records, 0);
});

test('alert windows are judged where new records fall: a wrong count there is found, one in an untouched window only by --full; other settings are not trusted', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 2);
  const producer = new Producer(config);
  await producer.connect();
  t.after(() => producer.close());
  const ks = config.keyspace;
  // Windows of 5 s from a fixed epoch: W1 (source a) and W2 (source b).
  const W1 = 1_700_000_005_000;
  const W2 = 1_700_000_010_000;
  let id = 1;
  const events = (source: string, windowEnd: number, n: number) =>
    Array.from({ length: n }, (_, i) => ({ key: `c${i % 4}`, value: encodeEvent({ id: BigInt(id++), ts: windowEnd - 5000 + i, source, client: `c${i % 4}`, health: 2 }) }));
  await drainWith(t, config, session, () => producer.send(config.topic, [...events('a', W1, 30), ...events('b', W2, 15)]));
  const first = await verify(config);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.report.alerts?.expected, 2);

  // Late events revise W1 to 42; the worker stores it. Then both windows' rows are tampered with.
  await drainWith(t, config, session, () => producer.send(config.topic, events('a', W1, 12)));
  const tamper = (source: string, ts: number, count: number) =>
    session.execute(`INSERT INTO ${ks}.alerts (source, ts, event_count) VALUES (?, ?, ?) USING TIMESTAMP ?`, [source, new Date(ts), count, String(BigInt(Date.now()) * 1000n)], { prepare: true });
  await tamper('a', W1, 41);
  await tamper('b', W2, 16);

  const incremental = await verify(config);
  assert.equal(incremental.code, 9);
  assert.equal(incremental.report.totals.records, 12);
  assert.deepEqual(ids(incremental.report.violations), [`alert_count table a@${W1} 42->41`], 'only the window the new records fall in is judged');
  assert.equal(incremental.report.alerts?.windows, 1);
  const full = await verify(config, ['--full']);
  assert.deepEqual(ids(full.report.violations), [`alert_count table a@${W1} 42->41`, `alert_count table b@${W2} 15->16`]);

  // Another rule (threshold 11): no proof made under the old settings is trusted.
  const rule = await runCli(['alerts', 'rule', ...connectionArgs(config), '--threshold', '11']);
  assert.equal(rule.code, 0, rule.stderr + rule.stdout);
  const afterRule = await verify(config);
  assert.equal(afterRule.report.mode, 'full');
  assert.deepEqual(col(afterRule.report, (p) => p.startedOver), ["the job's settings changed since the proof", "the job's settings changed since the proof"]);
  assert.equal(afterRule.code, 0, `alerts rule rewrote the tampered rows: ${afterRule.stderr}`);
  assert.equal(afterRule.report.totals.records, 57);
});
