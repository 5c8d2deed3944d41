import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeCanonical, decodeEvent, decodeJson, encodeEvent, MAX_CLIENT_BYTES, MAX_SOURCE_BYTES, type Event } from '../../src/jobs/events/event.js';

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
    [b('{"id":1,"ts":0,"source":"\\ud800","client":"c","health":2}'), 'invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)'],
    [b('{"id":1,"ts":0,"source":"\\udfff","client":"c","health":2}'), 'invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)'],
    [b('{"id":1,"ts":0,"source":"My Router \\ud83d","client":"c","health":2}'), 'invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)'],
    [b('{"id":1,"ts":0,"source":"\\ude00\\ud83d","client":"c","health":2}'), 'invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)'],
    [b('{"id":1,"ts":0,"source":"s","client":"x\\udbff","health":2}'), 'invalid_unicode', 'client: a lone surrogate (not well-formed Unicode)'],
    [b('{"id":1,"ts":0,"source":"\\ud800","client":"c","health":2, "x":1}'), 'invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)'],
    [json({ ...valid, source: '' }), 'empty_source', 'source is empty'],
    [b('{ "id":1,"ts":0,"source":"","client":"c","health":2}'), 'empty_source', 'source is empty'],
    [json({ ...valid, source: 'a'.repeat(MAX_SOURCE_BYTES + 1) }), 'field_too_long', 'source: 1025 bytes in UTF-8, limit 1024'],
    [json({ ...valid, source: 'é'.repeat(MAX_SOURCE_BYTES / 2) + 'a' }), 'field_too_long', 'source: 1025 bytes in UTF-8, limit 1024'],
    [json({ ...valid, source: '€'.repeat(342) }), 'field_too_long', 'source: 1026 bytes in UTF-8, limit 1024'],
    [json({ ...valid, source: '😀'.repeat(256) + 'a' }), 'field_too_long', 'source: 1025 bytes in UTF-8, limit 1024'],
    [json({ ...valid, client: 'c'.repeat(MAX_CLIENT_BYTES + 1) }), 'field_too_long', 'client: 4097 bytes in UTF-8, limit 4096'],
    [json({ ...valid, client: '€'.repeat(1366) }), 'field_too_long', 'client: 4098 bytes in UTF-8, limit 4096'],
    // Which fault decides: the fields in order, each field's checks in order.
    [json({ ...valid, source: '', client: 'c'.repeat(MAX_CLIENT_BYTES + 1) }), 'empty_source', 'source is empty'],
    [b('{"id":1,"ts":0,"source":"","client":"\\ud800","health":2}'), 'empty_source', 'source is empty'],
    [b('{"id":1,"ts":0,"source":"s","client":"\\ud800","health":7}'), 'invalid_unicode', 'client: a lone surrogate (not well-formed Unicode)'],
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

test('well-formed strings at the limits decode: surrogate pairs, an empty client, exactly the limit in UTF-8 bytes', () => {
  const ok = (source: string, client = 'c') => {
    const r = decodeEvent(b(encodeEvent({ id: 1n, ts: 0, source, client, health: 2 })));
    assert.deepEqual(r, { ok: true, value: { id: 1n, ts: 0, source, client, health: 2 } }, `${source.slice(0, 20)} (${source.length} units)`);
  };
  ok('😀 \u{10ffff}');
  ok('s', '');
  ok('a'.repeat(MAX_SOURCE_BYTES));
  ok('é'.repeat(MAX_SOURCE_BYTES / 2));
  ok('€'.repeat(341) + 'a');
  ok('😀'.repeat(MAX_SOURCE_BYTES / 4));
  ok('s', 'c'.repeat(MAX_CLIENT_BYTES));
  ok('s', '😀'.repeat(MAX_CLIENT_BYTES / 4));
  // The escaped pair is one character; escapes are measured decoded, not as text.
  assert.equal(decodeEvent(b('{"id":1,"ts":0,"source":"\\ud83d\\ude00","client":"c","health":2}')).ok, true);
  assert.equal(decodeEvent(b(`{"id":1,"ts":0,"source":"${'\\u0041'.repeat(MAX_SOURCE_BYTES)}","client":"c","health":2}`)).ok, true);
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
  const strings = ['"My Router"', '""', '"é \\"q\\" \\\\ \\/"', '"\\u0000\\u001f\\n\\t"', '"\\ud800"', '"\\ud83d\\ude00 😀"', '"\\x"', '"a\\u12"', '"tab\there"',
    // Strict strings: lone surrogates, lengths around the limits (in UTF-8 bytes, not characters).
    '"\\udfff"', '"x\\udbff"', '"\\ude00\\ud83d"', `"${'a'.repeat(MAX_SOURCE_BYTES)}"`, `"${'a'.repeat(MAX_SOURCE_BYTES + 1)}"`, `"${'é'.repeat(MAX_SOURCE_BYTES / 2 + 1)}"`,
    `"${'😀'.repeat(MAX_SOURCE_BYTES / 4)}"`, `"${'a'.repeat(MAX_CLIENT_BYTES)}"`, `"${'€'.repeat(MAX_CLIENT_BYTES / 3 + 1)}"`, `"${'\\u00e9'.repeat(MAX_SOURCE_BYTES / 2 + 1)}"`];
  const texts: string[] = [];
  for (let i = 0; i < 10_000; i++) {
    const id = next() % 3n === 0n ? String(BigInt.asIntN(64, next())) : pick(ints);
    texts.push(`{"id":${id},"ts":${pick(ints)},"source":${pick(strings)},"client":${pick(strings)},"health":${next() % 5n === 0n ? pick(ints) : pick(['0', '1', '2'])}}`);
  }
  // Near misses: not canonical, so the general path decides; both must still agree.
  texts.push('{"id":1,"ts":2,"source":"s","client":"c","health":2,"x":1}', '{ "id":1,"ts":2,"source":"s","client":"c","health":2}',
    '{"id":01,"ts":2,"source":"s","client":"c","health":2}', '{"id":1.0,"ts":2,"source":"s","client":"c","health":2}',
    '{"ts":2,"id":1,"source":"s","client":"c","health":2}', '{"id":1,"ts":2,"source":"s","client":"c","health":2}\n');
  let fast = 0;
  let fastValid = 0;
  const fastReasons = new Set<string>();
  for (const t of texts) {
    const general = decodeJson(t);
    assert.deepEqual(decodeEvent(b(t)), general, t);
    const f = decodeCanonical(t);
    if (f === undefined) continue;
    fast++;
    if (f.ok) fastValid++;
    else fastReasons.add(f.reason);
    assert.deepEqual(f, general, t);
  }
  for (const reason of ['invalid_unicode', 'empty_source', 'field_too_long']) assert.ok(fastReasons.has(reason), `the fast path decided ${reason}`);
  // The fast path must really be taken, for valid and for invalid values.
  assert.ok(fastValid > 500 && fast - fastValid > 500, `fast path taken ${fast} times, ${fastValid} valid`);
  assert.notEqual(decodeCanonical(encodeEvent({ id: -1n, ts: 5, source: 'é "q"', client: '\u0000', health: 2 })), undefined);
});
