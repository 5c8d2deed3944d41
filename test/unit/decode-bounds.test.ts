// The bounds on what one record may make a decoder allocate or compute (src/formats/bounds.ts), one
// exact case each: a count or length past the bytes left, empty items past their cap, nesting past
// MAX_NESTING, a record decoding to more values than its budget, a huge decimal or integer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeEvent } from '../../src/jobs/events/event.js';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { MAX_EMPTY_ITEMS, MAX_NESTING } from '../../src/formats/bounds.js';
import { createDecoder, jsonDecoder, type Decoder } from '../../src/formats/decoder.js';
import { SchemaCache } from '../../src/formats/schema-cache.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { zigzag } from '../fixtures/varint.js';
import type { SchemaRegistry, SchemaType } from '../../src/registry/schema-registry.js';

/** A decoder over one schema, put in its cache through the cache's own fetch from an in-memory registry. */
async function decoderOf(format: 'avro' | 'protobuf' | 'json-schema', type: SchemaType, schema: string): Promise<Decoder> {
  const registry = { config: { url: 'memory:' }, byId: async () => ({ type, schema, references: [] }) };
  const cache = new SchemaCache(registry as unknown as SchemaRegistry);
  await cache.fetch([7]);
  return createDecoder(format, cache);
}

const TAGGED = JSON.stringify({ type: 'record', name: 'T', fields: [{ name: 'id', type: 'long' }, { name: 'tags', type: { type: 'array', items: 'string' } }, { name: 'm', type: { type: 'map', values: 'long' } }] });

test('Avro: an array block claiming 2^31−1 items in 11 bytes, and a map block claiming 2^60 entries, are bad_payload before avsc allocates', async () => {
  const d = await decoderOf('avro', 'AVRO', TAGGED);
  const array = withWireHeader(7, Buffer.from([2, ...zigzag(2n ** 31n - 1n)]));
  assert.equal(array.length, 11);
  assert.deepEqual(d.decode(array), { ok: false, reason: 'bad_payload', detail: 'schema id 7 (AVRO): an array block at byte 1 claims 2147483647 items; 0 bytes are left' });
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([2, 0, ...zigzag(2n ** 60n)]))), { ok: false, reason: 'bad_payload', detail: `schema id 7 (AVRO): a map block at byte 2 claims ${2 ** 60} items; 0 bytes are left` });
  // A negative count (a block with its size in bytes) is checked the same way.
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([2, ...zigzag(-(2n ** 40n)), 0]))), { ok: false, reason: 'bad_payload', detail: `schema id 7 (AVRO): an array block at byte 1 claims ${2 ** 40} items; 0 bytes are left` });
  // A valid record still decodes.
  const t = avroType(TAGGED);
  const good = d.decode(withWireHeader(7, encodeAvro(t, { id: 1n, tags: ['a', 'b'], m: { k: 2n } })));
  assert.ok(good.ok);
  assert.deepEqual({ ...(good.value as object) }, { id: 1n, tags: ['a', 'b'], m: { k: 2n } });
});

test(`Avro: items that take no bytes (null) are read up to ${MAX_EMPTY_ITEMS} per record; past that, too_large`, async () => {
  const d = await decoderOf('avro', 'AVRO', JSON.stringify({ type: 'array', items: 'null' }));
  const atCap = d.decode(withWireHeader(7, Buffer.from([...zigzag(BigInt(MAX_EMPTY_ITEMS)), 0])));
  assert.ok(atCap.ok);
  assert.equal((atCap.value as unknown[]).length, MAX_EMPTY_ITEMS);
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([...zigzag(BigInt(MAX_EMPTY_ITEMS)), 2, 0]))), {
    ok: false,
    reason: 'too_large',
    detail: `schema id 7 (AVRO): arrays of items that take no bytes hold more than ${MAX_EMPTY_ITEMS} items (the block at byte 3 claims 1)`,
  });
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([...zigzag(2n ** 31n - 1n), 0]))), {
    ok: false,
    reason: 'too_large',
    detail: `schema id 7 (AVRO): arrays of items that take no bytes hold more than ${MAX_EMPTY_ITEMS} items (the block at byte 0 claims 2147483647)`,
  });
});

test('Avro: a record of one byte that decodes to a thousand values is bounded by the value budget (too_large)', async () => {
  const wide = { type: 'array', items: { type: 'record', name: 'W', fields: [{ name: 'b', type: 'boolean' }, ...Array.from({ length: 1000 }, (_, i) => ({ name: `n${i}`, type: 'null' }))] } };
  const d = await decoderOf('avro', 'AVRO', JSON.stringify(wide));
  const n = 1000;
  const payload = Buffer.from([...zigzag(BigInt(n)), ...Array(n).fill(1), 0]);
  assert.deepEqual(d.decode(withWireHeader(7, payload)), { ok: false, reason: 'too_large', detail: `schema id 7 (AVRO): it decodes to more than ${65_536 + 8 * payload.length} values (records, fields and items) from ${payload.length} bytes` });
});

test(`Avro: a recursive schema nests at most ${MAX_NESTING} deep (too_large), whatever the call stack allows`, async () => {
  const d = await decoderOf('avro', 'AVRO', JSON.stringify({ type: 'record', name: 'N', fields: [{ name: 'next', type: ['null', 'N'] }] }));
  const chain = (depth: number) => withWireHeader(7, Buffer.from([...Array(depth).fill(2), 0]));
  assert.ok(d.decode(chain(40)).ok);
  assert.deepEqual(d.decode(chain(20_000)), { ok: false, reason: 'too_large', detail: `schema id 7 (AVRO): values nest more than ${MAX_NESTING} deep` });
});

test('Avro: a decimal of more than 1,024 bytes is too_large (writing out its digits is quadratic)', async () => {
  const d = await decoderOf('avro', 'AVRO', JSON.stringify({ type: 'bytes', logicalType: 'decimal', precision: 10_000, scale: 0 }));
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([...zigzag(1_000_000n), ...Buffer.alloc(1_000_000, 0x7f)]))), { ok: false, reason: 'too_large', detail: 'schema id 7 (AVRO): a decimal of 1000000 bytes; at most 1024 are read' });
});

const PROTO = 'syntax = "proto3";\nmessage N { int64 id = 1; N next = 2; repeated N many = 3; }\n';

test('Protobuf: message indexes claiming more than the bytes left are bad_payload; messages nested past 100 are too_large', async () => {
  const d = await decoderOf('protobuf', 'PROTOBUF', PROTO);
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([0xfe, 0xff, 0xff, 0xff, 0x0f, 0]))), { ok: false, reason: 'bad_payload', detail: 'schema id 7 (PROTOBUF): the message indexes claim 2147483647 indexes; 1 bytes are left' });
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.from([0x01, 0]))), { ok: false, reason: 'bad_payload', detail: 'schema id 7 (PROTOBUF): the message indexes claim -1 indexes; 1 bytes are left' });
  // 150 levels of `next`, each a tag and a one-or-two-byte length.
  let deep = Buffer.alloc(0);
  for (let i = 0; i < 150; i++) {
    const len = deep.length;
    deep = Buffer.concat([Buffer.from(len < 128 ? [0x12, len] : [0x12, (len & 0x7f) | 0x80, len >> 7]), deep]);
  }
  assert.deepEqual(d.decode(withWireHeader(7, Buffer.concat([Buffer.from([0]), deep]))), { ok: false, reason: 'too_large', detail: 'schema id 7 (PROTOBUF): messages nest more than 100 deep' });
});

test('Protobuf: empty messages of a wide schema (two bytes, hundreds of fields each) are bounded by the value budget (too_large)', async () => {
  const fields = Array.from({ length: 300 }, (_, i) => `  int32 f${i} = ${i + 2};`).join('\n');
  const d = await decoderOf('protobuf', 'PROTOBUF', `syntax = "proto3";\nmessage Box { repeated Wide items = 1; }\nmessage Wide {\n${fields}\n}\n`);
  const payload = Buffer.concat([Buffer.from([0]), Buffer.from(Array(2000).fill([0x0a, 0]).flat())]);
  assert.deepEqual(d.decode(withWireHeader(7, payload)), { ok: false, reason: 'too_large', detail: `schema id 7 (PROTOBUF): it decodes to more than ${65_536 + 8 * payload.length} values (messages, fields and items) from ${payload.length} bytes` });
});

test(`JSON, JSON Schema and the events codec: nesting past ${MAX_NESTING} is too_large, decided by the bound and not by the call stack`, async () => {
  const deep = (d: number) => Buffer.from('['.repeat(d) + ']'.repeat(d));
  assert.ok(jsonDecoder.decode(deep(MAX_NESTING)).ok);
  const detail = `it nests arrays and objects more than ${MAX_NESTING} deep`;
  assert.deepEqual(jsonDecoder.decode(deep(MAX_NESTING + 1)), { ok: false, reason: 'too_large', detail });
  assert.deepEqual(jsonDecoder.decode(deep(20_000)), { ok: false, reason: 'too_large', detail });
  // Brackets inside strings are text, not nesting.
  assert.ok(jsonDecoder.decode(Buffer.from(`{"a":"${'['.repeat(500)}\\""}`)).ok);
  const js = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'array' }));
  assert.deepEqual(js.decode(withWireHeader(7, deep(20_000))), { ok: false, reason: 'too_large', detail: `schema id 7 (JSON): ${detail}` });
  assert.deepEqual(decodeEvent(Buffer.from(`{"id":1,"x":${'['.repeat(20_000)}]}`), 1_000_000), { ok: false, reason: 'too_large', detail });
});

test('the events codec: an integer of a million digits is out of range by its length, not converted (and not written out in the detail)', () => {
  const digits = '9'.repeat(1_000_000);
  assert.deepEqual(decodeEvent(Buffer.from(`{"id":${digits},"ts":0,"source":"s","client":"c","health":0}`), 2_000_000), { ok: false, reason: 'id_out_of_range', detail: 'id <more than 40 digits> is outside int64' });
  assert.deepEqual(decodeEvent(Buffer.from(`{"id":1,"ts":-${digits},"source":"s","client":"c","health":0}`), 2_000_000), { ok: false, reason: 'ts_out_of_range', detail: 'ts -<more than 40 digits> is outside ±8640000000000000' });
  assert.deepEqual(decodeEvent(Buffer.from(`{"id": 1, "ts": 0, "source": "s", "client": "c", "health": ${digits}}`), 2_000_000), { ok: false, reason: 'invalid_health', detail: 'health <more than 40 digits> is not 0, 1 or 2' });
  // Forty digits are still written out.
  assert.deepEqual(decodeEvent(Buffer.from(`{"id":${'9'.repeat(40)},"ts":0,"source":"s","client":"c","health":0}`)), { ok: false, reason: 'id_out_of_range', detail: `id ${'9'.repeat(40)} is outside int64` });
});

test('JSON Schema: uniqueItems over a 64 KiB record of 16,000 small arrays is decided in linear time (ajv compares every pair: seconds), with its meaning kept', async () => {
  const js = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', properties: { a: { type: 'array', uniqueItems: true } } }));
  const record = (items: unknown[]) => withWireHeader(7, Buffer.from(JSON.stringify({ a: items })));
  const many = Array.from({ length: 16_000 }, (_, i) => [i]);
  const started = performance.now();
  assert.ok(js.decode(record(many)).ok);
  const ms = performance.now() - started;
  // Generous: ajv's own keyword took about 9 s here; the linear check takes tens of ms.
  assert.ok(ms < 3000, `took ${Math.round(ms)} ms`);
  // Equal as JSON values: key order and 1 against 1.0 do not make items distinct; a type does.
  assert.deepEqual(js.decode(withWireHeader(7, Buffer.from('{"a":[{"x":1,"y":[2]},{"y":[2],"x":1.0}]}'))), {
    ok: false,
    reason: 'bad_payload',
    detail: 'the payload does not match schema id 7 (JSON): /a must pass "uniqueItems" keyword validation',
  });
  assert.ok(js.decode(record([1, '1', [1], { '1': 1 }, null, true])).ok);
});

test('JSON Schema: patterns run in linear time (RE2), so ReDoS patterns validate at once; one RE2 cannot run and that nests a repetition makes the schema bad_schema; safe lookarounds still run', async () => {
  // Each of these backtracks through about 2^40 ways in JavaScript before failing on the last character;
  // ^(x|xx)*$ has no nested quantifier, so safe-regex2 alone would have let it through.
  for (const [pattern, bad, good] of [['^(a+)+$', `${'a'.repeat(40)}b`, 'aaaa'], ['^(x|xx)*$', `${'x'.repeat(60)}y`, 'xxx']] as const) {
    const js = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', properties: { name: { type: 'string', pattern } } }));
    const started = performance.now();
    const d = js.decode(withWireHeader(7, Buffer.from(JSON.stringify({ name: bad }))));
    assert.ok(performance.now() - started < 1000, pattern);
    assert.deepEqual(d, { ok: false, reason: 'bad_payload', detail: `the payload does not match schema id 7 (JSON): /name must match pattern "${pattern}"` });
    assert.ok(js.decode(withWireHeader(7, Buffer.from(JSON.stringify({ name: good })))).ok, pattern);
  }
  const nested = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', patternProperties: { '^(x+)*$': { type: 'string' } } }));
  assert.deepEqual(nested.decode(withWireHeader(7, Buffer.from('{"xxx":"s"}'))), { ok: true, schemaId: 7, value: { xxx: 's' } });
  assert.equal((nested.decode(withWireHeader(7, Buffer.from('{"xxx":1}'))) as { reason?: string }).reason, 'bad_payload');
  // A backreference (no linear engine runs one) under a nested repetition: the schema is not used.
  const evil = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', properties: { name: { type: 'string', pattern: '^(a+)+\\1$' } } }));
  assert.deepEqual(evil.decode(withWireHeader(7, Buffer.from(JSON.stringify({ name: `${'a'.repeat(40)}b` })))), {
    ok: false,
    reason: 'bad_schema',
    detail: 'schema id 7 (JSON) cannot be used: it does not compile: its pattern "^(a+)+\\\\1$" has a lookaround or a backreference (which no linear-time engine runs) and repeats a repetition, which can take exponential time on a crafted value; register the schema without one of them',
  });
  // A lookahead without nested repetition runs in JavaScript.
  const ahead = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', properties: { code: { type: 'string', pattern: '^(?=.*[0-9])[a-z0-9]+$' } } }));
  assert.deepEqual(ahead.decode(withWireHeader(7, Buffer.from('{"code":"ab1"}'))), { ok: true, schemaId: 7, value: { code: 'ab1' } });
  assert.equal((ahead.decode(withWireHeader(7, Buffer.from('{"code":"abc"}'))) as { reason?: string }).reason, 'bad_payload');
  const safe = await decoderOf('json-schema', 'JSON', JSON.stringify({ type: 'object', properties: { name: { type: 'string', pattern: '^[a-z]+[0-9]{0,3}$' } }, patternProperties: { '^x_[a-z]+$': { type: 'integer' } } }));
  assert.ok(safe.decode(withWireHeader(7, Buffer.from('{"name":"abc12","x_q":1}'))).ok);
  assert.deepEqual(safe.decode(withWireHeader(7, Buffer.from('{"name":"ABC"}'))), { ok: false, reason: 'bad_payload', detail: 'the payload does not match schema id 7 (JSON): /name must match pattern "^[a-z]+[0-9]{0,3}$"' });
  assert.equal((safe.decode(withWireHeader(7, Buffer.from('{"x_q":"s"}'))) as { reason?: string }).reason, 'bad_payload');
});
