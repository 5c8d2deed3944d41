import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isLosslessNumber } from 'lossless-json';
import { avroType, decimalText, decodeAvro, encodeAvro } from '../../src/formats/avro.js';
import { decodeJsonSchema, jsonSchema } from '../../src/formats/json-schema.js';
import { decodeProtobuf, protoSchema } from '../../src/formats/protobuf.js';
import { compile } from '../../src/formats/compile.js';
import { readWireHeader, withWireHeader } from '../../src/formats/wire.js';
import { deriveColumns } from '../../src/jobs/sink/derive-columns.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

test('the wire header: magic byte, 4-byte big-endian schema id; anything else says what it found', () => {
  assert.deepEqual(readWireHeader(withWireHeader(0x01020304, Buffer.from([9]))), { ok: true, id: 0x01020304, payload: Buffer.from([9]) });
  assert.deepEqual(readWireHeader(Buffer.from('{"a":1}')), { ok: false, detail: "no magic byte 0 of the Schema Registry wire format (its first byte is 0x7b '{'): not written by a Schema Registry serializer" });
  assert.deepEqual(readWireHeader(Buffer.from([0, 0, 1])), { ok: false, detail: "3 bytes: too short for the wire format's magic byte and 4-byte schema id" });
  assert.match((readWireHeader(Buffer.alloc(0)) as { detail: string }).detail, /it is empty/);
});

test('Avro long is a BigInt, exact over the whole int64 range, in every spelling of long (name, object form, union, map, array)', () => {
  const t = avroType(JSON.stringify({
    type: 'record',
    name: 'L',
    fields: [
      { name: 'a', type: 'long' },
      { name: 'b', type: { type: 'long', 'connect.name': 'x' } },
      { name: 'c', type: ['null', 'long'] },
      { name: 'm', type: { type: 'map', values: 'long' } },
      { name: 'l', type: { type: 'array', items: 'long' } },
    ],
  }));
  for (const v of [INT64_MIN, INT64_MAX, 0n, -1n, 2n ** 53n + 1n, -(2n ** 53n) - 1n]) {
    const back = decodeAvro(t, encodeAvro(t, { a: v, b: v, c: v, m: { k: v }, l: [v] })) as Record<string, unknown>;
    assert.deepEqual([back['a'], back['b'], back['c'], (back['m'] as Record<string, bigint>)['k'], (back['l'] as bigint[])[0]], [v, v, v, v, v]);
  }
});

test('Avro logical types: decimal (bytes and fixed) keeps its digits, uuid, date, timestamp-millis and -micros (cut to ms, rounding down)', () => {
  const t = avroType(JSON.stringify({
    type: 'record',
    name: 'T',
    fields: [
      { name: 'd', type: { type: 'bytes', logicalType: 'decimal', precision: 40, scale: 2 } },
      { name: 'f', type: { type: 'fixed', name: 'F', size: 16, logicalType: 'decimal', precision: 38, scale: 0 } },
      { name: 'u', type: { type: 'string', logicalType: 'uuid' } },
      { name: 'day', type: { type: 'int', logicalType: 'date' } },
      { name: 'ms', type: { type: 'long', logicalType: 'timestamp-millis' } },
      { name: 'us', type: { type: 'long', logicalType: 'timestamp-micros' } },
      { name: 'n', type: ['null', { type: 'long', logicalType: 'timestamp-micros' }], default: null },
    ],
  }));
  const v = decodeAvro(t, encodeAvro(t, { d: '-12345678901234567890123.50', f: '-170141183460469231731687303715884105728', u: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', day: new Date(Date.UTC(1900, 0, 1)), ms: new Date(-1), us: new Date(1700000000123), n: null })) as Record<string, unknown>;
  assert.ok(isLosslessNumber(v['d']));
  assert.equal(String(v['d']), '-12345678901234567890123.50');
  assert.equal(String(v['f']), '-170141183460469231731687303715884105728');
  assert.equal(v['u'], 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11');
  assert.deepEqual([(v['day'] as Date).getTime(), (v['ms'] as Date).getTime(), (v['us'] as Date).getTime(), v['n']], [Date.UTC(1900, 0, 1), -1, 1700000000123, null]);
  // A micros value that is not a whole millisecond is cut down (towards the past): -1 µs is -1 ms.
  const us = avroType(JSON.stringify({ type: 'long', logicalType: 'timestamp-micros' }));
  const raw = avroType('"long"');
  assert.equal((decodeAvro(us, encodeAvro(raw, -1n)) as Date).getTime(), -1);
  assert.equal((decodeAvro(us, encodeAvro(raw, 1999n)) as Date).getTime(), 1);
  assert.equal(decimalText(5n, 3), '0.005');
  assert.equal(decimalText(-150n, 2), '-1.50');
  assert.equal(decimalText(12n, -2), '1200');
});

test('a payload that does not match its Avro schema throws (the sink quarantines it as bad_payload)', () => {
  const t = avroType(JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 's', type: 'string' }, { name: 'l', type: 'long' }] }));
  const good = encodeAvro(t, { s: 'abc', l: 5n });
  assert.throws(() => decodeAvro(t, good.subarray(0, 3)));
  assert.throws(() => decodeAvro(t, Buffer.concat([good, Buffer.from([1])])), /trailing data/);
});

test('Protobuf: the message indexes pick the type; int64 exact as BigInt, enums by name, maps, repeated, nested, Timestamp as a Date, proto3 defaults', () => {
  const text = `syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Other { string x = 1; }
message Order {
  int64 id = 1; uint64 big = 2; string status = 3; map<string, int32> qty = 4; repeated sint64 tags = 5;
  Inner inner = 6; Kind kind = 7; google.protobuf.Timestamp at = 8; optional string note = 9; double total = 10;
  message Inner { bool ok = 1; }
  enum Kind { PLACED = 0; PAID = 1; }
}`;
  const s = protoSchema(text);
  assert.deepEqual(s.messages.map((m) => m.name), ['Other', 'Order']);
  const Order = s.root.lookupType('shop.Order');
  const msg = Order.encode(Order.fromObject({ id: INT64_MIN.toString(), big: '18446744073709551615', status: 's', qty: { a: 2 }, tags: [INT64_MAX.toString()], inner: { ok: true }, kind: 1, at: { seconds: 1700000000, nanos: 123_456_789 }, total: 1.5 })).finish();
  // Indexes [1] (the second message of the file): a count of 1, then index 1, zigzag varints.
  const v = decodeProtobuf(s, Buffer.concat([Buffer.from([2, 2]), Buffer.from(msg)])) as Record<string, unknown>;
  assert.deepEqual(v, { id: INT64_MIN, big: 2n ** 64n - 1n, status: 's', qty: { a: 2 }, tags: [INT64_MAX], inner: { ok: true }, kind: 'PAID', at: new Date(1700000000123), note: null, total: 1.5 });
  // A single 0 names the first message; absent proto3 scalars take their defaults.
  const Other = s.root.lookupType('shop.Other');
  assert.deepEqual(decodeProtobuf(s, Buffer.concat([Buffer.from([0]), Buffer.from(Other.encode({}).finish())])), { x: '' });
  assert.throws(() => decodeProtobuf(s, Buffer.from([2, 8])), /message index 4 is not a message/);
});

test('JSON Schema: validated with its draft, numbers kept exact; a mismatch says where', () => {
  const s = jsonSchema(JSON.stringify({ $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { id: { type: 'integer' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['id'] }));
  const v = decodeJsonSchema(s, Buffer.from('{"id": 9223372036854775807, "tags": ["a"]}')) as Record<string, unknown>;
  assert.equal(String(v['id']), '9223372036854775807');
  assert.throws(() => decodeJsonSchema(s, Buffer.from('{"tags": ["a"]}')), /must have required property 'id'/);
  assert.throws(() => decodeJsonSchema(s, Buffer.from('{"id": 1, "tags": [1]}')), /\/tags\/0 must be string/);
  assert.throws(() => decodeJsonSchema(s, Buffer.from('{"id": ')));
});

test('columns derived from Avro, Protobuf and JSON Schema; what has no column type is left out and said so', () => {
  const avro = deriveColumns(compile(1, 'AVRO', JSON.stringify({
    type: 'record',
    name: 'O',
    fields: [
      { name: 'orderId', type: 'long' },
      { name: 'customer', type: { type: 'record', name: 'C', fields: [{ name: 'name', type: 'string' }] } },
      { name: 'currency', type: 'string', default: 'EUR' },
      { name: 'when', type: ['null', { type: 'long', logicalType: 'timestamp-millis' }], default: null },
      { name: 'blob', type: 'bytes' },
      { name: 'either', type: ['int', 'string'] },
      { name: 'tags', type: { type: 'array', items: 'string' } },
    ],
  })));
  assert.deepEqual(avro.columns, [
    { name: 'order_id', type: 'bigint', field: 'orderId' },
    { name: 'customer_name', type: 'text', field: 'customer.name' },
    { name: 'currency', type: 'text', field: 'currency', default: 'EUR' },
    { name: 'when', type: 'timestamp', field: 'when' },
    { name: 'tags', type: 'list<text>', field: 'tags' },
  ]);
  assert.deepEqual(avro.skipped, ['blob: Avro bytes has no column type here', 'either: a union of 2 types']);
  const proto = deriveColumns(compile(2, 'PROTOBUF', 'syntax = "proto3";\nmessage M { int64 id = 1; uint64 u = 2; map<string, double> m = 3; bytes b = 4; N n = 5; }\nmessage N { sint32 x = 1; }\n'));
  assert.deepEqual(proto.columns.map((c) => [c.name, c.type]), [['id', 'bigint'], ['u', 'decimal'], ['m', 'map<text, double>'], ['n_x', 'int']]);
  const json = deriveColumns(compile(3, 'JSON', JSON.stringify({ type: 'object', properties: { id: { type: 'integer' }, at: { type: 'string', format: 'date-time' }, ref: { type: ['string', 'null'], format: 'uuid' }, attrs: { type: 'object', additionalProperties: { type: 'number' } } } })));
  assert.deepEqual(json.columns.map((c) => [c.name, c.type]), [['id', 'bigint'], ['at', 'timestamp'], ['ref', 'uuid'], ['attrs', 'map<text, double>']]);
  assert.match((compile(4, 'AVRO', '{"type": "nope"}') as { problem: string }).problem, /^it does not compile: /);
});
