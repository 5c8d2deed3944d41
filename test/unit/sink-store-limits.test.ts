// What Cassandra would refuse is quarantined before it is written (src/jobs/sink/store-limits.ts), and an
// upsert key has one spelling (src/jobs/sink/key-encoding.ts): each with its exact reason.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { MAX_KEY_BYTES, MAX_ROW_BYTES } from '../../src/jobs/sink/store-limits.js';

const rec = (key: string | Buffer | null, value: string | null, partition = 0, offset = 0n): SourceRecord => ({
  topic: 't',
  partition,
  offset,
  key: key === null ? null : Buffer.isBuffer(key) ? key : Buffer.from(key),
  value: value === null ? null : Buffer.from(value),
  timestampMs: 0,
});
const reason = (codec: SinkCodec, r: SourceRecord) => {
  const d = codec.decode(r);
  return d.ok ? d.value.kind : d.reason;
};

const textKey = new SinkCodec(sinkConfig({ topic: 't', table: 'kv', mode: 'upsert', key: ['k'], columns: { k: 'text', v: 'text' } }));

test('a text key over 65,535 bytes is key_too_large; at the limit it is a row; an empty key is empty_key (a tombstone too)', () => {
  const big = 'x'.repeat(70_000);
  const d = textKey.decode(rec(big, JSON.stringify({ k: big, v: 'a' })));
  assert.deepEqual(d, { ok: false, reason: 'key_too_large', detail: "k: the key is 70000 bytes, above Cassandra's 65535-byte partition key limit" });
  assert.equal(reason(textKey, rec(big, null)), 'key_too_large');
  // UTF-8 bytes count, not characters: 32,768 × 'é' is 65,536 bytes.
  assert.equal(reason(textKey, rec('é'.repeat(32_768), JSON.stringify({ k: 'é'.repeat(32_768), v: 'a' }))), 'key_too_large');
  const edge = 'y'.repeat(MAX_KEY_BYTES);
  assert.equal(reason(textKey, rec(edge, JSON.stringify({ k: edge, v: 'a' }))), 'row');
  assert.equal(reason(textKey, rec('', JSON.stringify({ k: '', v: 'a' }))), 'empty_key');
  assert.equal(reason(textKey, rec('', null)), 'empty_key');
});

test('a composite key counts its serialized whole: 3 bytes per component besides the values', () => {
  const two = new SinkCodec(sinkConfig({ topic: 't', table: 'kv', mode: 'upsert', key: ['a', 'b'], columns: { a: 'text', b: 'text', v: 'text' } }));
  const key = (a: string, b: string) => JSON.stringify({ a, b });
  const a = 'a'.repeat(40_000);
  const fits = 'b'.repeat(MAX_KEY_BYTES - 40_000 - 6);
  assert.equal(reason(two, rec(key(a, fits), JSON.stringify({ a, b: fits, v: '' }))), 'row');
  const over = `${fits}b`;
  const d = two.decode(rec(key(a, over), JSON.stringify({ a, b: over, v: '' })));
  assert.deepEqual(d, { ok: false, reason: 'key_too_large', detail: "the key (a, b) is 65536 bytes serialized (a 40000, b 25530), above Cassandra's 65535-byte partition key limit" });
  // Empty components are allowed in a composite key (its serialized form is never empty).
  assert.equal(reason(two, rec(key('', ''), JSON.stringify({ a: '', b: '', v: '' }))), 'row');
});

test('a row whose values as bound pass the mutation bound is value_too_large (log mode too); below it, a row', () => {
  const log = new SinkCodec(sinkConfig({ topic: 't', table: 'logs', mode: 'log', columns: { body: 'text', n: 'int' } }));
  const body = 'z'.repeat(MAX_ROW_BYTES);
  const d = log.decode(rec(null, JSON.stringify({ body, n: 1 })));
  assert.deepEqual(d, { ok: false, reason: 'value_too_large', detail: `the row is ${MAX_ROW_BYTES + 12} bytes (body: ${MAX_ROW_BYTES}), above the ${MAX_ROW_BYTES} a sink writes (Cassandra refuses a mutation over max_mutation_size, 16 MiB by default)` });
  const ok = log.decode(rec(null, JSON.stringify({ body: body.slice(12), n: 1 })));
  assert.deepEqual(ok.ok && ok.value.kind === 'row' ? ok.value.bytes : null, MAX_ROW_BYTES);
  // A record far smaller than its row: each 2-byte `0,` of a list<bigint> binds 12 bytes, each 6-byte
  // decimal 1e1000 binds 10^1000 (416 bytes and a 4-byte scale).
  const longs = new SinkCodec(sinkConfig({ topic: 't', table: 'logs', mode: 'log', columns: { xs: 'list<bigint>' } }));
  const n = Math.ceil(MAX_ROW_BYTES / 12);
  const many = longs.decode(rec(null, `{"xs":[${'0,'.repeat(n - 1)}0]}`));
  assert.deepEqual(many.ok ? 'row' : [many.reason, many.detail], ['value_too_large', `the row is ${4 + 4 + n * 12} bytes (xs: ${4 + n * 12}), above the ${MAX_ROW_BYTES} a sink writes (Cassandra refuses a mutation over max_mutation_size, 16 MiB by default)`]);
  const dec = new SinkCodec(sinkConfig({ topic: 't', table: 'logs', mode: 'log', columns: { xs: 'list<decimal>' } }));
  const few = dec.decode(rec(null, `{"xs":[${Array.from({ length: 10 }, () => '1e1000').join(',')}]}`));
  assert.deepEqual(few.ok && few.value.kind === 'row' ? few.value.bytes : null, 4 + 4 + 10 * (4 + 4 + 416));
});

test('values past their type\'s range stay bad_value (int64, int32, a Date\'s ±8.64e15 ms)', () => {
  const c = new SinkCodec(sinkConfig({ topic: 't', table: 'x', mode: 'log', columns: { b: 'bigint', i: 'int', ts: 'timestamp' } }));
  assert.equal(reason(c, rec(null, '{"b": 9223372036854775808}')), 'bad_value');
  assert.equal(reason(c, rec(null, '{"i": 2147483648}')), 'bad_value');
  assert.equal(reason(c, rec(null, '{"ts": 8640000000000001}')), 'bad_value');
  assert.equal(reason(c, rec(null, '{"ts": "+275760-09-13T00:00:00.001Z"}')), 'bad_value');
  assert.equal(reason(c, rec(null, '{"b": 9223372036854775807, "i": -2147483648, "ts": -8640000000000000}')), 'row');
});

test('an upsert key has one spelling: "007", "+7", " 7", "\\"7\\"" and "7.0" for bigint 7 are non_canonical_key; "7" is the row', () => {
  const kv = new SinkCodec(sinkConfig({ topic: 't', table: 'kv', mode: 'upsert', key: ['id'], columns: { id: 'bigint', v: 'text' } }));
  const value = JSON.stringify({ id: 7, v: 'a' });
  assert.deepEqual(kv.decode(rec('007', value)), {
    ok: false,
    reason: 'non_canonical_key',
    detail: 'the record key "007" names the key "7", whose one accepted spelling is that (another spelling may place the key\'s records on another partition)',
  });
  assert.deepEqual(['007', ' 7', '"7"', '7 ', '-0'].map((k) => reason(kv, rec(k, k === '-0' ? JSON.stringify({ id: 0, v: 'a' }) : value))), Array(5).fill('non_canonical_key'));
  // Not a bigint at all: bad_key as before.
  assert.deepEqual(['+7', '7.0'].map((k) => reason(kv, rec(k, value))), ['bad_key', 'bad_key']);
  assert.equal(reason(kv, rec('7', value)), 'row');
  assert.equal(reason(kv, rec('007', null)), 'non_canonical_key');
  assert.equal(reason(kv, rec('7', null)), 'delete');
  assert.equal(reason(kv, rec('-9223372036854775808', JSON.stringify({ id: '-9223372036854775808', v: 'a' }))), 'row');
});

test('canonical spellings of the other key types: uuid lower case, timestamp epoch ms, decimal as written, boolean, int', () => {
  const one = (type: string) => new SinkCodec(sinkConfig({ topic: 't', table: 'kv', mode: 'upsert', key: ['k'], columns: { k: type, v: 'text' } }));
  const u = one('uuid');
  const id = 'abcdef01-2345-6789-abcd-ef0123456789';
  assert.deepEqual([reason(u, rec(id, JSON.stringify({ k: id }))), reason(u, rec(id.toUpperCase(), JSON.stringify({ k: id })))], ['row', 'non_canonical_key']);
  const ts = one('timestamp');
  assert.deepEqual([reason(ts, rec('1700000000000', '{"k": "2023-11-14T22:13:20Z"}')), reason(ts, rec('2023-11-14T22:13:20Z', '{"k": 1700000000000}'))], ['row', 'non_canonical_key']);
  const dec = one('decimal');
  assert.deepEqual(['1.50', '1.5', '01.50', '15E-1'].map((k) => reason(dec, rec(k, '{"k": 1.50}'))), ['row', 'key_mismatch', 'non_canonical_key', 'non_canonical_key']);
  const b = one('boolean');
  assert.deepEqual([reason(b, rec('true', '{"k": true}')), reason(b, rec(' true', '{"k": true}'))], ['row', 'non_canonical_key']);
  const i = one('int');
  assert.deepEqual([reason(i, rec('-12', '{"k": -12}')), reason(i, rec(' -12', '{"k": -12}'))], ['row', 'non_canonical_key']);
  // Text is its own spelling; bytes that are not UTF-8 are not a spelling of any text.
  const t = one('text');
  assert.equal(reason(t, rec(' a ', '{"k": " a "}')), 'row');
  assert.equal(reason(t, rec(Buffer.from([0xff]), '{"k": "\\ufffd"}')), 'non_canonical_key');
});

test('a composite key is the compact JSON object of its fields in key order, nested by field path', () => {
  const c = new SinkCodec(sinkConfig({ topic: 't', table: 'kv', mode: 'upsert', key: ['shop', 'id'], columns: { shop: { type: 'text', field: 'where.shop' }, id: 'bigint', v: 'text' } }));
  const value = JSON.stringify({ where: { shop: 's1' }, id: 7, v: 'a' });
  assert.equal(reason(c, rec('{"where":{"shop":"s1"},"id":7}', value)), 'row');
  assert.deepEqual(
    ['{"id":7,"where":{"shop":"s1"}}', '{"where": {"shop": "s1"}, "id": 7}', '{"where":{"shop":"s1"},"id":"7"}', '{"where":{"shop":"s1"},"id":7,"x":1}'].map((k) => reason(c, rec(k, value))),
    Array(4).fill('non_canonical_key'),
  );
});
