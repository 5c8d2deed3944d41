import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LosslessNumber } from 'lossless-json';
import { canonical, convert, parseCqlType, plainDecimal, type CqlType } from '../../src/sink/cql-types.js';

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
  assert.deepEqual(parseCqlType('list< int >'), { kind: 'list', of: 'int' });
  assert.deepEqual(parseCqlType('map<text, decimal>'), { kind: 'map', of: 'decimal' });
  for (const bad of ['varchar', 'map<int, text>', 'list<list<int>>', 'set<text>', 'blob']) assert.equal(parseCqlType(bad), undefined, bad);
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
