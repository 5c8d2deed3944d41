import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExactlyOnceError } from '../../src/errors.js';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { createTableCql } from '../../src/jobs/sink/sink-table.js';

const orders = sinkConfig({
  topic: 'shop.orders',
  table: 'orders',
  mode: 'upsert',
  key: ['order_id'],
  columns: {
    order_id: { type: 'bigint', field: 'id' },
    customer: { type: 'text', required: true },
    status: { type: 'text', default: 'placed' },
    city: { type: 'text', field: 'address.city' },
    total: 'decimal',
  },
});

const rec = (value: string | null, key: string | null = '9007199254740993', offset = 7n): SourceRecord => ({
  topic: 'shop.orders',
  partition: 1,
  offset,
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
  timestampMs: 0,
});

test('upsert: a record becomes its key and row, exact int64 key, nested field, default', () => {
  const e = new SinkCodec(orders).expect(rec('{"id": 9007199254740993, "customer": "ann", "address": {"city": "Oslo"}, "total": 10.50}'));
  assert.deepEqual(canonical(e), { kind: 'row', key: { order_id: '9007199254740993' }, row: { city: 'Oslo', customer: 'ann', status: 'placed', total: '10.50' } });
});

test('upsert: a tombstone deletes its key; the record key must be there and name the value\'s key', () => {
  const codec = new SinkCodec(orders);
  assert.deepEqual(canonical(codec.expect(rec(null))), { kind: 'delete', key: { order_id: '9007199254740993' } });
  assert.deepEqual(codec.expect(rec('{"id": 1, "customer": "a"}', null)), { kind: 'quarantine', reason: 'missing_key' });
  assert.deepEqual(codec.expect(rec('{"id": 2, "customer": "a"}', '1')), { kind: 'quarantine', reason: 'key_mismatch' });
  assert.deepEqual(codec.expect(rec(null, 'abc')), { kind: 'quarantine', reason: 'bad_key' });
});

test('required, types and JSON problems are quarantined with their reason and the column named', () => {
  const codec = new SinkCodec(orders);
  const d = codec.decode(rec('{"id": 9007199254740993, "total": 1}'));
  assert.deepEqual(d, { ok: false, reason: 'missing_field', detail: 'customer: field customer is required and missing' });
  const b = codec.decode(rec('{"id": 9007199254740993, "customer": "a", "total": "ten"}'));
  assert.ok(!b.ok && b.reason === 'bad_value' && b.detail.startsWith('total (decimal, field total): '), JSON.stringify(b));
  assert.equal((codec.decode(rec('{"id": 1,')) as { reason: string }).reason, 'bad_json');
  assert.equal((codec.decode(rec('[1]', '1')) as { reason: string }).reason, 'bad_json');
});

test('log mode: keyed by partition and offset; a tombstone is quarantined', () => {
  const log = sinkConfig({ topic: 't', table: 'clicks', mode: 'log', columns: { url: { type: 'text', required: true }, n: 'int' } });
  const codec = new SinkCodec(log);
  assert.deepEqual(canonical(codec.expect(rec('{"url": "/a"}', null, 12n))), { kind: 'row', key: { offset: '12', partition: 1 }, row: { n: null, url: '/a' } });
  assert.deepEqual(codec.expect(rec(null, null)), { kind: 'quarantine', reason: 'null_value' });
  assert.match(createTableCql(log, 'ks'), /CREATE TABLE IF NOT EXISTS ks\.clicks \(\n {4}partition int,\n {4}offset bigint,\n {4}url text,\n {4}n int,\n {4}PRIMARY KEY \(partition, offset\)\n\) WITH CLUSTERING ORDER BY \(offset DESC\);/);
});

test('config errors name every bad key', () => {
  const bad = (raw: unknown, message: RegExp) =>
    assert.throws(() => sinkConfig(raw, 'f.yaml'), (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_CONFIG_INVALID' && message.test(e.message));
  bad({ topic: 't', table: 'x', mode: 'upsert', columns: { a: 'text', b: 'int' } }, /^f\.yaml: key: mode upsert needs the key columns/);
  bad({ topic: 't', table: 'x', mode: 'upsert', key: ['a'], columns: { a: 'list<int>', b: 'int' } }, /key\.0: a is a list/);
  bad({ topic: 't', table: 'x', mode: 'log', columns: { offset: 'int' } }, /columns\.offset: the name is taken/);
  bad({ topic: 't', table: 'x', mode: 'log', columns: { a: { type: 'int', default: 'x' } }, extra: 1 }, /extra: unknown key; the keys are name, topic/);
  bad({ topic: 't', table: 'x', mode: 'log', columns: { a: { type: 'int', default: 'x' } } }, /columns\.a\.default: expected a whole number/);
  bad({ topic: 't', table: 'x', mode: 'merge', columns: { a: 'int' } }, /mode: /);
  bad({ topic: 't', table: 'x', mode: 'log', format: 'xml', columns: { a: 'int' } }, /^f\.yaml: format: expected one of json, avro, protobuf, json-schema/);
  bad({ topic: 't', table: 'x', mode: 'log' }, /columns: expected the columns \(only a Schema Registry format, avro, protobuf or json-schema, can derive them/);
  bad({ topic: 't', table: 'x', mode: 'log', format: 'avro' }, /columns: left out, they are derived from the registered schema/);
});

test('a sink of a registry format: its formats are settings (a JSON sink keeps the settings it always had), and it needs a registry', () => {
  const avro = sinkConfig({ topic: 't', table: 'x', mode: 'upsert', format: 'avro', keyFormat: 'avro', key: ['a'], columns: { a: 'bigint', b: 'text' } });
  const registry = { url: 'http://127.0.0.1:1/apis/ccompat/v7', username: undefined, password: undefined };
  const job = new SinkJob(avro, registry);
  assert.deepEqual([job.settings['format'], job.settings['keyFormat']], ['avro', 'avro']);
  assert.equal(job.lookup?.server, 'Schema Registry');
  assert.equal(new SinkJob(orders).lookup, undefined);
  assert.throws(() => new SinkJob(avro), /format avro needs a Schema Registry \(--schema-registry-url\)/);
});

test('the sink job: its settings name the mapping, its migration is the table', () => {
  const job = new SinkJob(orders);
  assert.equal(job.name, 'orders');
  assert.equal(job.topic, 'shop.orders');
  assert.deepEqual(Object.keys(job.settings), ['table', 'mode', 'key', 'columns']);
  assert.deepEqual(job.migrations.map((m) => [m.version, m.name]), [[1, 'orders']]);
  assert.match(job.migrations[0]!.cql, /PRIMARY KEY \(\(order_id\)\)/);
  assert.deepEqual(job.audit.keyColumns, ['order_id']);
  assert.deepEqual(job.audit.columns, ['customer', 'status', 'city', 'total']);
});
