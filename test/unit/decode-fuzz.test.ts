// Every decoder, fed arbitrary bytes and adversarial ones (valid records cut short, bit-flipped, with a
// huge count or length spliced in, nested deep), gives a value or a quarantine reason it documents:
// never a throw, within a time and heap budget per record (issue 42). Seeded: the seed is printed, and
// FUZZ_SEED=<seed> runs the same cases again; FUZZ_RUNS sets the cases per decoder (100,000 by default).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import fc from 'fast-check';
import protobuf from 'protobufjs';
import { QuarantineReasons, decodeEvent, encodeEvent } from '../../src/jobs/events/event.js';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { createDecoder, jsonDecoder, type Decoder } from '../../src/formats/decoder.js';
import { varint, zigzag } from '../fixtures/varint.js';
import { protoSchema } from '../../src/formats/protobuf.js';
import { SchemaCache } from '../../src/formats/schema-cache.js';
import { withWireHeader } from '../../src/formats/wire.js';
import type { SchemaRegistry, SchemaType } from '../../src/registry/schema-registry.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';

const SEED = process.env['FUZZ_SEED'] === undefined ? (Date.now() ^ (Math.random() * 0x7fffffff)) | 0 : Number(process.env['FUZZ_SEED']);
const RUNS = Number(process.env['FUZZ_RUNS'] ?? 100_000);
/**
 * Per record, in CPU time (process.cpuUsage: wall time on a shared CI machine measures the neighbours):
 * a decode of at most a few KiB takes microseconds; the budget leaves room for a GC pause.
 */
const TIME_BUDGET_MS = 250;
/**
 * Per record: what is left on the heap after one decode (the value and garbage not yet collected),
 * read from V8's heap statistics (process.memoryUsage's heapUsed, without its 25 µs read of the RSS).
 */
const HEAP_BUDGET_BYTES = 64 * 1024 * 1024;

const REGISTRY_REASONS = ['missing_magic_byte', 'unknown_schema', 'wrong_schema_type', 'bad_schema', 'bad_payload', 'too_large'];

// ---- schemas, put in the decoders' cache through its own API (fetch) from an in-memory registry ----

const AVRO = {
  type: 'record',
  name: 'Node',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'name', type: ['null', 'string'], default: null },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'counts', type: { type: 'map', values: 'long' } },
    { name: 'nulls', type: { type: 'array', items: 'null' } },
    { name: 'flags', type: { type: 'array', items: 'boolean' } },
    { name: 'price', type: { type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 } },
    { name: 'at', type: { type: 'long', logicalType: 'timestamp-micros' } },
    { name: 'kind', type: { type: 'enum', name: 'Kind', symbols: ['A', 'B'] } },
    { name: 'next', type: ['null', 'Node'], default: null },
  ],
};
const PROTO = `syntax = "proto3";
message Node {
  int64 id = 1;
  string name = 2;
  repeated string tags = 3;
  map<string, int64> counts = 4;
  bytes data = 5;
  Node next = 6;
  repeated sint32 nums = 7;
  repeated Node children = 8;
}
`;
const JSON_SCHEMA = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  $defs: { node: { type: 'object', properties: { id: { type: 'integer' }, next: { $ref: '#/$defs/node' }, tags: { type: 'array', items: { type: 'string' } } }, required: ['id'] } },
  $ref: '#/$defs/node',
};
const IDS = { avro: 1, protobuf: 2, json: 3, badAvro: 4 };
const REGISTERED: Record<number, { type: SchemaType; schema: string }> = {
  [IDS.avro]: { type: 'AVRO', schema: JSON.stringify(AVRO) },
  [IDS.protobuf]: { type: 'PROTOBUF', schema: PROTO },
  [IDS.json]: { type: 'JSON', schema: JSON.stringify(JSON_SCHEMA) },
  [IDS.badAvro]: { type: 'AVRO', schema: '{"type": "nope"}' },
};

async function registryDecoders(): Promise<Record<'avro' | 'protobuf' | 'json-schema', Decoder>> {
  const registry = { config: { url: 'memory:' }, byId: async (id: number) => (REGISTERED[id] === undefined ? null : { ...REGISTERED[id], references: [] }) };
  const cache = new SchemaCache(registry as unknown as SchemaRegistry);
  await cache.fetch(Object.values(IDS));
  return { avro: createDecoder('avro', cache), protobuf: createDecoder('protobuf', cache), 'json-schema': createDecoder('json-schema', cache) };
}

// ---- adversarial bytes ----


/** Huge counts and lengths, in both varint spellings, and a few near the edges. */
const hugeNumber = fc.oneof(
  fc.constantFrom(2n ** 31n - 1n, 2n ** 32n, 2n ** 60n, 2n ** 63n - 1n, -(2n ** 63n), -1n, -(2n ** 31n), 65_537n, 1_000_000n),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
);
const hugeVarint = fc.tuple(hugeNumber, fc.boolean()).map(([n, z]) => (z ? zigzag(n) : varint(n < 0n ? -n : n)));

/** A valid record, mangled: cut short, bits flipped, a huge count spliced in, bytes inserted or repeated. */
function mangled(valid: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  return fc.tuple(valid, fc.nat(), fc.nat(), hugeVarint, fc.uint8Array({ maxLength: 8 }), fc.integer({ min: 0, max: 4 })).map(([b, at, bit, huge, extra, how]) => {
    const i = b.length === 0 ? 0 : at % (b.length + 1);
    switch (how) {
      case 0: // truncated
        return b.subarray(0, i);
      case 1: {
        // bit flips
        const c = Buffer.from(b);
        if (c.length > 0) c[i % c.length]! ^= 1 << (bit % 8);
        if (c.length > 1) c[(i + bit) % c.length]! ^= 1 << ((bit >> 3) % 8);
        return c;
      }
      case 2: // a huge count or length replacing what follows
        return Buffer.concat([b.subarray(0, i), Buffer.from(huge)]);
      case 3: // a huge count or length inserted, the rest kept
        return Buffer.concat([b.subarray(0, i), Buffer.from(huge), b.subarray(i)]);
      default: // random bytes inserted
        return Buffer.concat([b.subarray(0, i), Buffer.from(extra), b.subarray(i)]);
    }
  });
}

const smallText = fc.string({ maxLength: 12 });
const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });

// Avro: valid Nodes (a short chain of next), and deep chains written by hand (union branch 1, then a Node).
const avroT = avroType(JSON.stringify(AVRO));
const avroLeaf = fc.record({
  id: int64,
  name: fc.option(smallText, { nil: null }),
  tags: fc.array(smallText, { maxLength: 4 }),
  counts: fc.dictionary(smallText, int64, { maxKeys: 3 }),
  nulls: fc.array(fc.constant(null), { maxLength: 4 }),
  flags: fc.array(fc.boolean(), { maxLength: 4 }),
  price: fc.bigInt({ min: -(10n ** 11n), max: 10n ** 11n }).map((n) => (Number(n) / 100).toFixed(2)),
  at: fc.integer({ min: -1e12, max: 1e12 }).map((ms) => new Date(ms)),
  kind: fc.constantFrom('A', 'B'),
});
const avroValid = fc.tuple(avroLeaf, fc.integer({ min: 0, max: 2 })).map(([leaf, depth]) => {
  let v: Record<string, unknown> = { ...leaf, next: null };
  for (let i = 0; i < depth; i++) v = { ...leaf, next: v };
  return encodeAvro(avroT, v);
});
/** A Node chain `depth` deep of empty nodes: id 0, name null, four empty arrays/maps, price 0, at 0, kind A. */
const avroDeep = fc.integer({ min: 90, max: 400 }).map((depth) => {
  const node = [0, 0, 0, 0, 0, 0, 0, 0, 0];
  const out: number[] = [];
  for (let i = 0; i < depth; i++) out.push(...node, 2);
  out.push(...node, 0);
  return Buffer.from(out);
});
/** Blocks of items that take no bytes (the `nulls` array): counts near and past the cap. */
const avroEmpties = fc.array(fc.integer({ min: 0, max: 40_000 }), { minLength: 1, maxLength: 4 }).map((counts) =>
  Buffer.from([0, 0, 0, 0, ...counts.flatMap((c) => (c === 0 ? [] : zigzag(BigInt(c)))), 0, 0, 0, 0, 0, 0]),
);
const avroBytes = fc.oneof(avroValid, mangled(avroValid), avroDeep, mangled(avroDeep), avroEmpties, fc.uint8Array({ maxLength: 48 }).map((a) => Buffer.from(a)));

// Protobuf: valid Nodes, deep chains of `next` (field 6), and mangled ones; all after the message index 0.
const protoT = protoSchema(PROTO).messages[0]!;
const protoLeaf = fc.record({
  id: int64.map(String),
  name: smallText,
  tags: fc.array(smallText, { maxLength: 4 }),
  counts: fc.dictionary(smallText, int64.map(String), { maxKeys: 3 }),
  data: fc.uint8Array({ maxLength: 8 }),
  nums: fc.array(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), { maxLength: 4 }),
});
const protoValid = fc.tuple(protoLeaf, fc.integer({ min: 0, max: 2 })).map(([leaf, depth]) => {
  let v: Record<string, unknown> = leaf;
  for (let i = 0; i < depth; i++) v = { ...leaf, next: v, children: [v] };
  return Buffer.from(protoT.encode(protoT.fromObject(v)).finish());
});
const protoDeep = fc.integer({ min: 90, max: 300 }).map((depth) => {
  let inner = Buffer.alloc(0);
  for (let i = 0; i < depth; i++) inner = Buffer.concat([Buffer.from([0x32, ...varint(BigInt(inner.length))]), inner]);
  return inner;
});
const withIndex = (b: Buffer) => Buffer.concat([Buffer.from([0]), b]);
const protoBytes = fc.oneof(
  protoValid.map(withIndex),
  mangled(protoValid.map(withIndex)),
  protoDeep.map(withIndex),
  mangled(protoDeep.map(withIndex)),
  fc.tuple(hugeVarint, fc.uint8Array({ maxLength: 16 })).map(([count, rest]) => Buffer.from([...count, ...rest])),
  fc.uint8Array({ maxLength: 48 }).map((a) => Buffer.from(a)),
);

// JSON: valid values (objects, arrays, numbers of many digits), deep nesting, and mangled text.
const jsonValue = fc.jsonValue({ maxDepth: 4 }).map((v) => Buffer.from(JSON.stringify(v) ?? 'null'));
const jsonDeep = fc.tuple(fc.integer({ min: 90, max: 2_000 }), fc.boolean(), fc.boolean()).map(([d, obj, close]) => {
  const open = obj ? '{"a":'.repeat(d) : '['.repeat(d);
  return Buffer.from(open + '1' + (close ? (obj ? '}' : ']').repeat(d) : ''));
});
const jsonBig = fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('', '-', '0.', '1e')).map(([n, pre]) => Buffer.from(`{"id":${pre}${'9'.repeat(n)}}`));
const jsonNode = fc.letrec<{ node: unknown }>((tie) => ({
  node: fc.record({ id: fc.oneof(fc.integer(), fc.string({ maxLength: 3 })), tags: fc.array(smallText, { maxLength: 3 }), next: fc.option(tie('node'), { depthSize: 'small', nil: undefined }) }, { requiredKeys: [] }),
})).node.map((v) => Buffer.from(JSON.stringify(v)));
const jsonBytes = (valid: fc.Arbitrary<Buffer>) => fc.oneof(valid, mangled(valid), jsonDeep, mangled(jsonDeep), jsonBig, fc.uint8Array({ maxLength: 48 }).map((a) => Buffer.from(a)));

// Events: the canonical text, general JSON spellings, and all of the above.
const event = fc.record({ id: int64, ts: fc.integer({ min: -8.64e15, max: 8.64e15 }), source: fc.string({ minLength: 1, maxLength: 8 }), client: fc.string({ maxLength: 8 }), health: fc.constantFrom(0, 1, 2) });
const eventBytes = fc.oneof(event.map((e) => Buffer.from(encodeEvent(e as never))), mangled(event.map((e) => Buffer.from(encodeEvent(e as never)))), jsonBytes(jsonValue));

/** A registry format's record: mostly its own schema's id, some another's (wrong type) or a broken one's. */
function registryRecord(own: number, payload: fc.Arbitrary<Buffer>): fc.Arbitrary<Buffer> {
  const id = fc.oneof({ weight: 8, arbitrary: fc.constant(own) }, { weight: 1, arbitrary: fc.constantFrom(...Object.values(IDS)) });
  return fc.oneof(
    { weight: 10, arbitrary: fc.tuple(id, payload).map(([i, p]) => withWireHeader(i, p)) },
    // Not the wire format: empty, too short, or a first byte that is not the magic 0.
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 8 }).map((a) => Buffer.from(a.length > 0 && a[0] === 0 && a.length >= 5 ? [1, ...a] : a)) },
  );
}

// ---- the budget around one decode ----

interface Tally {
  cases: number;
  values: number;
  reasons: Map<string, number>;
  slowestMs: number;
  maxHeapBytes: number;
}

function tally(): Tally {
  return { cases: 0, values: 0, reasons: new Map(), slowestMs: 0, maxHeapBytes: 0 };
}

/** Decodes one record within the budget; the result must be a value or one of `reasons`. */
function within(t: Tally, bytes: Buffer, reasons: readonly string[] | RegExp, decode: (b: Buffer) => { ok: true } | { ok: false; reason: string }): void {
  const heapBefore = v8.getHeapStatistics().used_heap_size;
  const cpuBefore = process.cpuUsage();
  let d: { ok: true } | { ok: false; reason: string };
  try {
    d = decode(bytes);
  } catch (e) {
    assert.fail(`threw on ${bytes.length} bytes ${bytes.subarray(0, 64).toString('hex')}: ${(e as Error).stack ?? String(e)}`);
  }
  const cpu = process.cpuUsage(cpuBefore);
  const ms = (cpu.user + cpu.system) / 1000;
  const heap = v8.getHeapStatistics().used_heap_size - heapBefore;
  t.cases++;
  t.slowestMs = Math.max(t.slowestMs, ms);
  t.maxHeapBytes = Math.max(t.maxHeapBytes, heap);
  assert.ok(ms <= TIME_BUDGET_MS, `${ms.toFixed(1)} ms of CPU on ${bytes.length} bytes ${bytes.subarray(0, 64).toString('hex')}`);
  assert.ok(heap <= HEAP_BUDGET_BYTES, `${heap} bytes of heap on ${bytes.length} bytes ${bytes.subarray(0, 64).toString('hex')}`);
  if (d.ok) t.values++;
  else {
    assert.ok(Array.isArray(reasons) ? reasons.includes(d.reason) : (reasons as RegExp).test(d.reason), `reason ${d.reason} is not one of ${String(reasons)}`);
    t.reasons.set(d.reason, (t.reasons.get(d.reason) ?? 0) + 1);
  }
}

function fuzz(name: string, arb: fc.Arbitrary<Buffer>, reasons: readonly string[] | RegExp, decode: (b: Buffer) => { ok: true } | { ok: false; reason: string }): Tally {
  const t = tally();
  const from = performance.now();
  const run = fc.check(fc.property(arb, (bytes) => within(t, bytes, reasons, decode)), { seed: SEED, numRuns: RUNS, endOnFailure: true });
  if (run.failed) assert.fail(`${name}, case ${run.numRuns} (FUZZ_SEED=${SEED}): ${run.errorInstance instanceof Error ? run.errorInstance.message : String(run.errorInstance)}`);
  console.log(`# ${name}: ${t.cases} cases (seed ${SEED}): ${t.values} values, ${[...t.reasons].map(([r, n]) => `${r} ${n}`).join(', ')}; slowest ${t.slowestMs.toFixed(1)} ms, most heap ${(t.maxHeapBytes / 1024).toFixed(0)} KiB; ${((performance.now() - from) / 1000).toFixed(1)} s`);
  return t;
}

test(`every decoder gives a value or a quarantine reason, within ${TIME_BUDGET_MS} ms and ${HEAP_BUDGET_BYTES / 2 ** 20} MiB per record (seed ${SEED}; FUZZ_SEED=${SEED} repeats it)`, async () => {
  console.log(`# FUZZ_SEED=${SEED} FUZZ_RUNS=${RUNS}`);
  const decoders = await registryDecoders();
  const tallies = [
    fuzz('json', jsonBytes(jsonValue), ['bad_json', 'too_large'], (b) => jsonDecoder.decode(b)),
    fuzz('avro', registryRecord(IDS.avro, avroBytes), REGISTRY_REASONS, (b) => decoders.avro.decode(b)),
    fuzz('protobuf', registryRecord(IDS.protobuf, protoBytes), REGISTRY_REASONS, (b) => decoders.protobuf.decode(b)),
    fuzz('json-schema', registryRecord(IDS.json, jsonBytes(jsonNode)), REGISTRY_REASONS, (b) => decoders['json-schema'].decode(b)),
    fuzz('events codec', eventBytes, QuarantineReasons, (b) => decodeEvent(b)),
    fuzz('sink codec (JSON value, JSON key)', sinkBytes, new RegExp(`^(${SINK_REASONS.join('|')}|[a-z][a-z_]*)$`), sinkDecode()),
    fuzz('sink codec (Debezium, versioned, a header column)', debeziumBytes, new RegExp(`^(${SINK_REASONS.join('|')}|[a-z][a-z_]*)$`), debeziumDecode()),
    fuzz('sink codec (a key object, a TTL and a version from headers, a filter)', keyObjectBytes, new RegExp(`^(${SINK_REASONS.join('|')}|[a-z][a-z_]*)$`), keyObjectDecode()),
  ];
  for (const t of tallies) assert.equal(t.cases, RUNS);
  // Valid records among the cases decode (a decoder that refused everything would pass the budget).
  for (const t of tallies) assert.ok(t.values > 0, `${t.values} values of ${t.cases}`);
});

/** A sink record as [has key][key length][key][value]: a key and a value that agree, then mangled, and arbitrary ones. */
const sinkRecord = (key: Buffer | null, value: Buffer) => Buffer.concat([Buffer.from([key === null ? 0 : 1]), ...(key === null ? [] : [Buffer.from(varint(BigInt(key.length))), key]), value]);
const sinkValid = fc.tuple(fc.oneof(int64, fc.integer()), fc.array(smallText, { maxLength: 3 }), fc.option(smallText, { nil: undefined })).map(([id, tags, next]) => sinkRecord(Buffer.from(String(id)), Buffer.from(`{"id":${id},"tags":${JSON.stringify(tags)}${next === undefined ? '' : `,"next":${JSON.stringify(next)}`}}`)));
const sinkBytes = fc.oneof(
  sinkValid,
  mangled(sinkValid),
  fc.tuple(fc.option(jsonBytes(jsonValue), { nil: null }), jsonBytes(jsonNode)).map(([k, v]) => sinkRecord(k, v)),
);

/**
 * Debezium change events (after a JSON key): every op, a version in source.lsn that may be any JSON
 * value, with and without Connect's { schema, payload } wrapper; then mangled, and arbitrary JSON. The
 * record's header `v` holds arbitrary bytes, read as a column.
 */
const lsn = fc.oneof({ weight: 6, arbitrary: fc.nat() }, int64, fc.integer(), fc.double(), smallText, fc.constant(null), fc.constant(2n ** 44n));
const debeziumValid = fc
  .tuple(fc.constantFrom('c', 'r', 'u', 'u', 'd', 'd', 't', 'x', ''), fc.oneof(int64, fc.integer()), lsn, fc.option(smallText, { nil: undefined }), fc.boolean(), fc.nat(7).map((n) => n === 0))
  .map(([op, id, l, s, wrapped, bare]) => {
    const row = `{"id":${id}${s === undefined ? '' : `,"s":${JSON.stringify(s)}`}}`;
    const source = bare ? '' : `"source":{"connector":"postgresql","lsn":${typeof l === 'bigint' ? String(l) : JSON.stringify(l)}},`;
    const change = `{"before":${op === 'd' || op === 'u' ? row : 'null'},"after":${op === 'd' ? 'null' : row},${source}"op":${JSON.stringify(op)},"ts_ms":1}`;
    return sinkRecord(Buffer.from(`{"id":${id}}`), Buffer.from(wrapped ? `{"schema":{"type":"struct"},"payload":${change}}` : change));
  });
const debeziumBytes = fc.oneof(debeziumValid, mangled(debeziumValid), fc.tuple(fc.option(jsonBytes(jsonValue), { nil: null }), jsonBytes(jsonNode)).map(([k, v]) => sinkRecord(k, v)));

/** The Debezium sink ordered by source.lsn, a header column beside (mostly a whole number, a third of the time the value's first 12 bytes). */
function debeziumDecode(): (b: Buffer) => { ok: true } | { ok: false; reason: string } {
  const config = sinkConfig({ name: 'fuzz', topic: 'fuzz', table: 'fuzz', mode: 'upsert', key: ['id'], envelope: 'debezium', version: 'source.lsn', columns: { id: 'bigint', s: 'text', h: { type: 'bigint', field: 'header.v' } } });
  const codec = new SinkCodec(config);
  const split = sinkSplit();
  return (b) => {
    const { key, value } = split(b);
    const headers = [['v', value.length % 3 === 0 ? value.subarray(0, 12) : Buffer.from(String(value.length - 7))] as const];
    return codec.decode({ topic: 'fuzz', partition: 0, offset: 0n, key, value: value.length === 0 ? null : value, headers, timestampMs: 0 } as never);
  };
}

/** Records keyed by a key object ({"id":…,"shop":…}, canonical or not), then mangled, and arbitrary ones. */
const keyObjectValid = fc
  .tuple(fc.oneof(int64, fc.integer()), smallText, fc.option(smallText, { nil: undefined }), fc.boolean(), fc.boolean())
  .map(([id, shop, a, spaced, tombstone]) => sinkRecord(Buffer.from(spaced ? `{"id": ${id}, "shop": ${JSON.stringify(shop)}}` : `{"id":${id},"shop":${JSON.stringify(shop)}}`), Buffer.from(tombstone ? '' : `{"a":${JSON.stringify(a ?? null)}}`)));
const keyObjectBytes = fc.oneof(keyObjectValid, mangled(keyObjectValid), fc.tuple(fc.option(jsonBytes(jsonValue), { nil: null }), jsonBytes(jsonNode)).map(([k, v]) => sinkRecord(k, v)));

/**
 * The upsert sink whose key columns are the key object's fields, with its TTL and version from headers
 * and a filter on a header: the headers are drawn from the value's bytes (whole numbers, negative ones,
 * text and raw bytes), an empty value is a tombstone.
 */
function keyObjectDecode(): (b: Buffer) => { ok: true } | { ok: false; reason: string } {
  const config = sinkConfig({
    name: 'fuzz', topic: 'fuzz', table: 'fuzz', mode: 'upsert', key: ['id', 'shop'], ttlField: 'header.ttl', version: 'header.v',
    where: { any: [{ field: 'header.kind', in: ['web', 7] }, { not: { field: 'a', exists: true } }] },
    columns: { id: { type: 'bigint', field: 'key.id' }, shop: { type: 'text', field: 'key.shop' }, a: 'text', at: { type: 'timestamp', field: 'header.at' }, p: { type: 'int', field: '$partition' } },
  });
  const codec = new SinkCodec(config);
  const split = sinkSplit();
  return (b) => {
    const { key, value } = split(b);
    const n = value.length;
    const bytes = (i: number) => value.subarray(i, i + 9);
    const headers = [
      ['ttl', n % 5 === 0 ? bytes(0) : Buffer.from(String((n % 97) - 10))],
      ['v', n % 4 === 0 ? bytes(1) : Buffer.from(String(n * 7919))],
      ['kind', n % 3 === 0 ? bytes(2) : Buffer.from(n % 2 === 0 ? 'web' : '7')],
      ['at', n % 6 === 0 ? bytes(3) : Buffer.from(new Date(n * 86_400_000).toISOString())],
    ] as const;
    return codec.decode({ topic: 'fuzz', partition: 0, offset: 0n, key, value: n === 0 ? null : value, headers, timestampMs: 1_767_225_600_000 } as never);
  };
}

/** Splits [has key][key length][key][value]. */
function sinkSplit(): (b: Buffer) => { key: Buffer | null; value: Buffer } {
  return (b) => {
    let key: Buffer | null = null;
    let at = 1;
    if (b[0] === 1) {
      let len = 0;
      let shift = 0;
      while (at < b.length) {
        const c = b[at++]!;
        len += (c & 0x7f) * 2 ** shift;
        shift += 7;
        if ((c & 0x80) === 0) break;
      }
      key = b.subarray(at, at + len);
      at += len;
    }
    return { key, value: b.subarray(Math.min(at, b.length)) };
  };
}

/** The sink's reasons of today; it adds some as the store's limits are checked, so any reason word is taken beside them. */
const SINK_REASONS = ['bad_json', 'too_large', 'not_a_record', 'missing_field', 'bad_value', 'missing_key', 'bad_key', 'null_value', 'key_mismatch', 'bad_payload', 'non_canonical_key'];

/** The sink's codec in upsert mode (a key, then a value): the record is [has key][key length][key][value]. */
function sinkDecode(): (b: Buffer) => { ok: true } | { ok: false; reason: string } {
  const config = sinkConfig({ name: 'fuzz', topic: 'fuzz', table: 'fuzz', mode: 'upsert', key: ['id'], columns: { id: 'bigint', tags: 'list<text>', next: 'text' } });
  const codec = new SinkCodec(config);
  const split = sinkSplit();
  return (b) => {
    const { key, value } = split(b);
    return codec.decode({ topic: 'fuzz', partition: 0, offset: 0n, key, value, timestampMs: 0 } as never);
  };
}
