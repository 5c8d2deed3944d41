import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeEvent, MAX_SOURCE_BYTES, QuarantineReasons } from '../../src/jobs/events/event.js';
import { BAD_KINDS, clientNames, generate, ORIGINAL_CLIENTS, parseHealthMix, type GeneratorOptions } from '../../src/jobs/events/generator.js';

const base: GeneratorOptions = { eventsPerKey: 200, clients: 3, sources: 1, healthMix: [0, 0, 1], badRatio: 0, seed: 1, now: () => 1000 };

test('the defaults are the original generator: 3 clients × 200 Critical events from "My Router", keyed by client', () => {
  const records = [...generate(base)];
  assert.equal(records.length, 600);
  for (const [i, r] of records.entries()) {
    assert.equal(r.key, ORIGINAL_CLIENTS[i % 3]);
    const d = decodeEvent(r.value);
    assert.ok(d.ok);
    assert.deepEqual({ ...d.value, id: 0n }, { id: 0n, ts: 1000, source: 'My Router', client: ORIGINAL_CLIENTS[i % 3], health: 2 });
  }
  assert.equal(new Set(records.map((r) => decodeEvent(r.value).ok && String((decodeEvent(r.value) as { value: { id: bigint } }).value.id))).size, 600, 'ids are distinct');
});

test('the same seed gives the same stream; another seed another', () => {
  const a = [...generate({ ...base, count: 50, badRatio: 0.3, healthMix: [1, 1, 1] })].map((r) => r.value.toString('hex'));
  const b = [...generate({ ...base, count: 50, badRatio: 0.3, healthMix: [1, 1, 1] })].map((r) => r.value.toString('hex'));
  const c = [...generate({ ...base, count: 50, badRatio: 0.3, healthMix: [1, 1, 1], seed: 2 })].map((r) => r.value.toString('hex'));
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
});

test('--bad-ratio cycles through every malformed kind, each decoding to its own reason', () => {
  const records = [...generate({ ...base, count: 2000, badRatio: 0.5 })];
  const bad = records.filter((r) => r.kind !== 'valid');
  assert.ok(bad.length > 900 && bad.length < 1100);
  assert.deepEqual(new Set(bad.map((r) => r.kind)), new Set(BAD_KINDS));
  for (const r of records) {
    const d = decodeEvent(r.value);
    assert.equal(d.ok ? 'valid' : d.reason, r.kind);
  }
});

test('the malformed kinds are every reason of the codec but ts_out_of_range', () => {
  assert.deepEqual(QuarantineReasons.filter((r) => !(BAD_KINDS as readonly string[]).includes(r)), ['ts_out_of_range']);
});

test('strict strings: a lone surrogate escape, an empty source, a source over the limit in UTF-8 bytes (not in characters)', () => {
  const records = [...generate({ ...base, count: 400, badRatio: 0.5 })];
  const of = (kind: string) => records.find((r) => r.kind === kind)!.value.toString('utf8');
  assert.match(of('invalid_unicode'), /"source":"\\ud800"/);
  assert.match(of('empty_source'), /"source":""/);
  const source = (JSON.parse(of('field_too_long')) as { source: string }).source;
  assert.ok(source.length <= MAX_SOURCE_BYTES && Buffer.byteLength(source) > MAX_SOURCE_BYTES);
});

test('count, clients, sources and the health mix', () => {
  const records = [...generate({ ...base, count: 3000, clients: 5, sources: 4, healthMix: [70, 20, 10] })];
  assert.equal(records.length, 3000);
  assert.deepEqual(new Set(records.map((r) => r.key)), new Set(clientNames(5)));
  const events = records.map((r) => decodeEvent(r.value)).map((d) => (d.ok ? d.value : assert.fail()));
  assert.deepEqual(new Set(events.map((e) => e.source)), new Set(['My Router 1', 'My Router 2', 'My Router 3', 'My Router 4']));
  const share = (h: number) => events.filter((e) => e.health === h).length / events.length;
  assert.ok(Math.abs(share(0) - 0.7) < 0.05 && Math.abs(share(1) - 0.2) < 0.05 && Math.abs(share(2) - 0.1) < 0.05);
});

test('parseHealthMix', () => {
  assert.deepEqual(parseHealthMix('0:70,1:20,2:10'), [70, 20, 10]);
  assert.deepEqual(parseHealthMix('2:1'), [0, 0, 1]);
  for (const bad of ['3:1', '0:x', '', '0:0', '0-1']) assert.equal(parseHealthMix(bad), undefined, bad);
});
