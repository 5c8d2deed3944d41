// The sink's JSON fast path (src/formats/flat-json.ts) against lossless-json on seeded random texts:
// whatever it accepts equals lossless-json's result, key order included; whatever lossless-json refuses
// it leaves to lossless-json (undefined). Reproduce a failure with its seed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isLosslessNumber, parse, stringify } from 'lossless-json';
import { parseFlatObject } from '../../src/formats/flat-json.js';
import { prng } from '../../src/prng.js';

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

const WS = [' ', '', '', '\n', '\t', '\r', '  ', '\u00a0', '\f'];
const CHARS = ['a', 'Z', '0', ' ', 'é', '😀', '\\"', '\\\\', '\\n', '\\u0041', '\\x', '\\u12', '\u0001', '\t', '"', '\ud800', ':', ',', '{', '}'];
const NUMBERS = ['0', '-0', '7', '-12', '1.5', '1e3', '1E+3', '2.5e-7', '123456789012345678901234567890', '01', '-', '1.', '.5', '1e', '+1', '1.2.3', '--1', '0x10', 'NaN', 'Infinity'];
const KEYWORDS = ['true', 'false', 'null', 'tru', 'nul', 'True', 'truex', 'undefined'];
const KEYS = ['id', 'ts', 'a', 'b', '', 'é', '__proto__', 'constructor', '1', 'a b'];

function stringLiteral(r: () => number, clean: boolean): string {
  let s = '';
  const len = Math.floor(r() * 6);
  for (let i = 0; i < len; i++) s += clean ? pick(r, ['a', 'Z', '0', ' ', 'é', '😀', ':', ',', '{', '}']) : pick(r, CHARS);
  return `"${s}"`;
}

function value(r: () => number, clean: boolean): string {
  const k = r();
  if (k < 0.35) return stringLiteral(r, clean || r() < 0.7);
  if (k < 0.7) return clean ? pick(r, NUMBERS.slice(0, 9)) : pick(r, NUMBERS);
  if (k < 0.85) return clean ? pick(r, KEYWORDS.slice(0, 3)) : pick(r, KEYWORDS);
  if (k < 0.92) return `{"x":${pick(r, NUMBERS.slice(0, 5))}}`;
  return `[${pick(r, NUMBERS.slice(0, 5))}]`;
}

function text(r: () => number): string {
  const clean = r() < 0.5;
  const w = () => (clean ? pick(r, WS.slice(0, 7)) : pick(r, WS));
  const n = Math.floor(r() * 6);
  const members: string[] = [];
  for (let i = 0; i < n; i++) members.push(`${w()}"${pick(r, KEYS)}"${w()}:${w()}${value(r, clean)}${w()}`);
  let t = `${w()}{${members.join(',')}${n === 0 ? w() : ''}}${w()}`;
  if (!clean && r() < 0.15) t = t.slice(0, Math.floor(r() * t.length)); // cut short
  if (!clean && r() < 0.1) t += pick(r, ['x', ',', '}', '{}', ' 1']);
  return t;
}

test('parseFlatObject: equal to lossless-json wherever it answers, and silent wherever lossless-json refuses (seeded)', () => {
  for (const seed of [1, 2, 3]) {
    const r = prng(seed);
    let answered = 0;
    let refused = 0;
    for (let i = 0; i < 20_000; i++) {
      const t = text(r);
      let expected: unknown;
      let error = false;
      try {
        expected = parse(t);
      } catch {
        error = true;
      }
      const got = parseFlatObject(t);
      const where = `seed ${seed}, text ${i}: ${JSON.stringify(t)}`;
      if (error) {
        assert.equal(got, undefined, where);
        refused++;
        continue;
      }
      if (got === undefined) continue;
      answered++;
      assert.equal(stringify(got), stringify(expected), where);
      assert.deepEqual(Object.keys(got), Object.keys(expected as object), where);
      for (const [k, v] of Object.entries(got)) assert.equal(isLosslessNumber(v), isLosslessNumber((expected as Record<string, unknown>)[k]), where);
    }
    // Not vacuous: both paths are taken often.
    assert.ok(answered > 4000, `seed ${seed}: the fast path answered ${answered}`);
    assert.ok(refused > 2000, `seed ${seed}: lossless-json refused ${refused}`);
  }
});

test('parseFlatObject: the events the generator writes, and what it leaves to lossless-json', () => {
  const e = '{"id":-9223372036854775808,"ts":1717200000000,"source":"My Router","client":"c1","health":2}';
  assert.equal(stringify(parseFlatObject(e)), stringify(parse(e)));
  for (const t of ['{"a":"\\u0041"}', '{"a":{"b":1}}', '{"a":[1]}', '{"a":1,"a":1}', '{"__proto__":1}', '[1]', '"s"', '{"a":01}', '']) assert.equal(parseFlatObject(t), undefined, t);
});
