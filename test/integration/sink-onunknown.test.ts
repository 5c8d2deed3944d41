// onUnknown against the real Schema Registry (issue 37 item 7): a sink whose columns were derived from
// v1 meets records of v2, which adds an optional field: with ignore (the default) the known columns are
// stored and exactlyonce_sink_unknown_fields_total{field} counts the field; verify --job judges with
// the columns stored with the job (the worker's) and exits 0 with exact totals, before and after
// `schema apply --job` adds the field's column. The job then keeps its columns while its worker runs;
// stopped, it moves them forward (src/jobs/sink/column-eras.ts): a worker started again is not refused, and
// stores the field from the log end at the move on, while records before it, read again, keep the v1 row.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { BROKERS, CASSANDRA, produceRecords, REGISTRY_ENV, registryTopic, runCli, startCli, waitFor } from '../helpers.js';
import { freePort } from '../pipeline.js';

test('onUnknown: ignore: v2 records stored with the v1 columns, the new field counted; verify --job exact; schema apply adds the column', async (t) => {
  const { config, session, registry, subject } = await registryTopic(t);
  const v1 = { type: 'record', name: 'Click', fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'channel', type: ['null', 'string'], default: null }] };
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-unknown-')), 'sink.json');
  writeFileSync(file, JSON.stringify({ name: 'clicks_unknown', topic: config.topic, format: 'avro', table: 'clicks', mode: 'log' }));
  const conn = ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', config.keyspace];
  const produce = (values: Buffer[]) => produceRecords(config, values.map((value) => ({ value })));
  const rows = async () => (await session.execute(`SELECT * FROM ${config.keyspace}.clicks WHERE partition = 0`)).rows.map((r) => canonical({ ...r }) as Record<string, unknown>).reverse();
  const verify = async () => {
    const v = await runCli(['verify', ...conn, '--job', file, '--no-record', '--json'], REGISTRY_ENV);
    assert.equal(v.code, 0, v.stdout + v.stderr);
    return (JSON.parse(v.stdout) as { totals: Record<string, number> }).totals;
  };

  const id1 = await registry.register(subject, 'AVRO', JSON.stringify(v1));
  const a1 = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(a1.code, 0, a1.stdout + a1.stderr);
  const port = await freePort();
  const worker = startCli(t, ['sink', ...conn, '--config', file, '--max-batch', '50', '--metrics-port', String(port)], REGISTRY_ENV);
  const t1 = avroType(JSON.stringify(v1));
  await produce([1, 2, 3].map((i) => withWireHeader(id1, encodeAvro(t1, { id: BigInt(i), page: `/p${i}` }))));
  await waitFor(async () => ((await rows()).length === 3 ? true : undefined), { timeoutMs: 180_000, message: 'three v1 rows' });

  const id2 = await registry.register(subject, 'AVRO', JSON.stringify(v2));
  const t2 = avroType(JSON.stringify(v2));
  await produce([withWireHeader(id2, encodeAvro(t2, { id: 4n, page: '/p4', channel: 'app' })), withWireHeader(id2, encodeAvro(t2, { id: 5n, page: '/p5', channel: null }))]);
  await waitFor(async () => ((await rows()).length === 5 ? true : undefined), { timeoutMs: 120_000, message: 'the v2 records stored too' });
  assert.deepEqual(
    (await rows()).map((r) => [r['offset'], r['id'], r['page'], 'channel' in r]),
    [['0', '1', '/p1', false], ['1', '2', '/p2', false], ['2', '3', '/p3', false], ['3', '4', '/p4', false], ['4', '5', '/p5', false]],
  );
  // Both v2 records carry the field (one null): each is counted, never dropped silently.
  await waitFor(
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const m = /^exactlyonce_sink_unknown_fields_total\{field="channel"\} (\S+)$/m.exec(text);
      return m !== null && Number(m[1]) >= 2 ? true : undefined;
    },
    { timeoutMs: 30_000, message: 'the unknown field counted' },
  );
  const q = await session.execute(`SELECT reason FROM ${config.keyspace}.job_quarantine`);
  assert.equal(q.rowLength, 0);

  const exact = { records: 5, stored: 5, quarantined: 0, missing: 0, extra: 0, mismatched: 0 };
  const pick = (x: Record<string, number>) => Object.fromEntries(Object.keys(exact).map((k) => [k, x[k]]));
  // The registry's latest (v2) would derive a column the worker has not: verify judges with the stored ones.
  assert.deepEqual(pick(await verify()), exact);

  // schema apply adds the column; the job keeps its columns while its worker runs (it would store
  // records past the switch without the new one), and says so.
  const a2 = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(a2.code, 2, a2.stdout + a2.stderr);
  assert.match(a2.stdout, /ADD channel text/);
  assert.match(a2.stderr, /^error EO_USAGE: job clicks_unknown has workers running \(partition 0 by [^)]+\): the columns channel were added to the table, but the job keeps its columns until its workers stop/m);
  const cols = await session.execute('SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [config.keyspace, 'clicks'], { prepare: true });
  assert.equal(cols.rows.find((r) => r['column_name'] === 'channel')?.['type'], 'text');
  const settings = async () => JSON.parse((await session.execute(`SELECT settings FROM ${config.keyspace}.job WHERE name = 'clicks_unknown'`)).first()!['settings'] as string) as Record<string, string>;
  assert.equal((await settings())['columnsFrom'], undefined);
  assert.equal((await settings())['columnsMoving'], undefined, 'the refused move leaves no mark');
  assert.deepEqual(pick(await verify()), exact);

  // Stopped, the worker lets the columns move forward from the log end on: a record produced while it
  // was stopped (offset 5, checkpoint 5) is below the switch and stored as the v1 columns store it;
  // one produced after the move (offset 6), with the channel.
  worker.kill('SIGTERM');
  await waitFor(() => (worker.exitCode !== null ? true : undefined), { timeoutMs: 60_000, message: 'the worker stops' });
  await produce([withWireHeader(id2, encodeAvro(t2, { id: 6n, page: '/p6', channel: 'tv' }))]);
  const a3 = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(a3.code, 0, a3.stdout + a3.stderr);
  assert.match(a3.stdout, /job clicks_unknown: stores channel from offsets 0@6 \(partition@offset, the log ends/);
  assert.equal((await settings())['columnsFrom'], '{"channel":{"0":"6"}}');
  const again4 = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(again4.code, 0, again4.stdout + again4.stderr);
  assert.doesNotMatch(again4.stdout, /stores|stay/, 'moved once');
  // A move interrupted after its mark: every worker refuses, naming it, until schema apply runs again.
  const moved = await settings();
  await session.execute(`UPDATE ${config.keyspace}.job SET settings = ? WHERE name = 'clicks_unknown'`, [JSON.stringify({ ...moved, columnsMoving: 'started 2026-12-06T21:00:00Z, adding channel' })]);
  const refused = await runCli(['sink', ...conn, '--config', file], REGISTRY_ENV);
  assert.equal(refused.code, 5, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /EO_JOB_CONFIG_MISMATCH: .*columnsMoving: the job has "started 2026-12-06T21:00:00Z, adding channel", this worker none/);
  const a5 = await runCli(['schema', 'apply', ...conn, '--job', file], REGISTRY_ENV);
  assert.equal(a5.code, 0, a5.stdout + a5.stderr);
  assert.deepEqual(await settings(), moved, 'the mark removed, the columns and their offsets as moved');
  const port2 = await freePort();
  const again = startCli(t, ['sink', ...conn, '--config', file, '--max-batch', '50', '--metrics-port', String(port2)], REGISTRY_ENV);
  await produce([withWireHeader(id2, encodeAvro(t2, { id: 7n, page: '/p7', channel: 'web' }))]);
  const seven = [['0', '1', '/p1', null], ['1', '2', '/p2', null], ['2', '3', '/p3', null], ['3', '4', '/p4', null], ['4', '5', '/p5', null], ['5', '6', '/p6', null], ['6', '7', '/p7', 'web']];
  const shown = async () => (await rows()).map((r) => [r['offset'], r['id'], r['page'], r['channel'] ?? null]);
  await waitFor(async () => ((await rows()).length === 7 ? true : undefined), { timeoutMs: 120_000, message: `the v2 record past the switch stored (worker: ${again.output().slice(-600)})` });
  assert.deepEqual(await shown(), seven);
  const exact7 = { ...exact, records: 7, stored: 7 };
  assert.deepEqual(pick(await verify()), exact7);

  // Read again from the start (a reset; a crash would do the same): the records before the switch are
  // written again as they were, without the channel they carry.
  const writetime = async () => (await session.execute(`SELECT writetime(page) AS w FROM ${config.keyspace}.clicks WHERE partition = 0 AND offset = 3`)).first()!['w'].toString() as string;
  const before = await writetime();
  const reset = await runCli(['checkpoints', 'reset', ...conn, '--job', file, '--all', '--to', 'earliest'], REGISTRY_ENV);
  assert.equal(reset.code, 0, reset.stdout + reset.stderr);
  await waitFor(async () => (BigInt(await writetime()) > BigInt(before) ? true : undefined), { timeoutMs: 120_000, message: 'offset 3 written again' });
  await waitFor(async () => ((await session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = 'clicks_unknown' AND topic = ? AND partition = 0`, [config.topic])).first()?.['next_offset'].toString() === '7' ? true : undefined), { timeoutMs: 120_000, message: 'the checkpoint back at 7' });
  assert.deepEqual(await shown(), seven);
  assert.deepEqual(pick(await verify()), exact7);
});
