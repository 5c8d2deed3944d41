// Issue 37 item 2: a column's field may name the value, the record key, a header or the record's
// metadata; anything that is not a pure function of the record is refused.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { parseColumnSource } from '../../src/jobs/sink/column-source.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { configProblem } from './sink-fakes.js';

const problem = (raw: unknown) => configProblem(raw);
const base = { topic: 't', table: 'tb', mode: 'log' };

const rec = (o: { value?: string | null; key?: string | null; headers?: Array<[string, string | Buffer]>; offset?: bigint; partition?: number; ts?: number }): SourceRecord => ({
  topic: 'shop.events',
  partition: o.partition ?? 2,
  offset: o.offset ?? 41n,
  key: o.key === undefined || o.key === null ? null : Buffer.from(o.key),
  value: o.value === undefined ? Buffer.from('{}') : o.value === null ? null : Buffer.from(o.value),
  timestampMs: o.ts ?? 1_767_225_600_000,
  ...(o.headers === undefined ? {} : { headers: o.headers.map(([n, v]) => [n, Buffer.isBuffer(v) ? v : Buffer.from(v)] as const) }),
});

test('field sources parse: value (with or without value.), key, key.x, header.name, metadata', () => {
  assert.deepEqual(parseColumnSource('a.b'), { source: 'value', path: ['a', 'b'], spec: 'a.b' });
  assert.deepEqual(parseColumnSource('value.a.b'), { source: 'value', path: ['a', 'b'], spec: 'value.a.b' });
  assert.deepEqual(parseColumnSource('key'), { source: 'key', path: [], spec: 'key' });
  assert.deepEqual(parseColumnSource('key.shop.id'), { source: 'key', path: ['shop', 'id'], spec: 'key.shop.id' });
  assert.deepEqual(parseColumnSource('header.trace.id'), { source: 'header', path: ['trace.id'], spec: 'header.trace.id' });
  assert.deepEqual(parseColumnSource('$timestamp'), { source: 'meta', path: ['timestamp'], spec: '$timestamp' });
});

test('what is not a pure function of the record is refused, saying so; a mistyped metadata name is named', () => {
  assert.match(problem({ ...base, columns: { at: { type: 'timestamp', field: 'now()' } } }), /^s\.yaml: columns\.at\.field: now\(\) is not a pure function of the record: /);
  assert.match(problem({ ...base, columns: { at: { type: 'timestamp', field: '$now' } } }), /^s\.yaml: columns\.at\.field: \$now is not a pure function of the record/);
  assert.match(problem({ ...base, columns: { id: { type: 'uuid', field: 'uuid()' } } }), /columns\.id\.field: uuid\(\) is not a pure function of the record/);
  assert.equal(problem({ ...base, columns: { o: { type: 'bigint', field: '$ofset' } } }), 's.yaml: columns.o.field: $ofset: unknown record metadata (did you mean $offset?); the metadata are $topic, $partition, $offset, $timestamp');
  assert.equal(problem({ ...base, columns: { o: { type: 'int', field: '$offset' } } }), 's.yaml: columns.o.field: $offset is stored as bigint, not int');
  assert.equal(problem({ ...base, columns: { o: { type: 'list<text>', field: 'header.tags' } } }), "s.yaml: columns.o.field: header.tags: a header's bytes fill a scalar column (text, a number, blob, …), not a list");
  assert.equal(problem({ ...base, columns: { o: { type: 'text', field: 'header' } } }), 's.yaml: columns.o.field: header: name the header, header.<name>');
});

test('log mode: columns from the value, the key (whole and a field), headers and the metadata', () => {
  const config = sinkConfig({
    ...base,
    columns: {
      status: { type: 'text', field: 'value.status' },
      city: { type: 'text', field: 'a.city' },
      shop: { type: 'text', field: 'key.shop' },
      trace: { type: 'text', field: 'header.trace' },
      retries: { type: 'int', field: 'header.retries' },
      raw: { type: 'blob', field: 'header.raw' },
      topic: { type: 'text', field: '$topic' },
      part: { type: 'int', field: '$partition' },
      off: { type: 'bigint', field: '$offset' },
      at: { type: 'timestamp', field: '$timestamp' },
      at_ms: { type: 'bigint', field: '$timestamp' },
    },
  });
  const codec = new SinkCodec(config);
  const e = codec.expect(rec({ value: '{"status": "paid", "a": {"city": "Oslo"}}', key: '{"shop": "s1"}', headers: [['trace', 'x'], ['retries', '3'], ['raw', Buffer.from([0xff, 0])], ['trace', 'abc']] }));
  assert.deepEqual(canonical(e), {
    kind: 'row',
    key: { partition: 2, offset: '41' },
    row: { status: 'paid', city: 'Oslo', shop: 's1', trace: 'abc', retries: 3, raw: 'ff00', topic: 'shop.events', part: 2, off: '41', at: 1_767_225_600_000, at_ms: '1767225600000' },
  });
  // Missing key and headers: null (like a missing field).
  const m = codec.expect(rec({ value: '{"status": "new"}' }));
  assert.equal(m.kind, 'row');
  assert.deepEqual(canonical((m as { row: unknown }).row), { status: 'new', city: null, shop: null, trace: null, retries: null, raw: null, topic: 'shop.events', part: 2, off: '41', at: 1_767_225_600_000, at_ms: '1767225600000' });
});

test('a header that does not decode as its column type is quarantined (bad_header); a key that is no object for key.x, bad_key', () => {
  const config = sinkConfig({ ...base, columns: { n: { type: 'int', field: 'header.n' }, t: { type: 'text', field: 'header.t' }, shop: { type: 'text', field: 'key.shop' } } });
  const codec = new SinkCodec(config);
  const notInt = codec.decode(rec({ headers: [['n', 'three']] }));
  assert.ok(!notInt.ok && notInt.reason === 'bad_header' && notInt.detail.startsWith('n (int, field header.n): '), JSON.stringify(notInt));
  const notUtf8 = codec.decode(rec({ headers: [['t', Buffer.from([0xc3, 0x28])]] }));
  assert.deepEqual(notUtf8, { ok: false, reason: 'bad_header', detail: 't (text, field header.t): 2 byte(s) that are not UTF-8 text' });
  const bigInt = codec.decode(rec({ headers: [['n', '4294967296']] }));
  assert.ok(!bigInt.ok && bigInt.reason === 'bad_header');
  const badKey = codec.decode(rec({ key: 'plain' }));
  assert.ok(!badKey.ok && badKey.reason === 'bad_key' && /is not a JSON object, so it has no field shop/.test(badKey.detail), JSON.stringify(badKey));
});

test('the whole key: its text for a text column, its number for a number column', () => {
  const config = sinkConfig({ ...base, columns: { k: { type: 'text', field: 'key' }, n: { type: 'bigint', field: 'key' } } });
  const codec = new SinkCodec(config);
  assert.deepEqual(canonical((codec.expect(rec({ key: '12' })) as { row: unknown }).row), { k: '12', n: '12' });
  const d = codec.decode(rec({ key: 'abc' }));
  assert.ok(!d.ok && d.reason === 'bad_value', JSON.stringify(d));
});

test('upsert: a column from a header and the key column from the key', () => {
  const config = sinkConfig({ topic: 't', table: 'tb', mode: 'upsert', key: ['id'], columns: { id: { type: 'bigint', field: 'key' }, src: { type: 'text', field: 'header.source' }, at: { type: 'timestamp', field: '$timestamp' } } });
  const e = new SinkCodec(config).expect(rec({ key: '7', headers: [['source', 'web']], value: '{}' }));
  assert.deepEqual(canonical(e), { kind: 'row', key: { id: '7' }, row: { src: 'web', at: 1_767_225_600_000 } });
});

test('upsert: one key column from a field of the key (key.id) reads a key object, spelled canonically; the whole key in a key of several columns is refused', () => {
  const config = sinkConfig({ topic: 't', table: 'tb', mode: 'upsert', key: ['id'], columns: { id: { type: 'bigint', field: 'key.id' }, v: 'text' } });
  const codec = new SinkCodec(config);
  assert.deepEqual(canonical(codec.expect(rec({ key: '{"id":7}', value: '{"v":"x"}' }))), { kind: 'row', key: { id: '7' }, row: { v: 'x' } });
  // (Before: the key was read as the column's value itself, and every record was quarantined bad_key.)
  const spaced = codec.decode(rec({ key: '{"id": 7}', value: '{"v":"x"}' }));
  assert.deepEqual(spaced, { ok: false, reason: 'non_canonical_key', detail: 'the record key "{\\"id\\": 7}" names the key "{\\"id\\":7}", whose one accepted spelling is that (another spelling may place the key\'s records on another partition)' });
  const scalar = codec.decode(rec({ key: '7', value: '{"v":"x"}' }));
  assert.ok(!scalar.ok && scalar.reason === 'bad_key', JSON.stringify(scalar));
  assert.equal(
    problem({ topic: 't', table: 'tb', mode: 'upsert', key: ['a', 'b'], columns: { a: { type: 'bigint', field: 'key' }, b: 'text', c: 'text' } }),
    's.yaml: columns.a.field: key reads the whole record key, which with 2 key columns is an object of them; name the key\'s field, key.a',
  );
});

test('stored settings: a value path as before; other sources tagged (a field once a value path named key.x changes them)', () => {
  const cols = (field: string) => JSON.parse(new SinkJob(sinkConfig({ ...base, columns: { c: { type: 'text', field } } })).settings['columns']!) as unknown[][];
  assert.equal(cols('a.b')[0]![2], 'a.b');
  assert.equal(cols('value.a.b')[0]![2], 'a.b');
  assert.equal(cols('key.x')[0]![2], 'key:x');
  assert.equal(cols('header.h')[0]![2], 'header:h');
  assert.equal(cols('$topic')[0]![2], '$topic');
});

test('a column without field reads the value\'s field of its name, even one named key or value; field: value is the value\'s field value; derived paths keep naming the value', async () => {
  const { valueFieldSpec } = await import('../../src/jobs/sink/column-source.js');
  const config = sinkConfig({ ...base, columns: { key: 'text', header: 'text', value: { type: 'text', field: 'value' } } });
  assert.deepEqual(config.columns.map((c) => [c.source, c.field]), [['value', ['key']], ['value', ['header']], ['value', ['value']]]);
  const e = new SinkCodec(config).expect(rec({ value: '{"key": "k", "header": "h", "value": "v"}', key: 'other' }));
  assert.deepEqual(canonical((e as { row: unknown }).row), { key: 'k', header: 'h', value: 'v' });
  assert.equal(valueFieldSpec('a.b'), 'a.b');
  assert.equal(valueFieldSpec('key.id'), 'value.key.id');
  assert.equal(valueFieldSpec('header.x'), 'value.header.x');
  assert.equal(valueFieldSpec('value'), 'value.value');
  assert.deepEqual(parseColumnSource(valueFieldSpec('key.id')), { source: 'value', path: ['key', 'id'], spec: 'value.key.id' });
});

test("chaos --job's samples carry every source: key fields in a canonical key object, headers (a TTL and a version among them), metadata from Kafka; the broken ones are quarantined by reason", async () => {
  const { sampleRecords } = await import('../../src/jobs/sink/sample.js');
  const config = sinkConfig({
    topic: 't', table: 'tb', mode: 'upsert', key: ['id', 'shop'], ttlField: 'header.ttl', version: 'header.v',
    where: { any: [{ field: 'placedAt', exists: true }, { field: 'header.channel', in: ['web'] }] },
    columns: { id: { type: 'bigint', field: 'key.id' }, shop: { type: 'text', field: 'key.shop' }, customer: { type: 'text', required: true }, placed_at: { type: 'timestamp', field: 'placedAt' }, channel: { type: 'text', field: 'header.channel' }, prio: { type: 'int', field: 'header.prio' }, seen: { type: 'timestamp', field: 'header.seen' }, part: { type: 'int', field: '$partition' } },
  });
  assert.equal(typeof new SinkJob(config).audit.sample, 'function', 'sampled (chaos --job)');
  const codec = new SinkCodec(config);
  const samples = [...sampleRecords(config, { seed: 11, count: 3000, badRatio: 0.03 })];
  assert.equal(samples.length, 3000);
  const kinds = new Map<string, number>();
  for (const [i, s] of samples.entries()) {
    const r = rec({ key: s.key, value: s.value, offset: BigInt(i), headers: Object.entries(s.headers ?? {}) });
    const d = codec.decode(r);
    const kind = d.ok ? d.value.kind : d.reason;
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
    if (!d.ok || d.value.kind === 'skip') continue;
    // The key is read from the key object's fields; the version from header v, on rows and tombstones alike.
    const [, id, shop] = /^\{"id":(-?\d+),"shop":("[^"]*")\}$/.exec(s.key!)!;
    assert.deepEqual(canonical(d.value.key), [id, JSON.parse(shop!)]);
    assert.equal(d.value.version, Number(s.headers!['v']), `record ${i}`);
    if (d.value.kind === 'row') {
      assert.equal(d.value.values[7], 2, 'the partition, from Kafka');
      assert.equal(d.value.expiresAtMs, 1_767_225_600_000 + Number(s.headers!['ttl']) * 1000, 'expires at the record time + its header TTL');
    }
  }
  const n = (k: string) => kinds.get(k) ?? 0;
  const shown = JSON.stringify(Object.fromEntries(kinds));
  assert.ok(n('row') > 1800 && n('delete') > 100 && n('skip') > 300, shown);
  assert.ok(n('bad_header') > 10 && n('bad_value') + n('missing_field') + n('bad_key') > 10, shown);
  assert.deepEqual([...kinds.keys()].filter((k) => !['row', 'delete', 'skip', 'bad_header', 'bad_value', 'missing_field', 'bad_key'].includes(k)), [], shown);
  // A TTL read from the key is not sampled.
  assert.equal(new SinkJob(sinkConfig({ topic: 't', table: 'tb', mode: 'log', ttlField: 'key.ttl', columns: { a: 'text' } })).audit.sample, undefined);
});

test("chaos --job's samples set the fields a where reads that no column does, mostly to its literals, so that the filter keeps some records and leaves out others", async () => {
  const { sampleRecords } = await import('../../src/jobs/sink/sample.js');
  const config = sinkConfig({ topic: 't', table: 'tb', mode: 'log', where: { all: [{ field: 'header.kind', exists: true }, { field: 'value.channel', in: ['web', 'app'] }] }, columns: { a: { type: 'text', required: true } } });
  const codec = new SinkCodec(config);
  const kinds = [...sampleRecords(config, { seed: 3, count: 2000, badRatio: 0 })].map((s, i) => {
    const d = codec.decode(rec({ key: s.key, value: s.value, offset: BigInt(i), headers: Object.entries(s.headers ?? {}) }));
    return d.ok ? d.value.kind : d.reason;
  });
  const n = (k: string) => kinds.filter((x) => x === k).length;
  // Kept: header kind present (0.8) and channel one of the two (0.8 × 0.7): about 45 %.
  assert.equal(n('row') + n('skip'), 2000);
  assert.ok(n('row') > 700 && n('skip') > 700, `${n('row')} rows, ${n('skip')} filtered`);
});

test("upsert with JSON keys: a column, TTL or version reading a field the record key does not have is refused at start (every record would be quarantined); log mode's key may be any object", () => {
  const scalar = { topic: 't', table: 'tb', mode: 'upsert', key: ['id'] };
  assert.equal(
    problem({ ...scalar, columns: { id: 'bigint', shop: { type: 'text', field: 'key.shop' } } }),
    "s.yaml: columns.shop.field: key.shop is no field of the record key: an upsert's record key is the value of the key column id itself, which has no fields (another spelling is quarantined, non_canonical_key); read the whole key with key, or the field from the value",
  );
  const object = { topic: 't', table: 'tb', mode: 'upsert', key: ['id', 'shop'] };
  assert.equal(
    problem({ ...object, ttlField: 'key.ttl', columns: { id: { type: 'bigint', field: 'key.id' }, shop: 'text', a: 'text' } }),
    "s.yaml: ttlField: key.ttl is no field of the record key: an upsert's record key is the JSON object of the key columns' fields (id, shop), nothing else (another spelling is quarantined, non_canonical_key); read the whole key with key, or the field from the value",
  );
  assert.match(problem({ ...object, version: 'key.v', columns: { id: 'bigint', shop: 'text', a: 'text' } }), /^s\.yaml: version: key\.v is no field of the record key: /);
  // A filter on such a field would leave out every record (or none) without a word.
  assert.match(problem({ ...scalar, where: { not: { field: 'key.region', equals: 'eu' } }, columns: { id: 'bigint', a: 'text' } }), /^s\.yaml: where: key\.region is no field of the record key: an upsert's record key is the value of the key column id itself/);
  assert.doesNotThrow(() => sinkConfig({ ...object, where: { field: 'key.shop', equals: 's1' }, columns: { id: 'bigint', shop: 'text', a: 'text' } }));
  // A key column's field read again, the whole key, a registry key or a log-mode key: accepted.
  assert.doesNotThrow(() => sinkConfig({ ...object, columns: { id: { type: 'bigint', field: 'key.id' }, shop: 'text', id2: { type: 'bigint', field: 'key.id' }, k: { type: 'text', field: 'key' } } }));
  assert.doesNotThrow(() => sinkConfig({ ...scalar, columns: { id: 'bigint', k: { type: 'text', field: 'key' } } }));
  assert.doesNotThrow(() => sinkConfig({ ...scalar, format: 'avro', keyFormat: 'avro', columns: { id: 'bigint', shop: { type: 'text', field: 'key.shop' } } }));
  assert.doesNotThrow(() => sinkConfig({ ...base, columns: { shop: { type: 'text', field: 'key.shop' } } }));
});
