// The hand-encoded parameters of the hot path give exactly the bytes the driver's own encoder gives.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import cassandra from 'cassandra-driver';
import { int32, utf8, ValueCache, ValueWriter } from '../../src/cassandra/encode.js';
import { toLong } from '../../src/cassandra/session.js';
import { insertQueries } from '../../src/app/event-job.js';
import { decodeEvent, encodeEvent } from '../../src/app/event.js';

/** The driver's own encoder (exported, though its typings leave it out). */
const driver = new (cassandra as unknown as { Encoder: new (protocolVersion: number, options: object) => { encode(v: unknown, type: string): Buffer } }).Encoder(4, {});
const enc = (v: unknown, type: string) => driver.encode(v, type);

test('int64, timestamp, int and text values equal the driver encoding, edges included', () => {
  const int64s = [0n, 1n, -1n, 2n ** 63n - 1n, -(2n ** 63n), 2n ** 32n, -(2n ** 32n) - 1n, 9007199254740993n, 1234567890123456789n];
  const w = new ValueWriter(8 * int64s.length);
  for (const v of int64s) assert.deepEqual(w.int64(v), enc(toLong(v), 'bigint'), String(v));
  const safe = [0, 1, -1, 4294967295, 4294967296, -4294967296, -4294967297, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 1_700_000_000_123, -8_640_000_000_000_000];
  const n = new ValueWriter(16 * safe.length);
  for (const v of safe) {
    assert.deepEqual(n.int64FromNumber(v), enc(toLong(BigInt(v)), 'bigint'), `int64 ${v}`);
    // A Date holds ±8.64e15 ms (the events' ts limit is far inside it).
    if (Math.abs(v) <= 8.64e15) assert.deepEqual(n.timestamp(v), enc(new Date(v), 'timestamp'), `timestamp ${v}`);
  }
  for (const v of [0, 1, -1, 2, 2 ** 31 - 1, -(2 ** 31)]) assert.deepEqual(int32(v), enc(v, 'int'), `int ${v}`);
  for (const s of ['My Router', '', 'Routeur Düsseldorf ✓', 'Réseau 😀 Airmiles']) assert.deepEqual(utf8(s), enc(s, 'text'), s);
});

test('views of one shared buffer do not overlap; the cache hands out one buffer per value and stays bounded', () => {
  const w = new ValueWriter(24);
  const [a, b, c] = [w.int64(1n), w.timestamp(2), w.int64(3n)];
  assert.deepEqual([a, b, c].map((x) => enc(x, 'bigint')), [a, b, c]);
  assert.deepEqual([a, b, c].map((x) => Number(x.readBigInt64BE(0))), [1, 2, 3]);
  const cache = new ValueCache<string>(utf8, 2);
  assert.equal(cache.get('x'), cache.get('x'));
  cache.get('y');
  cache.get('z'); // full: emptied first
  assert.deepEqual(cache.get('x'), utf8('x'));
});

test('insertQueries: each row the values the driver would encode from the record', () => {
  const records = [0, 1, 2].map((i) => {
    const value = Buffer.from(encodeEvent({ id: -(2n ** 63n) + BigInt(i), ts: 1_700_000_000_000 + i, source: 'Routeur Düsseldorf ✓', client: `c${i}`, health: 2 }));
    const d = decodeEvent(value);
    assert.ok(d.ok);
    return { record: { topic: 't', partition: 4, offset: 2n ** 40n + BigInt(i), key: null, value, timestampMs: 0 }, value: d.value };
  });
  const q = insertQueries('INSERT …', 4, records, 1, 3);
  assert.equal(q.length, 2);
  q.forEach(({ query, params }, k) => {
    const { record, value: e } = records[k + 1]!;
    assert.equal(query, 'INSERT …');
    assert.deepEqual(params, [
      enc(toLong(e.id), 'bigint'),
      enc(new Date(e.ts), 'timestamp'),
      enc(4, 'int'),
      enc(toLong(record.offset), 'bigint'),
      enc(e.source, 'text'),
      enc(e.client, 'text'),
      enc(e.health, 'int'),
    ]);
  });
});
