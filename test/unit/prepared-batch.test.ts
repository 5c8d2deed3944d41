// The hot path's batches (src/cassandra/prepared-batch.ts): the values and the whole request frame are
// byte for byte what the driver's own encoder and BatchRequest give for the same rows.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import cassandra from 'cassandra-driver';
import { insertRows, insertStatement } from '../../src/jobs/events/event-job.js';
import { decodeEvent, encodeEvent } from '../../src/jobs/events/event.js';
import { bucketOf, ORIGINAL_LAYOUT, parseLayout } from '../../src/jobs/events/events-layout.js';
import { columnWriter, int32, utf8, ValueCache, type ValueEncoder } from '../../src/cassandra/encode.js';
import { BatchRows } from '../../src/cassandra/batch-rows.js';
import { EncodedBatchRequest, type PreparedInfo } from '../../src/cassandra/prepared-batch.js';
import { toLong } from '../../src/cassandra/session.js';

const require = createRequire(import.meta.url);
type Enc = { encode(v: unknown, type: string): Buffer; protocolVersion: number };
const { Encoder } = cassandra as unknown as { Encoder: new (protocolVersion: number, options: object) => Enc };
const driver = new Encoder(4, {});
const enc = (v: unknown, type: string) => driver.encode(v, type);
const { BatchRequest } = require('cassandra-driver/lib/requests.js') as { BatchRequest: new (queries: unknown[], options: unknown) => { write(e: Enc, streamId: number): Buffer } };
const { DefaultExecutionOptions } = require('cassandra-driver/lib/execution-options.js') as { DefaultExecutionOptions: { create(o: object, client: unknown): any } };

/** The values of one row's entry in `rows` (after its kind, id and count), as buffers. */
function values(rows: BatchRows, idLength: number): Buffer[] {
  const out: Buffer[] = [];
  let at = 1 + 2 + idLength;
  const n = rows.buf.readUInt16BE(at);
  at += 2;
  for (let i = 0; i < n; i++) {
    const len = rows.buf.readInt32BE(at);
    out.push(rows.buf.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  return out;
}

test('int64, timestamp, int and text values equal the driver encoding, edges included', () => {
  const id = Buffer.alloc(16, 7);
  const int64s = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n, -(2n ** 32n) - 1n, 9007199254740993n, 1234567890123456789n];
  for (const v of int64s) {
    const rows = new BatchRows(id, 1, 1, 1); // room for less than a row: it grows
    rows.row();
    rows.int64(v);
    assert.deepEqual(values(rows, 16), [enc(toLong(v), 'bigint')], String(v));
  }
  const safe = [0, 1, -1, 4294967295, 4294967296, -4294967296, -4294967297, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1_700_000_000_123, -8_640_000_000_000_000];
  for (const v of safe) {
    const rows = new BatchRows(id, 2, 16, 1);
    rows.row();
    rows.int64FromNumber(v);
    rows.int32(v | 0);
    const expected = [enc(toLong(BigInt(v)), 'bigint'), enc(v | 0, 'int')];
    assert.deepEqual(values(rows, 16), expected, `int64 ${v}`);
    // A Date holds ±8.64e15 ms (the events' ts limit is far inside it): a timestamp is the same int64.
    if (Math.abs(v) <= 8.64e15) assert.deepEqual(values(rows, 16)[0], enc(new Date(v), 'timestamp'), `timestamp ${v}`);
  }
  for (const v of [0, 1, -1, 2, 2 ** 31 - 1, -(2 ** 31)]) assert.deepEqual(int32(v), enc(v, 'int'), `int ${v}`);
  for (const s of ['My Router', '', 'Routeur Düsseldorf ✓', 'Réseau 😀 Airmiles']) assert.deepEqual(utf8(s), enc(s, 'text'), s);
  const cache = new ValueCache<string>(utf8, 2);
  assert.equal(cache.get('x'), cache.get('x'));
  cache.get('y');
  cache.get('z'); // full: emptied first
  assert.deepEqual(cache.get('x'), utf8('x'));
});

const records = [0, 1, 2, 3].map((i) => {
  const value = Buffer.from(encodeEvent({ id: -(2n ** 63n) + BigInt(i), ts: 1_700_000_000_000 + i, source: i === 2 ? 'Réseau 😀 Airmiles' : 'Routeur Düsseldorf ✓', client: `c${i}`, health: (i % 3) as 0 | 1 | 2 }));
  const d = decodeEvent(value);
  assert.ok(d.ok);
  return { record: { topic: 't', partition: 4, offset: 2n ** 40n + BigInt(i), key: null, value, timestampMs: 0 }, value: d.value };
});

for (const [name, layout] of [['original', ORIGINAL_LAYOUT], ['bucketed', parseLayout('bucketed:1000')]] as const) {
  // 0x42 (DSE v2): 4-byte batch flags and the keyspace in the request.
  for (const version of [3, 4, 5, 0x42]) {
    test(`${name} layout, protocol v${version}: the request frame equals the driver's BatchRequest for the same rows`, () => {
      const { query, values: n } = insertStatement('ks', layout);
      const queryId = Buffer.from('0123456789abcdef');
      const meta = { columns: Array.from({ length: n }, () => ({ type: { code: 0 } })) };
      const bucket = layout.kind === 'original' ? undefined : bucketOf(layout, records[1]!.record.offset);
      const rows = new BatchRows(queryId, n, 8, 1);
      insertRows(rows, 4, records, 1, 4, bucket);
      assert.equal(rows.count, 3);
      // The driver's own request: one query item per row, each parameter encoded by the driver.
      const items = records.slice(1).map(({ record, value: e }) => ({
        query,
        queryId,
        meta,
        params: [
          enc(toLong(e.id), 'bigint'),
          enc(new Date(e.ts), 'timestamp'),
          enc(4, 'int'),
          enc(toLong(record.offset), 'bigint'),
          enc(e.source, 'text'),
          enc(e.client, 'text'),
          enc(e.health, 'int'),
          ...(bucket === undefined ? [] : [enc(toLong(bucket), 'bigint')]),
        ],
      }));
      const client = new cassandra.Client({ contactPoints: ['127.0.0.1'], localDataCenter: 'datacenter1' });
      for (const extra of [{}, { keyspace: 'ks', serialConsistency: cassandra.types.consistencies.localSerial }]) {
        const options = DefaultExecutionOptions.create({ prepare: true, logged: false, consistency: cassandra.types.consistencies.localQuorum, timestamp: toLong(1_700_000_000_000_123n), ...extra }, client);
        const encoder = new Encoder(version, {});
        const expected = new BatchRequest(items, options).write(encoder, 42);
        const info: PreparedInfo & { query: string } = { query, queryId, meta };
        const actual = new EncodedBatchRequest(info, options, rows).write(encoder, 42);
        assert.deepEqual(actual, expected, JSON.stringify(extra));
        // A retry sends the same frame.
        assert.deepEqual(new EncodedBatchRequest(info, options, rows).clone().write(encoder, 42), expected);
      }
    });
  }
}

test('insertRows stops after the row that brings the batch to its byte bound, and says where it stopped', () => {
  const queryId = Buffer.from('0123456789abcdef');
  const { values: n } = insertStatement('ks', ORIGINAL_LAYOUT);
  const all = new BatchRows(queryId, n, 8, 1);
  assert.equal(insertRows(all, 4, records, 0, 4), 4, 'no bound: every row');
  assert.equal(all.count, 4);
  // One entry's bytes (they differ by row: the sources' lengths differ).
  const one = new BatchRows(queryId, n, 8, 1);
  insertRows(one, 4, records, 0, 1);
  const bounded = new BatchRows(queryId, n, 8, 1);
  // A bound inside the second row: the second row is written, the third is not.
  assert.equal(insertRows(bounded, 4, records, 0, 4, undefined, one.at + 1), 2);
  assert.equal(bounded.count, 2);
  assert.deepEqual(bounded.buf.subarray(0, bounded.at), all.buf.subarray(0, bounded.at), 'the same entries as the unbounded batch');
  // The next batch goes on from there.
  const rest = new BatchRows(queryId, n, 8, 1);
  assert.equal(insertRows(rest, 4, records, 2, 4, undefined, one.at + 1), 4);
  assert.deepEqual(Buffer.concat([bounded.buf.subarray(0, bounded.at), rest.buf.subarray(0, rest.at)]), all.buf.subarray(0, all.at));
});

test('columnWriter: every column type the sink maps, null and unset give the driver encoding of the value', () => {
  const dataTypes = cassandra.types.dataTypes as unknown as { getByName(name: string): { code: number; info?: unknown } };
  // The sessions' encoding options (src/cassandra/session.ts): a set<T> is a JavaScript Set.
  const sessionEncoder = new Encoder(4, { encoding: { set: Set } });
  const samples: Array<[string, unknown[]]> = [
    ['text', ['', 'a', 'Routeur Düsseldorf ✓', 'Réseau 😀', 'x'.repeat(5000), 'y'.repeat(64), 'z'.repeat(65), `${'a'.repeat(63)}é`, '\u0000\u007f\u0080', '\ud800']],
    ['ascii', ['plain']],
    ['int', [0, -1, 2 ** 31 - 1, -(2 ** 31), '7']],
    ['smallint', [0, -32768, 32767]],
    ['tinyint', [0, -128, 127]],
    ['bigint', [0n, -1n, 2n ** 63n - 1n, -(2n ** 63n)].map(toLong).concat([cassandra.types.Long.fromString('-42')])],
    ['counter', [toLong(5n)]],
    ['timestamp', [new Date(0), new Date(1_700_000_000_123), new Date(-8.64e15), new Date(8.64e15), toLong(12345n)]],
    ['double', [0, -0, 1.5, -1e308, Number.MIN_VALUE]],
    ['float', [0, 1.5, -3.25]],
    ['boolean', [true, false]],
    ['uuid', [cassandra.types.Uuid.fromString('0b7e2a4c-2f34-4f6f-8f57-3d2f1c9a6b10')]],
    ['timeuuid', [cassandra.types.TimeUuid.fromString('e3b0c442-98fc-11ef-8000-000000000001')]],
    ['blob', [Buffer.from([0, 1, 255]), Buffer.alloc(0)]],
    ['decimal', [cassandra.types.BigDecimal.fromString('-123.4500'), cassandra.types.BigDecimal.fromString('1e1000')]],
    ['varint', [cassandra.types.Integer.fromString('123456789012345678901234567890')]],
    ['inet', [cassandra.types.InetAddress.fromString('10.0.0.1'), cassandra.types.InetAddress.fromString('::1')]],
    ['date', [new cassandra.types.LocalDate(2024, 6, 1)]],
    ['time', [cassandra.types.LocalTime.fromString('12:34:56.789')]],
    ['list<text>', [['a', 'b'], []]],
    ['set<int>', [new Set([1, 2, 3])]],
    ['map<text, int>', [{ a: 1, b: 2 }]],
  ];
  for (const [name, values] of samples) {
    const type = dataTypes.getByName(name);
    const write = columnWriter(type, sessionEncoder as unknown as ValueEncoder);
    for (const v of [...values, null, undefined, cassandra.types.unset]) {
      const rows = new BatchRows(Buffer.alloc(4), 1, 1, 1);
      rows.row();
      write(rows, v);
      const expected = sessionEncoder.encode(v === undefined ? null : v, type as never) as unknown;
      const got = rows.buf.subarray(1 + 2 + 4 + 2, rows.at);
      const len = got.readInt32BE(0);
      if (expected === null) assert.equal(len, -1, `${name} null`);
      else if (expected === cassandra.types.unset) assert.equal(len, -2, `${name} unset`);
      else assert.deepEqual(got.subarray(4), expected, `${name} ${String(v)}`);
      assert.equal(got.length, 4 + Math.max(0, len), `${name}: nothing after the value`);
    }
  }
});

test('a batch of rows of two statements (an upsert and a delete of one key) is the driver BatchRequest of the same items', () => {
  const insert = { query: 'INSERT INTO ks.t (k, v) VALUES (?, ?) USING TIMESTAMP ?', queryId: Buffer.from('aaaaaaaaaaaaaaaa'), meta: { columns: [{ type: { code: 0x0d } }, { type: { code: 0x09 } }, { type: { code: 0x02 } }] } };
  const del = { query: 'DELETE FROM ks.t USING TIMESTAMP ? WHERE k = ?', queryId: Buffer.from('bbbbbbbbbb'), meta: { columns: [{ type: { code: 0x02 } }, { type: { code: 0x0d } }] } };
  const w = (m: { columns: Array<{ type: { code: number } }> }) => m.columns.map((c) => columnWriter(c.type, driver as unknown as ValueEncoder));
  const [wi, wd] = [w(insert.meta), w(del.meta)];
  const rows = new BatchRows(insert.queryId, 3, 8, 1);
  rows.row();
  wi[0]!(rows, 'key');
  wi[1]!(rows, cassandra.types.unset);
  wi[2]!(rows, toLong(7n));
  rows.rowOf(del.queryId, 2);
  wd[0]!(rows, toLong(9n));
  wd[1]!(rows, 'key');
  const items = [
    { ...insert, params: [enc('key', 'text'), cassandra.types.unset, enc(toLong(7n), 'bigint')] },
    { ...del, params: [enc(toLong(9n), 'bigint'), enc('key', 'text')] },
  ];
  const client = new cassandra.Client({ contactPoints: ['127.0.0.1'], localDataCenter: 'datacenter1' });
  const options = DefaultExecutionOptions.create({ prepare: true, logged: false, consistency: cassandra.types.consistencies.localQuorum }, client);
  const expected = new BatchRequest(items, options).write(driver, 3);
  const actual = new EncodedBatchRequest({ ...insert }, options, rows).write(driver, 3);
  assert.deepEqual(actual, expected);
});
