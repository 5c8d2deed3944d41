import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LosslessNumber } from 'lossless-json';
import { canonical, convert, cqlColumnType, cqlTypeName, parseCqlType, plainDecimal, type CqlType } from '../../src/jobs/sink/cql-types.js';

const t = (s: string) => parseCqlType(s)!;
const n = (s: string) => new LosslessNumber(s);
const ok = (type: CqlType, v: unknown) => {
  const c = convert(type, v);
  assert.ok(c.ok, `${JSON.stringify(type)} ${String(v)}: ${c.ok ? '' : c.problem}`);
  return canonical(c.value);
};
const no = (type: CqlType, v: unknown, problem: RegExp) => {
  const c = convert(type, v);
  assert.ok(!c.ok, `expected a refusal for ${String(v)}`);
  assert.match(c.problem, problem);
};

test('types parse, spaces and case ignored; others are refused', () => {
  assert.deepEqual(parseCqlType('BIGINT'), { kind: 'scalar', name: 'bigint' });
  assert.deepEqual(parseCqlType('list< int >'), { kind: 'list', of: { kind: 'scalar', name: 'int' } });
  assert.deepEqual(parseCqlType('map<text, decimal>'), { kind: 'map', of: { kind: 'scalar', name: 'decimal' } });
  assert.deepEqual(parseCqlType('varchar'), { kind: 'scalar', name: 'text' });
  assert.deepEqual(parseCqlType('set<timeuuid>'), { kind: 'set', of: { kind: 'scalar', name: 'timeuuid' } });
  for (const bad of ['map<int, text>', 'list<list<nope>>', 'set<>', 'varint', 'list<int>>', 'frozen<>', 'tuple<int,int>']) assert.equal(parseCqlType(bad), undefined, bad);
});

test('nested collections parse with or without frozen, and are named with it', () => {
  const spelled = (s: string) => cqlTypeName(t(s));
  assert.equal(spelled('list<map<text,int>>'), 'list<frozen<map<text, int>>>');
  assert.equal(spelled('list<frozen<map<text, int>>>'), 'list<frozen<map<text, int>>>');
  assert.equal(spelled('map<varchar, frozen<set<bigint>>>'), 'map<text, frozen<set<bigint>>>');
  assert.equal(spelled('frozen<set<list<text>>>'), 'set<frozen<list<text>>>');
  assert.equal(cqlColumnType(t('set<list<text>>')), 'frozen<set<frozen<list<text>>>>');
  assert.equal(cqlColumnType(t('varchar')), 'text');
  assert.equal(parseCqlType('list<'.repeat(10) + 'int' + '>'.repeat(10)), undefined);
});

test('smallint, tinyint, float, date, time, blob, inet, timeuuid', () => {
  assert.equal(ok(t('smallint'), n('-32768')), -32768);
  no(t('smallint'), n('32768'), /outside smallint's range \[-32768, 32767\]/);
  assert.equal(ok(t('tinyint'), 127), 127);
  no(t('tinyint'), n('-129'), /outside tinyint's range/);
  no(t('tinyint'), n('1.5'), /whole number/);
  assert.equal(ok(t('float'), n('1.1')), Math.fround(1.1));
  no(t('float'), n('1e39'), /outside float's range/);
  assert.equal(ok(t('date'), '2024-02-29'), '2024-02-29');
  assert.equal(ok(t('date'), new Date(Date.UTC(2026, 0, 31, 23, 59))), '2026-01-31');
  no(t('date'), '2026-02-29', /not a day of the calendar/);
  no(t('date'), '2026-1-31', /expected a date YYYY-MM-DD/);
  assert.equal(ok(t('time'), '13:05'), '13:05:00');
  assert.equal(ok(t('time'), '23:59:59.123456789'), '23:59:59.123456789');
  assert.equal(ok(t('time'), '00:00:01.5'), '00:00:01.5');
  no(t('time'), '24:00:00', /not a time of day/);
  assert.equal(ok(t('blob'), 'AAEC/w=='), '000102ff');
  assert.equal(ok(t('blob'), Buffer.from([9])), '09');
  no(t('blob'), 'not base64!', /base64/);
  assert.equal(ok(t('inet'), '10.0.0.1'), '10.0.0.1');
  assert.equal(ok(t('inet'), '::1'), '::1');
  no(t('inet'), '10.0.0.256', /IPv4 or IPv6/);
  assert.equal(ok(t('timeuuid'), 'D2177DD0-EAA2-11DE-A572-001B779C76E3'), 'd2177dd0-eaa2-11de-a572-001b779c76e3');
  no(t('timeuuid'), '123e4567-e89b-42d3-a456-426614174000', /version-1/);
});

test('a set holds each value once and compares whatever its order; nested collections convert element by element', () => {
  const set = convert(t('set<bigint>'), [n('3'), '1', n('3')]);
  assert.ok(set.ok && set.value instanceof Set && set.value.size === 2);
  assert.deepEqual(canonical(set.value), ['"1"', '"3"'].map((x) => JSON.parse(x)));
  assert.deepEqual(canonical(new Set(['b', 'a'])), canonical(new Set(['a', 'b'])));
  assert.equal(canonical(new Set()), null);
  assert.deepEqual(ok(t('list<frozen<map<text, int>>>'), [{ b: 2, a: 1 }, {}]), [{ a: 1, b: 2 }, null]);
  assert.deepEqual(ok(t('map<text, set<date>>'), { x: ['2026-01-02', '2026-01-01'] }), { x: ['2026-01-01', '2026-01-02'] });
  no(t('list<frozen<list<int>>>'), [[1], [2, 'x']], /element 1: element 1: expected a whole number/);
  no(t('set<text>'), ['a', null], /element 1 is null \(a set cannot hold null\)/);
});

test('bigint is exact over the whole int64 range, from numbers or digit strings', () => {
  assert.equal(ok(t('bigint'), n('9223372036854775807')), '9223372036854775807');
  assert.equal(ok(t('bigint'), n('-9223372036854775808')), '-9223372036854775808');
  assert.equal(ok(t('bigint'), '1234567890123456789'), '1234567890123456789');
  no(t('bigint'), n('9223372036854775808'), /outside bigint's 64-bit range/);
  no(t('bigint'), n('1.5'), /whole number/);
  no(t('bigint'), true, /whole number/);
});

test('int, double, boolean, text', () => {
  assert.equal(ok(t('int'), n('-2147483648')), -2147483648);
  no(t('int'), n('2147483648'), /outside int's range/);
  assert.equal(ok(t('double'), n('1.25')), 1.25);
  no(t('double'), '1.25', /expected a number/);
  assert.equal(ok(t('boolean'), false), false);
  no(t('boolean'), 'true', /true or false/);
  assert.equal(ok(t('text'), 'é'), 'é');
  no(t('text'), n('5'), /expected a string/);
});

test('timestamp from epoch ms or ISO-8601 with a zone; uuid; decimal keeps its digits', () => {
  assert.equal(ok(t('timestamp'), n('1700000000123')), 1700000000123);
  assert.equal(ok(t('timestamp'), '2023-11-14T22:13:20.123Z'), 1700000000123);
  assert.equal(ok(t('timestamp'), '2023-11-14T23:13:20.123+01:00'), 1700000000123);
  no(t('timestamp'), '2023-11-14 22:13:20', /ISO-8601/);
  no(t('timestamp'), n('1.5'), /whole number/);
  assert.equal(ok(t('uuid'), '6F9619FF-8B86-D011-B42D-00CF4FC964FF'), '6f9619ff-8b86-d011-b42d-00cf4fc964ff');
  no(t('uuid'), 'abc', /UUID/);
  assert.equal(ok(t('decimal'), n('12345678901234567890.50')), '12345678901234567890.50');
  assert.equal(ok(t('decimal'), '-0.001'), '-0.001');
  no(t('decimal'), 'abc', /decimal number/);
});

test('a decimal in exponent notation is a JSON number: stored in plain notation, digits kept', () => {
  assert.equal(ok(t('decimal'), n('1E+3')), '1000');
  assert.equal(ok(t('decimal'), n('1e3')), '1000');
  assert.equal(ok(t('decimal'), n('1.5e-7')), '0.00000015');
  assert.equal(ok(t('decimal'), n('-2.50E2')), '-250');
  assert.equal(ok(t('decimal'), n('12.345e1')), '123.45');
  assert.equal(ok(t('decimal'), n('0.5E-2')), '0.005');
  assert.equal(ok(t('decimal'), n('1.500e1')), '15.00');
  assert.equal(ok(t('decimal'), '7E0'), '7');
  assert.equal(plainDecimal('1E+3'), '1000');
  assert.equal(plainDecimal('1e-1001'), undefined, 'an exponent that would spell out more than 1000 digits is refused');
  no(t('decimal'), '1e', /decimal number/);
  no(t('decimal'), '1.e3', /decimal number/);
});

test('typed values of Avro and Protobuf: BigInt, numbers, Dates, decimals as LosslessNumber', () => {
  assert.equal(ok(t('bigint'), -(2n ** 63n)), '-9223372036854775808');
  assert.equal(ok(t('bigint'), 2n ** 63n - 1n), '9223372036854775807');
  no(t('bigint'), 2n ** 63n, /outside bigint's 64-bit range/);
  assert.equal(ok(t('bigint'), 42), '42');
  assert.equal(ok(t('int'), 7n), 7);
  no(t('int'), 2n ** 31n, /outside int's range/);
  assert.equal(ok(t('double'), 1.5), 1.5);
  assert.equal(ok(t('double'), 3n), 3);
  assert.equal(ok(t('timestamp'), new Date(1700000000123)), 1700000000123);
  assert.equal(ok(t('timestamp'), 1700000000123n), 1700000000123);
  no(t('timestamp'), new Date(NaN), /invalid date/);
  assert.equal(ok(t('decimal'), n('-1.50')), '-1.50');
  assert.equal(ok(t('decimal'), 1.5e-7), '0.00000015');
  assert.equal(ok(t('decimal'), 10n ** 30n), '1000000000000000000000000000000');
  assert.deepEqual(ok(t('list<bigint>'), [1n, -(2n ** 63n)]), ['1', '-9223372036854775808']);
  assert.deepEqual(ok(t('map<text, timestamp>'), { a: new Date(5) }), { a: 5 });
  no(t('map<text, int>'), new Date(5), /object/);
  no(t('text'), 5n, /expected a string, got 5/);
});

test('lists and maps of scalars; empty collections compare as null (Cassandra stores none)', () => {
  assert.deepEqual(ok(t('list<bigint>'), [n('1'), '2']), ['1', '2']);
  no(t('list<int>'), [n('1'), null], /element 1 is null/);
  no(t('list<int>'), [n('1'), 'x'], /element 1: expected a whole number/);
  assert.deepEqual(ok(t('map<text, int>'), { b: n('2'), a: n('1') }), { a: 1, b: 2 });
  no(t('map<text, int>'), [n('1')], /JSON object/);
  assert.equal(ok(t('list<text>'), []), null);
  assert.equal(canonical({}), null);
});

test('a decimal of 1000 digits converts and compares in linear time (the driver\'s BigDecimal text is quadratic)', () => {
  const started = Date.now();
  for (let i = 0; i < 1000; i++) {
    const c = convert({ kind: 'scalar', name: 'decimal' }, new LosslessNumber('-1.5e1000'));
    assert.equal(c.ok && canonical(c.value), `-15${'0'.repeat(999)}`);
  }
  // Before: one canonical() of 400 digits took over 20 s.
  assert.ok(Date.now() - started < 5_000, `1000 conversions took ${Date.now() - started} ms`);
});
