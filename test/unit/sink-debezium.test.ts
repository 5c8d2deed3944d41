// Issue 37 item 6 (the envelope): `envelope: debezium`. Change events shaped as Debezium 2.x writes them
// for Postgres and for MySQL, through Kafka Connect's JsonConverter with and without schemas: the row is
// `after` (upsert) and op d deletes the key; in log mode a delete's row is `before`. Bad envelopes are
// quarantined with their own reason, and the config refuses what cannot work.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { configProblem } from './sink-fakes.js';

const rec = (key: unknown, value: unknown, offset = 5n): SourceRecord => ({
  topic: 'pg.public.customers',
  partition: 0,
  offset,
  key: key === null ? null : Buffer.from(typeof key === 'string' ? key : JSON.stringify(key)),
  value: value === null ? null : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
  timestampMs: 0,
});

// As Debezium's Postgres connector writes a change (schemas.enable=false).
const pgSource = { version: '2.7.3.Final', connector: 'postgresql', name: 'pg', ts_ms: 1733480000000, snapshot: 'false', db: 'shop', sequence: '["24023928","24023928"]', schema: 'public', table: 'customers', txId: 771, lsn: 24023928, xmin: null };
const pg = (op: string, before: object | null, after: object | null) => ({ before, after, source: pgSource, op, ts_ms: 1733480000123, transaction: null });
// As its MySQL connector writes one.
const mysqlSource = { version: '2.7.3.Final', connector: 'mysql', name: 'my', ts_ms: 1733480000000, snapshot: 'false', db: 'shop', sequence: null, table: 'customers', server_id: 223344, gtid: null, file: 'mysql-bin.000003', pos: 154, row: 0, thread: 7, query: null };
const my = (op: string, before: object | null, after: object | null) => ({ before, after, source: mysqlSource, op, ts_ms: 1733480000456, transaction: null });
// With schemas.enable=true: { schema, payload }.
const withSchema = (payload: unknown) => ({ schema: { type: 'struct', name: 'pg.public.customers.Envelope', optional: false, fields: [] }, payload });

const upsert = sinkConfig({ topic: 'pg.public.customers', table: 'customers', mode: 'upsert', key: ['id'], envelope: 'debezium', columns: { id: 'bigint', email: 'text', city: 'text' } });
const log = sinkConfig({ topic: 'pg.public.customers', table: 'changes', mode: 'log', envelope: 'debezium', columns: { id: 'bigint', email: 'text', city: 'text' } });
const row = { id: 7, email: 'a@x', city: 'Oslo' };

test('upsert: c, r and u store after, d deletes the key, the tombstone after it deletes it again (Postgres and MySQL, with and without schemas)', () => {
  const codec = new SinkCodec(upsert);
  for (const [name, make] of [['postgres', pg], ['mysql', my]] as const) {
    for (const wrap of [(x: unknown) => x, withSchema]) {
      const key = wrap({ id: 7 });
      for (const op of ['c', 'r', 'u']) {
        const d = codec.decode(rec(key, wrap(make(op, op === 'u' ? { ...row, city: 'Rome' } : null, row))));
        assert.ok(d.ok && d.value.kind === 'row', `${name} ${op}`);
        assert.deepEqual(canonical(d.value.values), ['7', 'a@x', 'Oslo'], `${name} ${op}`);
        assert.deepEqual(canonical(d.value.key), ['7']);
      }
      const del = codec.decode(rec(key, wrap(make('d', row, null))));
      assert.deepEqual(del.ok && del.value, { kind: 'delete', key: del.ok ? del.value.key : [] }, `${name} d`);
      assert.deepEqual(canonical(del.ok ? del.value.key : null), ['7']);
      const tomb = codec.decode(rec(key, null));
      assert.ok(tomb.ok && tomb.value.kind === 'delete', `${name} tombstone`);
      assert.deepEqual(codec.expect(rec(key, wrap(make('d', row, null)))), { kind: 'delete', key: { id: del.ok ? del.value.key[0] : null } });
    }
  }
});

test('log: every change is a row, a delete from before; without before (Postgres without REPLICA IDENTITY FULL) it is quarantined', () => {
  const codec = new SinkCodec(log);
  const u = codec.decode(rec({ id: 7 }, my('u', { ...row, city: 'Rome' }, row)));
  assert.ok(u.ok && u.value.kind === 'row');
  assert.deepEqual(canonical(u.value.values), ['7', 'a@x', 'Oslo']);
  const d = codec.decode(rec({ id: 7 }, pg('d', { ...row, city: 'Rome' }, null)));
  assert.ok(d.ok && d.value.kind === 'row');
  assert.deepEqual(canonical(d.value.values), ['7', 'a@x', 'Rome']);
  assert.deepEqual(codec.decode(rec({ id: 7 }, pg('d', null, null))), { ok: false, reason: 'bad_envelope', detail: 'op d without before: a log-mode row needs the deleted row (Postgres: REPLICA IDENTITY FULL, or an upsert sink)' });
});

test('bad change events are quarantined with their own reason, and the records after them flow', () => {
  const codec = new SinkCodec(upsert);
  const reason = (key: unknown, value: unknown) => {
    const d = codec.decode(rec(key, value));
    return d.ok ? d.value.kind : `${d.reason}: ${d.detail}`;
  };
  const { op: _op, ...noOp } = pg('c', null, row);
  assert.equal(reason({ id: 7 }, noOp), 'bad_envelope: a change event without op (envelope: debezium reads { before, after, source, op, ts_ms })');
  assert.equal(reason({ id: 7 }, pg('u', row, null)), 'bad_envelope: op u without the row: after is null');
  assert.equal(reason({ id: 7 }, { ...pg('c', null, row), after: [1] }), 'bad_envelope: op c without the row: after is not an object');
  assert.equal(reason({ id: 7 }, pg('x', null, row)), 'bad_envelope: op "x" is none of c, u, r, d, t, m');
  assert.equal(reason({ id: 7 }, pg('t', null, null)), 'unsupported_op: op t (a truncate: no key to delete, and a sink does not empty its table)');
  assert.equal(reason({ id: 7 }, withSchema('not a change')), 'bad_envelope: the value under payload is not a change event (an object of before, after, source, op)');
  assert.equal(reason('7', pg('c', null, row)), 'bad_key: a Debezium record key is a JSON object of id (not a JSON object)');
  assert.equal(reason({ id: 'x' }, pg('c', null, row)), 'bad_key: record key: id (bigint, field id): expected a whole number (or a string of digits), got "x"');
  assert.equal(reason({ id: 8 }, pg('c', null, row)), 'key_mismatch: the record key names ["8"], the value ["7"]');
  assert.equal(reason({ id: 7 }, pg('c', null, row)), 'row', 'the next record flows');
});

test('the config: envelope takes debezium only, is a stored setting, and refuses columns derived from the envelope schema', () => {
  assert.equal(configProblem({ topic: 't', table: 'tb', mode: 'log', envelope: 'maxwell', columns: { a: 'int' } }), 's.yaml: envelope: expected debezium');
  assert.equal(configProblem({ topic: 't', table: 'tb', mode: 'log', envelop: 'debezium', columns: { a: 'int' } }), 's.yaml: envelop: unknown key (did you mean envelope?)');
  assert.match(String((() => { try { sinkConfig({ topic: 't', table: 'tb', mode: 'log', envelope: 'debezium', columns: { a: 'int' } }, 'd.yaml', true); return ''; } catch (e) { return (e as Error).message; } })()), /^d\.yaml: envelope: debezium needs its columns listed/);
  assert.equal(new SinkJob(upsert).settings['envelope'], 'debezium');
  assert.equal(new SinkJob(sinkConfig({ topic: 't', table: 'tb', mode: 'log', columns: { a: 'int' } })).settings['envelope'], undefined);
  assert.equal(typeof new SinkJob(upsert).audit.sample, 'function', 'change events are sampled (chaos --job)');
});

test("chaos --job's samples for a Debezium sink are change events the codec reads: rows, deletes by op d each followed by its tombstone, and the broken ones quarantined", async () => {
  const { sampleRecords } = await import('../../src/jobs/sink/sample.js');
  const config = sinkConfig({ topic: 'pg.public.customers', table: 'customers', mode: 'upsert', key: ['id'], envelope: 'debezium', version: 'source.lsn', columns: { id: 'bigint', email: 'text', city: 'text' } });
  const codec = new SinkCodec(config);
  const samples = [...sampleRecords(config, { seed: 7, count: 3000, badRatio: 0.02 })];
  assert.equal(samples.length, 3000);
  const kinds = samples.map((s, i) => {
    const d = codec.decode(rec(s.key, s.value, BigInt(i)));
    return d.ok ? (d.value.kind === 'skip' ? 'skip' : d.value.kind) : d.reason;
  });
  const count = (k: string) => kinds.filter((x) => x === k).length;
  assert.ok(count('row') > 2000 && count('delete') > 100 && count('bad_value') + count('missing_field') + count('key_mismatch') > 20, JSON.stringify(Object.fromEntries(new Set(kinds).entries())));
  // Every delete is followed by its tombstone (the last record may be a delete cut short), and tombstones follow deletes only.
  kinds.forEach((k, i) => {
    if (k === 'delete' && i + 1 < kinds.length) assert.equal(kinds[i + 1], 'skip', `record ${i + 1} after a delete`);
    if (k === 'skip') assert.equal(kinds[i - 1], 'delete', `record ${i - 1} before a tombstone`);
  });
  assert.equal(count('skip'), count('delete') - (kinds.at(-1) === 'delete' ? 1 : 0));
  // With a version of the row (after.rev), a delete reads it from before: deletes are sampled and stored too.
  const byRow = sinkConfig({ topic: 'pg.public.customers', table: 'customers', mode: 'upsert', key: ['id'], envelope: 'debezium', version: 'after.rev', columns: { id: 'bigint', email: 'text', rev: 'bigint' } });
  const rowCodec = new SinkCodec(byRow);
  const rowKinds = [...sampleRecords(byRow, { seed: 7, count: 2000, badRatio: 0 })].map((s, i) => {
    const d = rowCodec.decode(rec(s.key, s.value, BigInt(i)));
    return d.ok ? d.value.kind : d.reason;
  });
  assert.deepEqual([...new Set(rowKinds)].sort(), ['delete', 'row', 'skip']);
  // A change's version is its source.lsn.
  const first = samples.find((s) => s.value !== null && JSON.parse(s.value).op !== 'd')!;
  const d = codec.decode(rec(first.key, first.value));
  assert.ok(d.ok && d.value.kind === 'row');
  assert.equal(d.value.version, JSON.parse(first.value!).source.lsn);
});
