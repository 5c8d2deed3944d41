import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeEvent, encodeEvent, type Event } from '../../src/app/event.js';

const b = (s: string) => Buffer.from(s, 'utf8');
const valid = { id: 1, ts: 1700000000000, source: 'My Router', client: 'c', health: 2 };
const json = (o: Record<string, unknown>) => b(JSON.stringify(o));

test('a valid event decodes with every field', () => {
  assert.deepEqual(decodeEvent(json(valid)), {
    ok: true,
    value: { id: 1n, ts: 1700000000000, source: 'My Router', client: 'c', health: 2 },
  });
});

test('64-bit ids stay exact at and near the int64 limits', () => {
  for (const id of ['9223372036854775807', '-9223372036854775808', '9007199254740993', '-1234567890123456789']) {
    const r = decodeEvent(b(`{"id":${id},"ts":0,"source":"s","client":"c","health":0}`));
    assert.deepEqual(r, { ok: true, value: { id: BigInt(id), ts: 0, source: 's', client: 'c', health: 0 } });
  }
});

test('encode then decode gives the same event', () => {
  const e: Event = { id: -9223372036854775808n, ts: -5, source: 'é "q"', client: '\u0000x', health: 1 };
  assert.deepEqual(decodeEvent(b(encodeEvent(e))), { ok: true, value: e });
});

test('every malformed kind gets its reason', () => {
  const cases: Array<[Buffer | null, string, string]> = [
    [null, 'empty', 'the record has no value'],
    [b(''), 'empty', 'the record has no value'],
    [Buffer.alloc(65537, 0x20), 'too_large', '65537 bytes, limit 65536'],
    [Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), 'not_utf8', 'the value is not valid UTF-8'],
    [b('{"id":1,'), 'invalid_json', ''],
    [b('[1,2]'), 'not_object', 'the JSON value is not an object'],
    [b('42'), 'not_object', 'the JSON value is not an object'],
    [b('"str"'), 'not_object', 'the JSON value is not an object'],
    [json({ ...valid, client: undefined }), 'missing_field', 'client'],
    [json({ ...valid, source: null }), 'null_value', 'source'],
    [json({ ...valid, id: '1' }), 'wrong_type', 'id: expected an integer'],
    [json({ ...valid, id: 1.5 }), 'wrong_type', 'id: expected an integer'],
    [b('{"id":1e3,"ts":0,"source":"s","client":"c","health":0}'), 'wrong_type', 'id: expected an integer'],
    [json({ ...valid, ts: 'now' }), 'wrong_type', 'ts: expected an integer (epoch ms)'],
    [json({ ...valid, source: 5 }), 'wrong_type', 'source: expected a string'],
    [json({ ...valid, client: true }), 'wrong_type', 'client: expected a string'],
    [json({ ...valid, health: '2' }), 'wrong_type', 'health: expected an integer'],
    [json({ ...valid, health: 3 }), 'invalid_health', 'health 3 is not 0, 1 or 2'],
    [json({ ...valid, health: -1 }), 'invalid_health', 'health -1 is not 0, 1 or 2'],
    [b('{"id":9223372036854775808,"ts":0,"source":"s","client":"c","health":0}'), 'id_out_of_range', 'id 9223372036854775808 is outside int64'],
    [b('{"id":-9223372036854775809,"ts":0,"source":"s","client":"c","health":0}'), 'id_out_of_range', 'id -9223372036854775809 is outside int64'],
    [b('{"id":1,"ts":8640000000000001,"source":"s","client":"c","health":0}'), 'ts_out_of_range', 'ts 8640000000000001 is outside ±8640000000000000'],
  ];
  for (const [value, reason, detail] of cases) {
    const r = decodeEvent(value);
    assert.equal(r.ok, false, `${value?.toString()} should not decode`);
    if (!r.ok) {
      assert.equal(r.reason, reason, `reason for ${value?.toString()}`);
      if (reason !== 'invalid_json') assert.equal(r.detail, detail);
      else assert.ok(r.detail.length > 0);
    }
  }
});

test('the size limit is inclusive', () => {
  const v = json(valid);
  assert.equal(decodeEvent(v, v.length).ok, true);
  assert.equal(decodeEvent(v, v.length - 1).ok, false);
});

test('extra fields are ignored', () => {
  assert.equal(decodeEvent(json({ ...valid, extra: [1, 2] })).ok, true);
});
