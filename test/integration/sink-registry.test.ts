// Avro (and Protobuf, JSON Schema) topics into tables through the real Schema Registry of the local stack (started here when it
// does not run): every type the sink maps, exact; columns derived from the registered schema; schema
// evolution; every decode failure quarantined with its reason and schema id; a registry outage retried
// (never a quarantine, never a skipped record) while records of known schemas keep flowing.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { Producer } from '../../src/kafka/producer.js';
import { SchemaRegistry } from '../../src/registry/schema-registry.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { startServer, stopServer } from '../../src/stack/index.js';
import { CASSANDRA, BROKERS, cassandraSession, ensureRegistry, freshTopic, localStack, REGISTRY_ENV, REGISTRY_PORT, registryTopic, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import type { ConnectionConfig } from '../../src/config.js';
import type { TestContext } from 'node:test';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];

function sinkFile(config: object): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-avro-')), 'sink.json');
  writeFileSync(file, JSON.stringify(config, null, 2));
  return file;
}

async function produce(config: ConnectionConfig, records: Array<{ key?: string | Buffer | null; value: Buffer | string | null; partition?: number }>): Promise<void> {
  const p = new Producer(config);
  try {
    await p.connect();
    await p.send(config.topic, records.map((r) => ({ key: r.key ?? null, value: r.value, partition: r.partition ?? 0 })));
  } finally {
    await p.close();
  }
}

async function applyJob(config: ConnectionConfig, file: string): Promise<void> {
  const r = await runCli(['schema', 'apply', ...conn(config), '--job', file], REGISTRY_ENV);
  assert.equal(r.code, 0, r.stdout + r.stderr);
}

function startSink(t: TestContext, config: ConnectionConfig, file: string) {
  return startCli(t, ['sink', ...conn(config), '--config', file, '--max-batch', '50'], REGISTRY_ENV);
}

const ORDER_V1 = {
  type: 'record',
  name: 'Order',
  namespace: 'shop',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'customer', type: { type: 'record', name: 'Customer', fields: [{ name: 'id', type: { type: 'long' } }, { name: 'name', type: 'string' }] } },
    { name: 'total', type: { type: 'bytes', logicalType: 'decimal', precision: 12, scale: 2 } },
    { name: 'ref', type: { type: 'string', logicalType: 'uuid' } },
    { name: 'day', type: { type: 'int', logicalType: 'date' } },
    { name: 'placedMs', type: { type: 'long', logicalType: 'timestamp-millis' } },
    { name: 'placedUs', type: ['null', { type: 'long', logicalType: 'timestamp-micros' }], default: null },
    { name: 'note', type: ['null', 'string'], default: null },
    { name: 'qty', type: { type: 'map', values: 'int' } },
    { name: 'tags', type: { type: 'array', items: 'long' } },
    { name: 'status', type: { type: 'enum', name: 'Status', symbols: ['PLACED', 'PAID'] } },
    { name: 'score', type: 'double' },
    { name: 'paid', type: 'boolean' },
  ],
};

test('an Avro topic into a log table: columns derived from the registered schema, every type exact (int64 extremes, decimal, uuid, date, timestamps, unions with null, maps, arrays, nested); verify --job', async (t) => {
  const { config, session, registry, subject } = await registryTopic(t);
  const id = await registry.register(subject, 'AVRO', JSON.stringify(ORDER_V1));
  const type = avroType(JSON.stringify(ORDER_V1));
  const file = sinkFile({ name: 'orders_avro', topic: config.topic, format: 'avro', table: 'orders', mode: 'log' });

  const cql = await runCli(['sink', '--config', file, '--keyspace', config.keyspace, '--print-cql'], REGISTRY_ENV);
  assert.equal(cql.code, 0, cql.stderr);
  for (const col of ['id bigint', 'customer_id bigint', 'customer_name text', 'total decimal', 'ref uuid', 'day timestamp', 'placed_ms timestamp', 'placed_us timestamp', 'note text', 'qty frozen<map<text, int>>', 'tags frozen<list<bigint>>', 'status text', 'score double', 'paid boolean']) {
    assert.ok(cql.stdout.includes(`    ${col},`), `${col} in\n${cql.stdout}`);
  }
  assert.match(cql.stdout, /--     customer_name: \{ type: text, field: customer\.name \}/);
  await applyJob(config, file);

  const values = [
    { id: -(2n ** 63n), customer: { id: 2n ** 63n - 1n, name: 'Ada ✓' }, total: '-1.50', ref: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', day: new Date('2024-02-29T00:00:00Z'), placedMs: new Date(1700000000123), placedUs: new Date(-1), note: 'first', qty: { a: 1, b: -2 }, tags: [2n ** 53n + 1n, -(2n ** 63n)], status: 'PAID', score: 0.1, paid: true },
    { id: 2n ** 63n - 1n, customer: { id: 0n, name: '' }, total: '9999999999.99', ref: '00000000-0000-0000-0000-000000000000', day: new Date('1969-12-31T00:00:00Z'), placedMs: new Date(0), placedUs: null, note: null, qty: {}, tags: [], status: 'PLACED', score: -1e300, paid: false },
  ];
  await produce(config, values.map((v) => ({ value: withWireHeader(id, encodeAvro(type, v)) })));
  const worker = startSink(t, config, file);
  const rows = await waitFor(async () => {
    const r = await session.execute(`SELECT * FROM ${config.keyspace}.orders WHERE partition = 0`);
    return r.rowLength === 2 ? r.rows : undefined;
  }, { timeoutMs: 180_000, message: 'two rows in orders' });
  const byOffset = [...rows].sort((a, b) => Number(a['offset']) - Number(b['offset']));
  const want = [
    { id: '-9223372036854775808', customer_id: '9223372036854775807', customer_name: 'Ada ✓', total: '-1.50', ref: 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', day: Date.UTC(2024, 1, 29), placed_ms: 1700000000123, placed_us: -1, note: 'first', qty: { a: 1, b: -2 }, tags: ['9007199254740993', '-9223372036854775808'], status: 'PAID', score: 0.1, paid: true },
    { id: '9223372036854775807', customer_id: '0', customer_name: '', total: '9999999999.99', ref: '00000000-0000-0000-0000-000000000000', day: Date.UTC(1969, 11, 31), placed_ms: 0, placed_us: null, note: null, qty: null, tags: null, status: 'PLACED', score: -1e300, paid: false },
  ];
  for (const [i, w] of want.entries()) {
    const got = Object.fromEntries(Object.keys(w).map((k) => [k, canonical(byOffset[i]![k])]));
    assert.deepEqual(got, w, `row ${i}`);
  }
  const v = await runCli(['verify', ...conn(config), '--job', file, '--no-record', '--json'], REGISTRY_ENV);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  assert.equal((JSON.parse(v.stdout) as { totals: { stored: number } }).totals.stored, 2);
  worker.kill('SIGTERM');
});

test('Avro evolution keeps flowing; unknown schema id, payload not matching, missing magic byte are quarantined with reason and schema id; a registry outage is retried, never a quarantine', async (t) => {
  await ensureRegistry();
  const config = testConfig();
  await freshTopic(t, config, 1);
  const session = await cassandraSession(t, config);
  const registry = new SchemaRegistry(config.schemaRegistry);
  const subject = `${config.topic}-value`;
  const base = { type: 'record', name: 'Click', fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }, { name: 'referrer', type: ['null', 'string'], default: null }] };
  // v2 adds a field with a default; v3 removes the optional referrer.
  const v2 = { ...base, fields: [...base.fields, { name: 'channel', type: 'string', default: 'web' }] };
  const v3 = { ...v2, fields: v2.fields.filter((f) => f.name !== 'referrer') };
  const ids = [await registry.register(subject, 'AVRO', JSON.stringify(base)), await registry.register(subject, 'AVRO', JSON.stringify(v2)), await registry.register(subject, 'AVRO', JSON.stringify(v3))];
  assert.equal(new Set(ids).size, 3);
  const [t1, t2, t3] = [base, v2, v3].map((s) => avroType(JSON.stringify(s)));
  const file = sinkFile({
    name: 'clicks_avro',
    topic: config.topic,
    format: 'avro',
    table: 'clicks',
    mode: 'log',
    columns: { id: 'bigint', page: { type: 'text', required: true }, referrer: 'text', channel: { type: 'text', default: 'web' } },
  });
  await applyJob(config, file);
  const worker = startSink(t, config, file);

  const proto = await registry.register(`${config.topic}-other-value`, 'PROTOBUF', 'syntax = "proto3";\nmessage M { int64 id = 1; }\n');
  await produce(config, [
    { value: withWireHeader(ids[0]!, encodeAvro(t1!, { id: 1n, page: '/a', referrer: 'r' })) }, // 0: v1
    { value: withWireHeader(ids[1]!, encodeAvro(t2!, { id: 2n, page: '/b', referrer: null, channel: 'app' })) }, // 1: v2, added field
    { value: withWireHeader(ids[2]!, encodeAvro(t3!, { id: 3n, page: '/c', channel: 'mail' })) }, // 2: v3, removed field
    { value: withWireHeader(999_999, Buffer.from([2, 4])) }, // 3: unknown schema id
    { value: withWireHeader(ids[0]!, Buffer.from([0x80])) }, // 4: payload cut short
    { value: Buffer.from('{"id": 5, "page": "/json"}') }, // 5: no magic byte
    { value: withWireHeader(proto, Buffer.from([0, 8, 1])) }, // 6: a Protobuf schema's id
  ]);
  await waitFor(async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.clicks WHERE partition = 0`)).rowLength === 3, { timeoutMs: 180_000, message: 'the three valid clicks stored' });
  const rows = (await session.execute(`SELECT offset, id, page, referrer, channel FROM ${config.keyspace}.clicks WHERE partition = 0`)).rows.map((r) => canonical({ ...r }));
  assert.deepEqual(rows.reverse(), [
    { offset: '0', id: '1', page: '/a', referrer: 'r', channel: 'web' },
    { offset: '1', id: '2', page: '/b', referrer: null, channel: 'app' },
    { offset: '2', id: '3', page: '/c', referrer: null, channel: 'mail' },
  ]);
  const listed = await waitFor(async () => {
    const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'clicks_avro', '--json']);
    const l = q.stdout.trim().split('\n').filter((x) => x !== '').map((x) => JSON.parse(x) as { offset: string; reason: string; detail: string });
    return l.length === 4 ? l.sort((a, b) => Number(a.offset) - Number(b.offset)) : undefined;
  }, { timeoutMs: 120_000, message: 'four records quarantined' });
  t.diagnostic(listed.map((q) => `offset ${q.offset}: ${q.reason}: ${q.detail}`).join('\n'));
  assert.deepEqual(listed.map((q) => [q.offset, q.reason]), [['3', 'unknown_schema'], ['4', 'bad_payload'], ['5', 'missing_magic_byte'], ['6', 'wrong_schema_type']]);
  assert.equal(listed[0]!.detail, `schema id 999999 is not in the Schema Registry at ${config.schemaRegistry.url}`);
  assert.match(listed[1]!.detail, new RegExp(`^the payload does not match schema id ${ids[0]} \\(AVRO\\): `));
  assert.equal(listed[2]!.detail, "no magic byte 0 of the Schema Registry wire format (its first byte is 0x7b '{'): not written by a Schema Registry serializer");
  assert.equal(listed[3]!.detail, `schema id ${proto} is a PROTOBUF schema; this decoder reads avro`);

  // The registry stops. A record of a known schema still lands; one of a schema this worker never met
  // waits, and lands once the registry is back: retried, one line each way, never quarantined.
  const v4 = { ...v3, fields: [...v3.fields, { name: 'ms', type: ['null', 'long'], default: null }] };
  const id4 = await registry.register(subject, 'AVRO', JSON.stringify(v4));
  const stack = { ...(await localStack()), schemaRegistry: true, registryPort: REGISTRY_PORT };
  await stopServer(stack, 'registry');
  t.after(() => startServer(stack, 'registry').then(() => undefined));
  await produce(config, [{ value: withWireHeader(ids[2]!, encodeAvro(t3!, { id: 7n, page: '/known', channel: 'c' })) }]);
  await waitFor(async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.clicks WHERE partition = 0`)).rowLength === 4, { timeoutMs: 120_000, message: 'the record of a known schema stored while the registry is down' });
  await produce(config, [{ value: withWireHeader(id4, encodeAvro(avroType(JSON.stringify(v4)), { id: 8n, page: '/new', channel: 'c', ms: 1n })) }]);
  await waitFor(() => /"Schema Registry is not answering; retrying with backoff until it does"/.test(worker.output()), { timeoutMs: 120_000, message: 'the worker says the registry does not answer' });
  await startServer(stack, 'registry');
  await waitFor(async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.clicks WHERE partition = 0`)).rowLength === 5, { timeoutMs: 180_000, message: 'the record of the new schema stored once the registry is back' });
  assert.match(worker.output(), /"Schema Registry answers again"/);
  assert.equal((worker.output().match(/Schema Registry is not answering/g) ?? []).length, 1, 'one line when it stops');
  const q2 = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'clicks_avro', '--json']);
  assert.equal(q2.stdout.trim().split('\n').length, 4, 'nothing more quarantined during the outage');

  const v = await runCli(['verify', ...conn(config), '--job', file, '--no-record', '--json'], REGISTRY_ENV);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const report = JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.totals.records, report.totals.stored, report.totals.quarantined], [9, 5, 4]);
  worker.kill('SIGTERM');
});

test('Protobuf and JSON Schema topics through the same registry: columns derived, values exact, a payload that does not match quarantined with its schema id', async (t) => {
  for (const format of ['protobuf', 'json-schema'] as const) {
    const { config, session, registry, subject } = await registryTopic(t);
    let good: Buffer;
    let bad: Buffer;
    let id: number;
    if (format === 'protobuf') {
      const text = 'syntax = "proto3";\npackage t;\nmessage Reading { int64 id = 1; string sensor = 2; double value = 3; map<string, string> labels = 4; }\n';
      id = await registry.register(subject, 'PROTOBUF', text);
      const { protoSchema } = await import('../../src/formats/protobuf.js');
      const Reading = protoSchema(text).root.lookupType('t.Reading');
      const msg = Buffer.from(Reading.encode(Reading.fromObject({ id: '-9223372036854775808', sensor: 's1', value: 0.5, labels: { room: 'a' } })).finish());
      good = withWireHeader(id, Buffer.concat([Buffer.from([0]), msg]));
      bad = withWireHeader(id, Buffer.from([0, 0x0a, 0xff]));
    } else {
      const schema = { type: 'object', properties: { id: { type: 'integer' }, sensor: { type: 'string' }, value: { type: 'number' }, labels: { type: 'object', additionalProperties: { type: 'string' } } }, required: ['id', 'sensor'] };
      id = await registry.register(subject, 'JSON', JSON.stringify(schema));
      good = withWireHeader(id, Buffer.from('{"id": -9223372036854775808, "sensor": "s1", "value": 0.5, "labels": {"room": "a"}}'));
      bad = withWireHeader(id, Buffer.from('{"id": 2}'));
    }
    const file = sinkFile({ name: `readings_${format.replace('-', '_')}`, topic: config.topic, format, table: 'readings', mode: 'log' });
    await applyJob(config, file);
    await produce(config, [{ value: good }, { value: bad }]);
    const worker = startSink(t, config, file);
    const rows = await waitFor(async () => {
      const r = await session.execute(`SELECT id, sensor, value, labels FROM ${config.keyspace}.readings WHERE partition = 0`);
      return r.rowLength === 1 ? r.rows : undefined;
    }, { timeoutMs: 180_000, message: `the ${format} reading stored` });
    assert.deepEqual(canonical({ ...rows[0] }), { id: '-9223372036854775808', sensor: 's1', value: 0.5, labels: { room: 'a' } }, format);
    const v = await waitFor(async () => {
      const r = await runCli(['verify', ...conn(config), '--job', file, '--no-record', '--json'], REGISTRY_ENV);
      return r.code === 0 ? (JSON.parse(r.stdout) as { totals: { stored: number; quarantined: number }; partitions: Array<{ reasons: Record<string, number> }> }) : undefined;
    }, { timeoutMs: 120_000, message: `verify --job passes for ${format}` });
    assert.deepEqual([v.totals.stored, v.totals.quarantined, v.partitions[0]!.reasons], [1, 1, { bad_payload: 1 }], format);
    const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', `readings_${format.replace('-', '_')}`, '--json']);
    const detail = (JSON.parse(q.stdout.trim()) as { detail: string }).detail;
    t.diagnostic(`${format}: ${detail}`);
    assert.ok(detail.startsWith(`the payload does not match schema id ${id} (${format === 'protobuf' ? 'PROTOBUF' : 'JSON'}): `), detail);
    worker.kill('SIGTERM');
  }
});

test('a record whose schema is registered a moment after it was produced is stored, not quarantined; an id never registered still ends quarantined unknown_schema', async (t) => {
  const { config, session, registry, subject } = await registryTopic(t);
  // The registry gives the same content the same id: the test's own schemas (named by its topic) are new to it.
  const v1 = { type: 'record', name: 'Visit', doc: config.topic, fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'channel', type: 'string', default: 'web' }] };
  const id1 = await registry.register(subject, 'AVRO', JSON.stringify(v1));
  const file = sinkFile({ name: 'visits_avro', topic: config.topic, format: 'avro', table: 'visits', mode: 'log', columns: { id: 'bigint', page: 'text', channel: 'text' } });
  await applyJob(config, file);
  const worker = startSink(t, config, file);
  const offsets = async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.visits WHERE partition = 0`)).rows.map((r) => String(r['offset'])).sort();
  // A warm worker: it reads the next records as soon as they are produced.
  await produce(config, [{ value: withWireHeader(id1, encodeAvro(avroType(JSON.stringify(v1)), { id: 0n, page: '/warm' })) }]);
  await waitFor(async () => ((await offsets()).length === 1 ? true : undefined), { timeoutMs: 180_000, message: 'the first visit stored' });

  // Offset 1 names the id the registry hands out next (ids are sequential), before it is registered;
  // offset 2 an id that never exists. The schema is registered about a second after the records are read.
  const NEVER = 2_000_000_000;
  const late = id1 + 1;
  await produce(config, [
    { value: withWireHeader(late, encodeAvro(avroType(JSON.stringify(v2)), { id: 1n, page: '/late', channel: 'app' })) },
    { value: withWireHeader(NEVER, Buffer.from([2, 2, 0x61])) },
  ]);
  await new Promise((resolve) => setTimeout(resolve, 1000)); // the scenario: registered a moment after, not a wait for a condition
  assert.equal(await registry.register(subject, 'AVRO', JSON.stringify(v2)), late, 'the registry handed out the next id (no other registration meanwhile)');

  const quarantined = async () => {
    const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'visits_avro', '--json']);
    return q.stdout.trim().split('\n').filter((x) => x !== '').map((x) => JSON.parse(x) as { offset: string; reason: string; detail: string });
  };
  const listed = await waitFor(async () => {
    const l = await quarantined();
    return l.some((q) => q.offset === '2') ? l : undefined;
  }, { timeoutMs: 120_000, message: 'the record of the id never registered quarantined' });
  assert.deepEqual(listed.map((q) => [q.offset, q.reason, q.detail]), [['2', 'unknown_schema', `schema id ${NEVER} is not in the Schema Registry at ${config.schemaRegistry.url}`]]);
  assert.deepEqual(await offsets(), ['0', '1'], 'the record of the late schema stored (same batch as the quarantined one)');
  const rows = (await session.execute(`SELECT offset, id, page, channel FROM ${config.keyspace}.visits WHERE partition = 0`)).rows.map((r) => canonical({ ...r }));
  assert.deepEqual(rows.reverse(), [
    { offset: '0', id: '0', page: '/warm', channel: null },
    { offset: '1', id: '1', page: '/late', channel: 'app' },
  ]);
  const v = await runCli(['verify', ...conn(config), '--job', file, '--no-record', '--json'], REGISTRY_ENV);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const report = JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.totals.records, report.totals.stored, report.totals.quarantined], [3, 2, 1]);
  worker.kill('SIGTERM');
});

// Issue 37 item 6 through the registry: a version read from an Avro `long` and from a
// `timestamp-millis`, each ordering its own upsert sink of the same topic. A key's records are on two
// partitions, the highest version read first; a negative version is quarantined as bad_version by the
// sink that reads it, and written by the other.
test('an Avro upsert sink ordered by a long version and one by a timestamp-millis version: the highest version holds across partitions, a negative one quarantined; verify --job exact', async (t) => {
  const { config, session, registry, subject } = await registryTopic(t, 2);
  const schema = { type: 'record', name: 'Kv', fields: [{ name: 'id', type: 'long' }, { name: 'rev', type: 'long' }, { name: 'at', type: { type: 'long', logicalType: 'timestamp-millis' } }, { name: 's', type: 'string' }] };
  const id = await registry.register(subject, 'AVRO', JSON.stringify(schema));
  const type = avroType(JSON.stringify(schema));
  const rec = (partition: number, kid: number, rev: number, at: number, s: string) => ({ key: String(kid), partition, value: withWireHeader(id, encodeAvro(type, { id: BigInt(kid), rev: BigInt(rev), at: new Date(at), s })) });
  const sinks = { rev: 'value.rev', at: 'value.at' };
  const files = Object.fromEntries(Object.entries(sinks).map(([n, version]) => [n, sinkFile({ name: `kv_${n}`, topic: config.topic, format: 'avro', table: `kv_${n}`, mode: 'upsert', key: ['id'], version })]));
  for (const file of Object.values(files)) await applyJob(config, file);
  await produce(config, [rec(0, 1, 9, 9000, 'nine'), rec(0, 2, 2, 2000, 'two'), rec(0, 3, -1, 1000, 'negative rev')]);
  await produce(config, [rec(1, 1, 4, 4000, 'four'), rec(1, 2, 7, 7000, 'seven')]);
  for (const file of Object.values(files)) startSink(t, config, file);
  for (const n of Object.keys(sinks)) {
    await waitFor(async () => {
      const r = await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ?`, [`kv_${n}`, config.topic]);
      return r.rows.map((x) => `${x['partition']}:${x['next_offset']}`).sort().join(' ') === '0:3 1:2' ? true : undefined;
    }, { timeoutMs: 180_000, message: `sink kv_${n} reaches the log end` });
  }
  const rows = async (n: string) =>
    Object.fromEntries((await session.execute(`SELECT id, s, WRITETIME(s) AS wt FROM ${config.keyspace}.kv_${n}`)).rows.map((x) => [String(x['id']), [x['s'], String(x['wt'])]]));
  assert.deepEqual(await rows('rev'), { '1': ['nine', '9'], '2': ['seven', '7'] });
  assert.deepEqual(await rows('at'), { '1': ['nine', '9000'], '2': ['seven', '7000'], '3': ['negative rev', '1000'] });
  const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'kv_rev', '--json']);
  assert.deepEqual(q.stdout.trim().split('\n').map((x) => JSON.parse(x) as { partition: number; offset: string; reason: string; detail: string }).map((x) => [x.partition, x.offset, x.reason, x.detail]), [[0, '2', 'bad_version', 'version value.rev is negative: -1']]);
  for (const [n, stored] of [['rev', 4], ['at', 5]] as const) {
    const v = await runCli(['verify', ...conn(config), '--job', files[n]!, '--no-record', '--json'], REGISTRY_ENV);
    assert.equal(v.code, 0, v.stdout + v.stderr);
    const totals = (JSON.parse(v.stdout) as { totals: Record<string, number> }).totals;
    assert.deepEqual([totals['records'], totals['quarantined'], totals['missing'], totals['mismatched'], totals['extra']], [5, 5 - stored, 0, 0, 0], `kv_${n}`);
  }
});
