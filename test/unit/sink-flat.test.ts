// The sink's column-directed read of flat JSON values (SinkCodec's flat path, src/formats/flat-json.ts
// FlatPicker) against its general path (the value parsed whole, then each column's field read) on
// seeded random records: the same row, or the same reason and detail, for every record. Reproduce a
// failure with its seed.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig, type SinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { FlatPicker } from '../../src/formats/flat-json.js';
import { RecordKeys, sameKey, keyText } from '../../src/jobs/sink/record-key.js';
import { parse } from 'lossless-json';
import { Long } from '../../src/cassandra/session.js';
import { prng } from '../../src/prng.js';

const pick = <T>(r: () => number, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;

const NAMES = ['id', 'ts', 'name', 'n', 'f', 'ok', 'd', 'constructor', 'x', 'é', '', '__proto__'];
const NUMBERS = ['0', '-0', '7', '-12', '1.5', '1e3', '2.5e-7', '123456789012345678901234567890', '9007199254740993', '1700000000000', '99999999999999999', '2147483648', '-32769', '128', '01', '1.', '-'];
const STRINGS = ['"a"', '""', '"2026-01-31T12:00:00Z"', '"12"', '"1.25"', '"true"', '"é😀"', '"\\u0041"', '"\\n"', '"2026-02-30"', '"c0a8a0e2-7c3a-11ee-b962-0242ac120002"'];
const OTHERS = ['true', 'false', 'null', '{"y":1}', '[1,2]', 'nul'];

function value(r: () => number): string {
  const k = r();
  return k < 0.45 ? pick(r, NUMBERS) : k < 0.8 ? pick(r, STRINGS) : pick(r, OTHERS);
}

let lastNames: string[] = [];

/** A record's text; a third of them with the names of the one before, in its order (the flat path's shape cache). */
function text(r: () => number): string {
  const members: string[] = [];
  const names = r() < 0.35 ? lastNames : Array.from({ length: Math.floor(r() * 8) }, () => pick(r, NAMES));
  lastNames = names;
  for (const name of names) members.push(`${pick(r, ['', ' ', '\n'])}"${name}":${pick(r, ['', ' '])}${value(r)}`);
  let t = `{${members.join(',')}}`;
  if (r() < 0.05) t = t.slice(0, Math.floor(r() * t.length));
  if (r() < 0.03) t += pick(r, [' ', 'x', '}']);
  return t;
}

const configs: Array<[string, SinkConfig]> = [
  [
    'log, scalar types, meta, default, required, unset',
    sinkConfig({
      topic: 't',
      table: 't',
      mode: 'log',
      columns: {
        id: { type: 'bigint', required: true },
        ts: 'timestamp',
        name: { type: 'text', default: 'none' },
        n: 'int',
        f: 'double',
        ok: { type: 'boolean', onNull: 'unset' },
        d: 'decimal',
        c: { type: 'text', field: 'constructor' },
        x: 'smallint',
        at: { type: 'bigint', field: '$offset' },
      },
    }),
  ],
  [
    'log, TTL, other types',
    sinkConfig({ topic: 't', table: 't', mode: 'log', ttl: '7d', columns: { id: 'time', ts: 'date', name: 'uuid', n: 'tinyint', f: 'float', x: 'list<int>', d: 'text' } }),
  ],
  [
    'log, key and header columns',
    sinkConfig({ topic: 't', table: 't', mode: 'log', columns: { id: 'bigint', k: { type: 'text', field: 'key' }, kid: { type: 'bigint', field: 'key.id' }, h: { type: 'int', field: 'header.n' }, name: 'text' } }),
  ],
  ['upsert, a version from the value', sinkConfig({ topic: 't', table: 't', mode: 'upsert', key: ['id'], version: 'ts', columns: { id: 'bigint', name: 'text', n: 'int' } })],
  ['upsert, a version from a header', sinkConfig({ topic: 't', table: 't', mode: 'upsert', key: ['id'], version: 'header.n', columns: { id: 'bigint', name: 'text', ts: 'timestamp' } })],
  [
    'log, a where on columns and on fields no column reads (numbers, texts, booleans, exists, not, any, all)',
    sinkConfig({
      topic: 't',
      table: 't',
      mode: 'log',
      where: { any: [{ field: 'n', in: [7, '7', -12, 1.5, 1000] }, { all: [{ field: 'x', exists: true }, { not: { field: 'ok', equals: true } }] }, { field: 'é', equals: 'a' }, { field: 'value.constructor', in: ['12', 12, false] }] },
      columns: { id: 'bigint', n: 'int', name: 'text', ts: 'timestamp' },
    }),
  ],
  [
    'upsert, a where on a header, the key and a value field',
    sinkConfig({ topic: 't', table: 't', mode: 'upsert', key: ['id'], where: { any: [{ not: { field: 'header.n', equals: 3 } }, { field: 'key', in: ['7', -12] }, { field: 'name', exists: false }] }, columns: { id: 'bigint', name: 'text', f: 'double' } }),
  ],
  ['log, a TTL per record from a top-level value field', sinkConfig({ topic: 't', table: 't', mode: 'log', ttlField: 'n', columns: { id: 'bigint', name: 'text', ts: 'timestamp' } })],
  ['upsert, a TTL per record from a header', sinkConfig({ topic: 't', table: 't', mode: 'upsert', key: ['id'], ttlField: 'header.n', columns: { id: 'bigint', name: 'text', f: 'double' } })],
  ['upsert, bigint key, the record key as a column', sinkConfig({ topic: 't', table: 't', mode: 'upsert', key: ['id'], columns: { id: 'bigint', name: 'text', n: { type: 'int', default: 3 }, k: { type: 'bigint', field: 'key' } } })],
];

const record = (value: string, key: string | null, offset: bigint, header?: string): SourceRecord => ({
  topic: 't',
  partition: 2,
  offset,
  key: key === null ? null : Buffer.from(key),
  value: Buffer.from(value),
  timestampMs: 1_700_000_000_000,
  ...(header === undefined ? {} : { headers: [['n', Buffer.from(header)] as [string, Buffer]] }),
});

test('sink codec: the flat path gives what the general path gives, row by row and reason by reason (seeded)', () => {
  for (const [name, config] of configs) {
    for (const seed of [11, 12, 13]) {
      const r = prng(seed);
      const flat = new SinkCodec(config);
      const general = new SinkCodec(config);
      // The general path alone: the codec without its picker.
      (general as unknown as { flat: FlatPicker | undefined }).flat = undefined;
      assert.ok((flat as unknown as { flat: FlatPicker | undefined }).flat instanceof FlatPicker, `${name}: the flat path applies`);
      const seen = new Map<string, number>();
      for (let i = 0; i < 20_000; i++) {
        let t = text(r);
        let key: string | null = null;
        if (config.mode === 'upsert') {
          key = pick(r, ['1', '7', '-12', '9007199254740993', 'x']);
          // Most records name their key in the value too, as an upsert topic's do.
          if (r() < 0.7) t = `{"id":${key}${t.startsWith('{}') || !t.startsWith('{') ? '}' : `,${t.slice(1)}`}`;
        }
        if (config.mode === 'log' && r() < 0.5) key = pick(r, ['{"id":5}', '{"id":"x"}', '7', 'x', '[1]']);
        const rec = record(t, key, BigInt(i), r() < 0.5 ? pick(r, ['3', 'x', '', '99999999999']) : undefined);
        const a = flat.decode(rec);
        const b = general.decode(rec);
        if (!isDeepStrictEqual(a, b)) assert.deepEqual(canonical(a), canonical(b), `${name}, seed ${seed}, record ${i}: ${t}`);
        assert.deepEqual(a, b, `${name}, seed ${seed}, record ${i}: ${t}`);
        const outcome = a.ok ? a.value.kind : a.reason;
        seen.set(outcome, (seen.get(outcome) ?? 0) + 1);
      }
      // Both kinds of outcome are exercised, not only refusals.
      assert.ok((seen.get('row') ?? 0) > 50, `${name}, seed ${seed}: rows ${JSON.stringify([...seen])}`);
      assert.ok([...seen.keys()].filter((k) => k !== 'row').length >= 2, `${name}, seed ${seed}: reasons ${JSON.stringify([...seen])}`);
    }
  }
});

test('FlatPicker: members by name, absent ones −1, and what it leaves to the general path', () => {
  const p = new FlatPicker(['b', 'a', 'zz']);
  const t = '{"a": 1.5e3, "skip": "x", "b": "y"}';
  assert.equal(p.pick(t), true);
  assert.deepEqual([...p.at], [2, 0, -1]);
  assert.equal(t.slice(p.tokens.valueStart[0], p.tokens.valueEnd[0]), '1.5e3');
  assert.equal(t.slice(p.tokens.valueStart[2], p.tokens.valueEnd[2]), 'y');
  for (const other of ['{"a":1,"a":2}', '{"__proto__":1}', '{"a":"\\n"}', '{"a":{}}', '[1]', '{"a":1', '{"a":01}']) assert.equal(p.pick(other), false, other);
  // A member with a key's hash but another name (FlatPicker compares the text): "Aa" and "BB" share a hash.
  const q = new FlatPicker(['Aa']);
  assert.equal(q.pick('{"BB": 1}'), true);
  assert.deepEqual([...q.at], [-1]);
  assert.equal(q.pick('{"BB": 1, "Aa": 2}'), false, 'equal hashes: possibly one key twice, the general path decides');
});

test('FlatPicker: an object of many members (its hash set grows to hold them all)', () => {
  for (const n of [31, 32, 33, 300, 5000]) {
    const p = new FlatPicker(['k0', `k${n - 1}`, 'absent']);
    const members = Array.from({ length: n }, (_, i) => `"k${i}":${i}`);
    const t = `{${members.join(',')}}`;
    assert.equal(p.pick(t), true, `${n} members`);
    assert.deepEqual([...p.at], [0, n - 1, -1], `${n} members`);
    assert.equal(p.pick(`{${[...members, `"k${n - 1}":0`].join(',')}}`), false, `${n} members and a duplicate`);
  }
});

test('FlatPicker: a text of the last one\'s shape reuses its members only where the names match', () => {
  const p = new FlatPicker(['Aa', 'b']);
  assert.equal(p.pick('{"Aa": 1, "b": 2, "c": 3}'), true);
  assert.deepEqual([...p.at], [0, 1]);
  // The same hashes in the same order, another name where "Aa" was ("BB" shares its hash): not "Aa".
  assert.equal(p.pick('{"BB": 1, "b": 2, "c": 3}'), true);
  assert.deepEqual([...p.at], [-1, 1]);
  assert.equal(p.pick('{"Aa": 1, "b": 2, "c": 3}'), true);
  assert.deepEqual([...p.at], [0, 1]);
  // A duplicate refused even right after a text whose shape it nearly shares.
  assert.equal(p.pick('{"Aa": 1, "b": 2, "b": 3}'), false);
  assert.equal(p.pick('{"Aa": 1, "b": 2, "c": 3}'), true);
  assert.deepEqual([...p.at], [0, 1]);
  // "`@proto__" shares __proto__'s hash: the shape is reused, and __proto__ is still refused.
  assert.equal(p.pick('{"`@proto__": 1}'), true);
  assert.equal(p.pick('{"__proto__": 1}'), false);
});

test('record keys: a whole-number key is read as lossless-json reads it; one bigint key compares as its text does', () => {
  const keys = new RecordKeys([], undefined);
  for (const t of ['0', '-0', '7', '-12', '9007199254740993', '123456789012345678901234567890', '07', '1.5', '"7"', 'x']) {
    let parsed: unknown;
    try {
      parsed = parse(t);
    } catch {
      parsed = undefined;
    }
    assert.deepEqual(keys.view(Buffer.from(t)), { ok: true, text: t, value: parsed }, t);
  }
  const longs = ['0', '-1', '9007199254740993', '-9223372036854775808', '9223372036854775807'].map((t) => Long.fromString(t));
  for (const a of longs) for (const b of longs) assert.equal(sameKey([a], [b]), keyText([a]) === keyText([b]), `${a} ${b}`);
  assert.equal(sameKey(['7'], [Long.fromNumber(7)]), keyText(['7']) === keyText([Long.fromNumber(7)]));
  assert.equal(sameKey([Long.fromNumber(7), 'a'], [Long.fromNumber(7), 'a']), true);
});
