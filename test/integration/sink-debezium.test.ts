// Issue 37 item 6 (the envelope) against the stack: an upsert sink with `envelope: debezium` over change
// events shaped as Debezium writes them for Postgres (schemas off) and MySQL (schemas on, under
// { schema, payload }), keyed as Debezium keys them: inserts, snapshot reads, updates, a delete and its
// tombstone, a key that comes back; a change without op and a truncate are quarantined with their
// reasons and the records after them flow; verify --job proves the table.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, sinkYamlHead, startSinkJob, totalsLike, verifyPasses, waitSinkDrained } from '../helpers.js';

const pgSource = { version: '2.7.3.Final', connector: 'postgresql', name: 'pg', ts_ms: 1733480000000, snapshot: 'false', db: 'shop', schema: 'public', table: 'customers', txId: 771, lsn: 24023928, xmin: null };
/** The customers table's upsert sink over change events (`extra`: more config lines). */
const customersSink = (t: TestContext, config: ConnectionConfig, extra: string[] = []) =>
  sinkConfigFile(t, 'customers.yaml', [...sinkYamlHead(config, 'customers', 'upsert'), 'key: [id]', 'envelope: debezium', ...extra, 'columns:', '  id: bigint', '  email: text', '  city: text']);
type Row = { id: number; email: string; city: string };
const mysqlSource = { version: '2.7.3.Final', connector: 'mysql', name: 'my', ts_ms: 1733480000000, snapshot: 'false', db: 'shop', table: 'customers', server_id: 223344, gtid: null, file: 'mysql-bin.000003', pos: 154, row: 0, thread: 7 };

test('envelope: debezium: the table holds each key\'s latest row from Postgres- and MySQL-shaped change events; deletes delete; bad changes are quarantined; verify --job exact', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const file = customersSink(t, config);
  const producer = await connectedProducer(t, config);
  const pg = (op: string, before: Row | null, after: Row | null) => ({ before, after, source: pgSource, op, ts_ms: 1733480000123, transaction: null });
  const my = (op: string, before: Row | null, after: Row | null) => ({ schema: { type: 'struct', name: 'my.shop.customers.Envelope', optional: false, fields: [] }, payload: { before, after, source: mysqlSource, op, ts_ms: 1733480000456, transaction: null } });
  const myKey = (id: number) => ({ schema: { type: 'struct', name: 'my.shop.customers.Key', optional: false, fields: [{ type: 'int64', optional: false, field: 'id' }] }, payload: { id } });
  const send = (records: Array<[unknown, unknown]>) => producer.send(config.topic, records.map(([key, value]) => ({ key: JSON.stringify(key), value: value === null ? null : JSON.stringify(value) })));
  const r = (id: number, email: string, city: string): Row => ({ id, email, city });
  await send([
    [{ id: 1 }, pg('r', null, r(1, 'a@x', 'Oslo'))],
    [{ id: 2 }, pg('c', null, r(2, 'b@x', 'Rome'))],
    [{ id: 1 }, pg('u', r(1, 'a@x', 'Oslo'), r(1, 'a@x', 'Bergen'))],
    [{ id: 2 }, pg('d', r(2, 'b@x', 'Rome'), null)],
    [{ id: 2 }, null], // Debezium's tombstone after a delete
    [{ id: 3 }, { ...pg('c', null, r(3, 'c@x', 'Lima')), op: undefined }], // no op: quarantined
    [myKey(4), my('c', null, r(4, 'd@x', 'Kyiv'))],
    [myKey(4), my('u', r(4, 'd@x', 'Kyiv'), r(4, 'e@x', 'Kyiv'))],
    [myKey(5), my('t', null, null)], // a truncate: quarantined
    [myKey(5), my('c', null, r(5, 'f@x', 'Baku'))],
  ]);
  const { args } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin);
  // Key 2 comes back after its delete.
  await send([[{ id: 2 }, pg('c', null, r(2, 'g@x', 'Pisa'))]]);
  await waitSinkDrained(session, config, admin);

  const rows = await session.execute(`SELECT id, email, city FROM ${config.keyspace}.customers`);
  assert.deepEqual(Object.fromEntries(rows.rows.map((x) => [String(x['id']), [x['email'], x['city']]])), {
    '1': ['a@x', 'Bergen'],
    '2': ['g@x', 'Pisa'],
    '4': ['e@x', 'Kyiv'],
    '5': ['f@x', 'Baku'],
  });
  const q = await session.execute(`SELECT reason, detail FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(q.rows.map((x) => `${x['reason']}: ${x['detail']}`).sort(), [
    'bad_envelope: a change event without op (envelope: debezium reads { before, after, source, op, ts_ms })',
    'unsupported_op: op t (a truncate: no key to delete, and a sink does not empty its table)',
  ]);
  const expected = { records: 11, quarantined: 2, missing: 0, mismatched: 0, extra: 0 };
  assert.deepEqual(totalsLike((await verifyPasses(args)).totals, expected), expected);
  // A row the change events do not give is caught: key 2 back at its deleted value.
  const wt = (await session.execute(`SELECT WRITETIME(city) AS wt FROM ${config.keyspace}.customers WHERE id = 2`)).rows[0]!['wt'];
  await session.execute(`UPDATE ${config.keyspace}.customers USING TIMESTAMP ? SET city = 'Rome' WHERE id = 2`, [wt], { prepare: true });
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
});

// Issue 37 item 6 (version ordering): Postgres change events ordered by their log position (version:
// source.lsn), a key's events on two partitions (as after the topic gained one) and older changes
// arriving later: the row is the change with the highest LSN, a delete holds against an older insert
// read after it, the tombstone after a delete writes nothing, and a change without an LSN is
// quarantined (bad_version).
test('envelope: debezium with version: source.lsn: the change with the highest LSN wins across partitions and arrival order; verify --job exact', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const file = customersSink(t, config, ['version: source.lsn']);
  const producer = await connectedProducer(t, config);
  const pg = (op: string, lsn: number | undefined, before: Row | null, after: Row | null) => ({ before, after, source: { ...pgSource, lsn }, op, ts_ms: 1733480000123, transaction: null });
  const r = (id: number, email: string, city: string): Row => ({ id, email, city });
  const send = (partition: number, records: Array<[number, unknown]>) =>
    producer.send(config.topic, records.map(([id, value]) => ({ key: JSON.stringify({ id }), value: value === null ? null : JSON.stringify(value), partition })));
  await send(0, [
    [1, pg('c', 100, null, r(1, 'a@x', 'Oslo'))],
    [1, pg('u', 300, r(1, 'a@x', 'Rome'), r(1, 'a@x', 'Bergen'))],
    [2, pg('c', 110, null, r(2, 'b@x', 'Rome'))],
  ]);
  await send(1, [
    [1, pg('u', 200, r(1, 'a@x', 'Oslo'), r(1, 'a@x', 'Rome'))], // older than the 300 on partition 0
    [2, pg('d', 400, r(2, 'b@x', 'Rome'), null)],
    [2, null], // Debezium's tombstone after the delete: nothing to write
    [3, pg('c', 500, null, r(3, 'c@x', 'Lima'))],
    [3, pg('u', undefined, r(3, 'c@x', 'Lima'), r(3, 'c@x', 'Cusco'))], // no LSN: quarantined
  ]);
  await send(0, [[2, pg('r', 150, null, r(2, 'b@x', 'Rome'))]]); // a snapshot read older than the delete
  const { args } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin);

  const rows = await session.execute(`SELECT id, email, city, WRITETIME(city) AS wt FROM ${config.keyspace}.customers`);
  assert.deepEqual(Object.fromEntries(rows.rows.map((x) => [String(x['id']), [x['email'], x['city'], String(x['wt'])]])), {
    '1': ['a@x', 'Bergen', '300'],
    '3': ['c@x', 'Lima', '500'],
  });
  const q = await session.execute(`SELECT partition, offset, reason, detail FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(q.rows.map((x) => `${x['partition']}/${x['offset']} ${x['reason']}: ${x['detail']}`), ['1/4 bad_version: version source.lsn is missing']);
  const report = await verifyPasses(args);
  const expected = { records: 9, quarantined: 1, missing: 0, mismatched: 0, extra: 0 };
  assert.deepEqual(totalsLike(report.totals, expected), expected);
  assert.equal(report.partitions.reduce((n, p) => n + (p.skipped?.['tombstone'] ?? 0), 0), 1);
  // An older row written at the older change's LSN stays hidden by the delete; one written above the delete is caught.
  await session.execute(`INSERT INTO ${config.keyspace}.customers (id, email, city) VALUES (2, 'b@x', 'Rome') USING TIMESTAMP 150`);
  await verifyPasses(args);
  await session.execute(`INSERT INTO ${config.keyspace}.customers (id, email, city) VALUES (2, 'b@x', 'Rome') USING TIMESTAMP 450`);
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
  assert.match(forged.stderr, /customers key \{"id":"2"\}: a row, though its last record \(partition 1 offset 1\) deletes it/);
});
