// `quarantine redrive` (issue 40 item 2) against the real stack and Schema Registry: an Avro sink
// quarantines records by a schema id the registry does not know yet; the schema is registered; a
// redrive is SIGKILLed half-way while a worker runs, another finishes beside the worker, a third finds
// nothing left; records whose raw bytes were cut at --max-quarantine-bytes are re-read from Kafka, and
// those the log no longer holds stay quarantined, said per record; an offset left in both the table and
// the quarantine (a redrive killed between its two writes) is what verify reports and a redrive repairs.
// The table, the quarantine and `verify --job` are exact: full sets of offsets.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { BROKERS, CASSANDRA, produceRecords, REGISTRY_ENV, registryTopic, runCli, startCli, waitFor } from '../helpers.js';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];
const N = 600; // records per partition
const NEVER = 2_000_000_001; // a schema id never registered
const GONE = 60; // partition 1's records below this offset are deleted from the log after quarantine

/** What record i of a partition is: its schema (known now, known later, never) and whether its bytes outgrow --max-quarantine-bytes 12. */
const kind = (i: number) => (i % 50 === 7 ? 'never' : i % 3 === 1 ? 'late' : 'known');
const long = (i: number) => i % 2 === 1;

/**
 * A test's start: a fresh topic of `partitions` through the registry; the test's own Item schemas (named
 * by its topic: new content to the registry, so new ids), v1 registered, v2 (adds channel) not yet: `late`
 * is the id the registry hands out next (ids are sequential); the Avro sink job `sink` (columns id, page,
 * channel) in a file `name`, its schema applied.
 */
async function itemsJob(t: TestContext, partitions: number, name: string, sink: { name: string; table: string; mode: 'log' | 'upsert'; key?: string[] }) {
  const { config, admin, session, registry, subject } = await registryTopic(t, partitions);
  const v1 = { type: 'record', name: 'Item', doc: config.topic, fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'channel', type: 'string', default: 'web' }] };
  const id1 = await registry.register(subject, 'AVRO', JSON.stringify(v1));
  const [t1, t2] = [v1, v2].map((s) => avroType(JSON.stringify(s)));
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-redrive-')), name);
  writeFileSync(file, JSON.stringify({ name: sink.name, topic: config.topic, format: 'avro', table: sink.table, mode: sink.mode, ...(sink.key === undefined ? {} : { key: sink.key }), columns: { id: 'bigint', page: 'text', channel: 'text' } }));
  const apply = await runCli(['schema', 'apply', ...conn(config), '--job', file], REGISTRY_ENV);
  assert.equal(apply.code, 0, apply.stderr);
  return { config, admin, session, registry, subject, v2, id1, late: id1 + 1, t1, t2, file };
}

test('redrive after the schema is registered: killed half-way beside a running worker, run again, and again: table, quarantine and verify --job exact', async (t) => {
  const job = 'items_avro';
  const { config, admin, session, registry, subject, v2, id1, late, t1, t2, file } = await itemsJob(t, 2, 'items.json', { name: job, table: 'items', mode: 'log' });

  // Short records are 8 bytes whole (kept whole by --max-quarantine-bytes 12), long ones are cut.
  const record = (p: number, i: number) => {
    const page = long(i) ? `/a-page-of-some-length/${p}/${i}` : '';
    const k = kind(i);
    const value = k === 'known' ? encodeAvro(t1!, { id: BigInt(i), page }) : k === 'late' ? encodeAvro(t2!, { id: BigInt(i), page, channel: '' }) : Buffer.from([2, 0]);
    return { value: withWireHeader(k === 'known' ? id1 : k === 'late' ? late : NEVER, value), partition: p };
  };
  await produceRecords(config, [0, 1].flatMap((p) => Array.from({ length: N }, (_, i) => record(p, i))));
  const worker = startCli(t, ['sink', ...conn(config), '--config', file, '--max-batch', '50', '--max-quarantine-bytes', '12'], REGISTRY_ENV);
  const checkpoint = async (p: number) =>
    (await session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ? AND partition = ?`, [job, config.topic, p], { prepare: true })).first()?.['next_offset']?.toString();
  const drained = async (end: number) => (await checkpoint(0)) === String(end) && (await checkpoint(1)) === String(end);
  await waitFor(() => drained(N), { timeoutMs: 180_000, message: `the worker drains both partitions to ${N}` });

  const offsets = async (table: string, p: number) => {
    const where = table === 'items' ? 'partition = ?' : 'job = ? AND partition = ?';
    const r = await session.execute(`SELECT offset FROM ${config.keyspace}.${table} WHERE ${where}`, table === 'items' ? [p] : [job, p], { prepare: true, fetchSize: 100_000 });
    return r.rows.map((row) => Number(String(row['offset']))).sort((a, b) => a - b);
  };
  const all = Array.from({ length: N }, (_, i) => i);
  for (const p of [0, 1]) {
    assert.deepEqual(await offsets('items', p), all.filter((i) => kind(i) === 'known'), `partition ${p}: the known schema's records stored`);
    assert.deepEqual(await offsets('job_quarantine', p), all.filter((i) => kind(i) !== 'known'), `partition ${p}: the others quarantined`);
  }
  const reasons = await session.execute(`SELECT reason, raw_length, raw FROM ${config.keyspace}.job_quarantine WHERE job = ? AND partition = 0`, [job], { prepare: true, fetchSize: 100_000 });
  assert.deepEqual([...new Set(reasons.rows.map((r) => r['reason'] as string))], ['unknown_schema']);
  assert.ok(reasons.rows.some((r) => (r['raw'] as Buffer).length < (r['raw_length'] as number)), 'some raw bytes were cut');

  // Partition 1's first records leave the log; then the schema is registered.
  await admin.deleteRecords(config.topic, 1, BigInt(GONE));
  assert.equal(await registry.register(subject, 'AVRO', JSON.stringify(v2)), late, 'the registry handed out the next id (no other registration meanwhile)');

  // Meanwhile verify says what is wrong: each record of the late schema is valid now and still quarantined.
  const verify = async () => {
    const v = await runCli(['verify', ...conn(config), '--job', file, '--full', '--no-record', '--json'], REGISTRY_ENV);
    return { code: v.code, report: JSON.parse(v.stdout) as { ok: boolean; totals: { records: number; stored: number; quarantined: number }; violationCounts: Record<string, number> } };
  };
  const judged = (p: number) => all.filter((i) => p === 0 || i >= GONE);
  const lateJudged = [0, 1].reduce((n, p) => n + judged(p).filter((i) => kind(i) === 'late').length, 0);
  const before = await verify();
  assert.equal(before.code, 9);
  assert.deepEqual(Object.fromEntries(Object.entries(before.report.violationCounts).filter(([, n]) => n > 0)), { quarantined_valid: lateJudged, missing: lateJudged });

  // A redrive killed right after its first step, while the worker runs and more records arrive.
  const more = [0, 1].flatMap((p) => Array.from({ length: 100 }, (_, j) => ({ value: withWireHeader(id1, encodeAvro(t1!, { id: BigInt(N + j), page: '' })), partition: p })));
  const producing = produceRecords(config, more);
  const killed = startCli(t, ['quarantine', 'redrive', ...conn(config), '--job', file, '--batch', '3'], REGISTRY_ENV);
  await waitFor(() => /: redrove \d+ records?, offsets/.test(killed.output()), { timeoutMs: 120_000, message: 'the first redrive writes its first step' });
  killed.kill('SIGKILL');
  await new Promise((resolve) => killed.once('exit', resolve));
  await producing;
  // Every offset is still in the table or the quarantine (both, for a step killed between its writes).
  for (const p of [0, 1]) {
    const [rows, q] = [await offsets('items', p), await offsets('job_quarantine', p)];
    assert.deepEqual(all.filter((i) => kind(i) !== 'never' && !rows.includes(i) && !q.includes(i)), [], `partition ${p}: no offset lost by the kill`);
  }

  // Again, to the end, beside the running worker.
  const second = await runCli(['quarantine', 'redrive', ...conn(config), '--job', file, '--batch', '50'], REGISTRY_ENV);
  assert.equal(second.code, 0, second.stderr);
  const lost = all.filter((i) => i < GONE && kind(i) === 'late' && long(i));
  const lostLines = second.stdout.split('\n').filter((l) => /^partition \d+ offset \d+: cannot be redriven/.test(l));
  assert.deepEqual(
    lostLines,
    lost.map((i) => `partition 1 offset ${i}: cannot be redriven: its raw bytes were cut at 12 of ${record(1, i).value.length} (--max-quarantine-bytes), and the log no longer holds it (log start ${GONE}); it stays quarantined (unknown_schema)`),
  );
  const never = 2 * all.filter((i) => kind(i) === 'never').length;
  assert.match(second.stdout, new RegExp(`; ${never} unknown_schema still not decodable; ${lost.length} cannot be redriven \\(above\\)\\n$`));
  await waitFor(() => drained(N + 100), { timeoutMs: 180_000, message: 'the worker drains the records produced meanwhile' });

  const expectTable = (p: number) => [...all.filter((i) => kind(i) !== 'never' && !(p === 1 && lost.includes(i))), ...Array.from({ length: 100 }, (_, j) => N + j)];
  const expectQuarantine = (p: number) => all.filter((i) => kind(i) === 'never' || (p === 1 && lost.includes(i)));
  const exact = async (when: string) => {
    for (const p of [0, 1]) {
      assert.deepEqual(await offsets('items', p), expectTable(p), `${when}: partition ${p}'s table`);
      assert.deepEqual(await offsets('job_quarantine', p), expectQuarantine(p), `${when}: partition ${p}'s quarantine`);
    }
    const v = await verify();
    assert.equal(v.code, 0, JSON.stringify(v.report.violationCounts));
    const records = 2 * (N + 100) - GONE;
    const quarantined = judged(0).filter((i) => kind(i) === 'never').length + judged(1).filter((i) => kind(i) === 'never').length;
    assert.deepEqual(v.report.totals, { ...v.report.totals, records, quarantined, stored: records - quarantined });
  };
  await exact('after the second redrive');
  const row = (await session.execute(`SELECT id, page, channel FROM ${config.keyspace}.items WHERE partition = 1 AND offset = 61`)).first();
  assert.deepEqual({ id: String(row?.['id']), page: row?.['page'], channel: row?.['channel'] }, { id: '61', page: '/a-page-of-some-length/1/61', channel: '' }, 'a cut record re-read from Kafka and stored');

  // Run twice: nothing left to do, nothing changes.
  const third = await runCli(['quarantine', 'redrive', ...conn(config), '--job', file], REGISTRY_ENV);
  assert.equal(third.code, 0, third.stderr);
  assert.match(third.stdout, new RegExp(`^(partition 1 offset \\d+: cannot be redriven: .*\\n){${lost.length}}redrove 0 records; ${never} unknown_schema still not decodable; ${lost.length} cannot be redriven \\(above\\)\\n$`));
  await exact('after a third redrive');

  // The state a redrive killed between its two writes leaves (or a zombie's late quarantine write):
  // offset 4 of partition 0 in both. verify names it; a redrive repairs it.
  const q = await session.execute(`SELECT * FROM ${config.keyspace}.job_quarantine WHERE job = ? AND partition = 0 AND offset = 7`, [job], { prepare: true });
  const template = q.first()!;
  await session.execute(
    `INSERT INTO ${config.keyspace}.job_quarantine (job, partition, offset, topic, reason, detail, key, raw, raw_length, raw_sha256, kafka_ts) VALUES (?, 0, 4, ?, 'unknown_schema', ?, null, ?, ?, ?, ?)`,
    [job, config.topic, `schema id ${late} is not in the Schema Registry`, record(0, 4).value, record(0, 4).value.length, (await import('node:crypto')).createHash('sha256').update(record(0, 4).value).digest('hex'), template['kafka_ts']],
    { prepare: true },
  );
  const both = await verify();
  assert.equal(both.code, 9);
  assert.deepEqual(Object.fromEntries(Object.entries(both.report.violationCounts).filter(([, n]) => n > 0)), { quarantined_valid: 1 });
  const repair = await runCli(['quarantine', 'redrive', ...conn(config), '--job', file, '--partition', '0', '--from', '4', '--to', '4'], REGISTRY_ENV);
  assert.equal(repair.code, 0, repair.stderr);
  assert.equal(repair.stdout, 'partition 0: redrove 1 record, offsets 4..4\nredrove 1 record; none still not decodable\n');
  await exact('after the repair');
  worker.kill('SIGTERM');
});

test('redrive into an upsert sink: a redriven old record never overwrites a newer one of its key (offset timestamps); verify --job exact', async (t) => {
  const { config, session, registry, subject, v2, id1, late, t1, t2, file } = await itemsJob(t, 1, 'latest.json', { name: 'latest_items', table: 'latest', mode: 'upsert', key: ['id'] });
  // Key 1: an old record of the late schema, then a newer one of the known schema. Key 2: only the late one.
  const known = (id: bigint, page: string) => withWireHeader(id1, encodeAvro(t1!, { id, page }));
  const lateRecord = (id: bigint, page: string) => withWireHeader(late, encodeAvro(t2!, { id, page, channel: 'app' }));
  await produceRecords(config, [
    { key: '1', value: lateRecord(1n, '/old'), partition: 0 },
    { key: '1', value: known(1n, '/new'), partition: 0 },
    { key: '2', value: lateRecord(2n, '/only'), partition: 0 },
  ]);
  const worker = startCli(t, ['sink', ...conn(config), '--config', file], REGISTRY_ENV);
  const rows = async () =>
    (await session.execute(`SELECT id, page, channel, writetime(page) AS wt FROM ${config.keyspace}.latest`)).rows
      .map((r) => ({ id: String(r['id']), page: r['page'] as string, channel: r['channel'] as string | null, wt: String(r['wt']) }))
      .sort((a, b) => a.id.localeCompare(b.id));
  const quarantined = async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.job_quarantine WHERE job = 'latest_items' AND partition = 0`)).rows.map((r) => String(r['offset'])).sort();
  await waitFor(async () => ((await quarantined()).length === 2 && (await rows()).length === 1 ? true : undefined), { timeoutMs: 180_000, message: 'offsets 0 and 2 quarantined, key 1 stored from offset 1' }).catch((e: unknown) => {
    throw new Error(`${String(e)}; the worker said:\n${worker.output().slice(-3000)}`);
  });
  assert.deepEqual(await rows(), [{ id: '1', page: '/new', channel: null, wt: '1' }]);
  assert.equal(await registry.register(subject, 'AVRO', JSON.stringify(v2)), late, 'the registry handed out the next id (no other registration meanwhile)');

  const r = await runCli(['quarantine', 'redrive', ...conn(config), '--job', file], REGISTRY_ENV);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'partition 0: redrove 2 records, offsets 0..2\nredrove 2 records; none still not decodable\n');
  assert.deepEqual(await rows(), [
    { id: '1', page: '/new', channel: null, wt: '1' },
    { id: '2', page: '/only', channel: 'app', wt: '2' },
  ]);
  assert.deepEqual(await quarantined(), []);
  const v = await runCli(['verify', ...conn(config), '--job', file, '--full', '--no-record', '--json'], REGISTRY_ENV);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const totals = (JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number } }).totals;
  assert.deepEqual([totals.records, totals.stored, totals.quarantined], [3, 3, 0]);
  worker.kill('SIGTERM');
});
