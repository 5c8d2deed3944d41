import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeCanonical, decodeEvent, decodeJson, encodeEvent, type Event } from '../../src/app/event.js';

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

test('the fast path for canonical text decodes exactly as the general JSON path, on valid and invalid values', () => {
  let x = 0x2545f4914f6cdd1dn;
  const next = () => (x = BigInt.asUintN(64, x * 6364136223846793005n + 1442695040888963407n));
  const pick = <T>(xs: readonly T[]): T => xs[Number(next() % BigInt(xs.length))]!;
  const ints = ['0', '-0', '1', '-1', '2', '3', '9223372036854775807', '9223372036854775808', '-9223372036854775808', '-9223372036854775809',
    '8640000000000000', '8640000000000001', '-8640000000000000', '-8640000000000001', '99999999999999999999999', '1700000000000'];
  const strings = ['"My Router"', '""', '"é \\"q\\" \\\\ \\/"', '"\\u0000\\u001f\\n\\t"', '"\\ud800"', '"\\ud83d\\ude00 😀"', '"\\x"', '"a\\u12"', '"tab\there"'];
  const texts: string[] = [];
  for (let i = 0; i < 5000; i++) {
    const id = next() % 3n === 0n ? String(BigInt.asIntN(64, next())) : pick(ints);
    texts.push(`{"id":${id},"ts":${pick(ints)},"source":${pick(strings)},"client":${pick(strings)},"health":${next() % 5n === 0n ? pick(ints) : pick(['0', '1', '2'])}}`);
  }
  // Near misses: not canonical, so the general path decides; both must still agree.
  texts.push('{"id":1,"ts":2,"source":"s","client":"c","health":2,"x":1}', '{ "id":1,"ts":2,"source":"s","client":"c","health":2}',
    '{"id":01,"ts":2,"source":"s","client":"c","health":2}', '{"id":1.0,"ts":2,"source":"s","client":"c","health":2}',
    '{"ts":2,"id":1,"source":"s","client":"c","health":2}', '{"id":1,"ts":2,"source":"s","client":"c","health":2}\n');
  let fast = 0;
  let fastValid = 0;
  for (const t of texts) {
    const general = decodeJson(t);
    assert.deepEqual(decodeEvent(b(t)), general, t);
    const f = decodeCanonical(t);
    if (f === undefined) continue;
    fast++;
    if (f.ok) fastValid++;
    assert.deepEqual(f, general, t);
  }
  // The fast path must really be taken, for valid and for invalid values.
  assert.ok(fastValid > 500 && fast - fastValid > 500, `fast path taken ${fast} times, ${fastValid} valid`);
  assert.notEqual(decodeCanonical(encodeEvent({ id: -1n, ts: 5, source: 'é "q"', client: '\u0000', health: 2 })), undefined);
});
