// onUnknown (issue 37 item 7): a sink whose columns were derived from an older schema version meets a
// record written with a newer one holding a field no column stores: ignore stores the known columns
// and names the field (the worker counts it in exactlyonce_sink_unknown_fields_total{field}); quarantine
// quarantines it (unknown_field). verify --job's expectation is the same decode. A stand-in registry
// serves the schemas (the real one: test/integration/sink-onunknown.test.ts).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test, type TestContext } from 'node:test';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { compile } from '../../src/formats/compile.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { deriveColumns } from '../../src/jobs/sink/derive-columns.js';
import { valueFieldSpec } from '../../src/jobs/sink/column-source.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { addedColumns, columnsFromSetting, inactiveColumns, parseColumnsFrom } from '../../src/jobs/sink/column-eras.js';
import { configError } from './config-error.js';

const V1 = { type: 'record', name: 'Click', fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }] };
const V2 = { ...V1, fields: [...V1.fields, { name: 'channel', type: ['null', 'string'], default: null }, { name: 'geo', type: { type: 'record', name: 'Geo', fields: [{ name: 'lat', type: 'double' }] } }] };
const SCHEMAS: Record<number, object> = { 1: V1, 2: V2 };

/** A registry answering GET /schemas/ids/<id> for ids 1 (v1) and 2 (v2). */
async function registry(t: TestContext) {
  const server = createServer((req, res) => {
    const id = Number(/\/schemas\/ids\/(\d+)/.exec(req.url ?? '')?.[1]);
    const s = SCHEMAS[id];
    res.setHeader('content-type', 'application/json');
    if (s === undefined) {
      res.statusCode = 404;
      res.end(JSON.stringify({ error_code: 40403, message: 'Schema not found' }));
    } else res.end(JSON.stringify({ schema: JSON.stringify(s), schemaType: 'AVRO' }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, username: undefined, password: undefined };
}

/** The config resolveSinkConfig makes from schema `id` (columns derived), with `extra` keys. */
function derived(id: number, extra: object = {}) {
  const d = deriveColumns(compile(id, 'AVRO', JSON.stringify(SCHEMAS[id])));
  const columns = Object.fromEntries(d.columns.map((c) => [c.name, { type: c.type, ...(c.field === c.name ? {} : { field: valueFieldSpec(c.field) }) }]));
  return { ...sinkConfig({ topic: 't', table: 'clicks', mode: 'log', format: 'avro', columns, ...extra }, 'f.yaml', true), derived: true };
}
const derivedV1 = (extra: object = {}) => derived(1, extra);
const derivedV2 = (extra: object = {}) => derived(2, extra);

const record = (offset: number, id: number, value: object) => {
  const schema = SCHEMAS[id]!;
  return { topic: 't', partition: 0, offset: BigInt(offset), key: null, value: withWireHeader(id, encodeAvro(avroType(JSON.stringify(schema)), value)), timestampMs: 0 };
};

const records = [record(0, 1, { id: 1n, page: '/a' }), record(1, 2, { id: 2n, page: '/b', channel: 'app', geo: { lat: 1.5 } })];

test('onUnknown: ignore (the default) stores the known columns and names the fields no column stores; verify expects that row', async (t) => {
  const job = new SinkJob(derivedV1(), await registry(t));
  await job.lookup!.fetch(records, new AbortController().signal);
  const [a, b] = records.map((r) => job.decode(r)) as [ReturnType<SinkJob['decode']>, ReturnType<SinkJob['decode']>];
  assert.ok(a.ok && a.value.kind === 'row');
  assert.equal(a.value.unknown, undefined, 'a v1 record has no unknown field');
  assert.ok(b.ok && b.value.kind === 'row');
  assert.deepEqual(b.value.unknown, ['channel', 'geo.lat']);
  assert.deepEqual(canonical(job.audit.expect(records[1]!)), { kind: 'row', key: { partition: 0, offset: '1' }, row: { id: '2', page: '/b' } });
  assert.equal(job.settings['onUnknown'], undefined, 'ignore keeps the settings a derived sink always had');
});

test('onUnknown: quarantine quarantines a record holding a field no column stores (unknown_field), naming it; verify expects the quarantine', async (t) => {
  const job = new SinkJob(derivedV1({ onUnknown: 'quarantine' }), await registry(t));
  await job.lookup!.fetch(records, new AbortController().signal);
  assert.ok(job.decode(records[0]!).ok);
  const d = job.decode(records[1]!);
  assert.ok(!d.ok);
  assert.equal(d.reason, 'unknown_field');
  assert.match(d.detail, /schema id 2 has fields no column stores: channel, geo\.lat/);
  assert.deepEqual(job.audit.expect(records[1]!), { kind: 'quarantine', reason: 'unknown_field' });
  assert.equal(job.settings['onUnknown'], 'quarantine');
});

test('onUnknown is validated: a typo gets did-you-mean, a bad value the choices, and listed columns refuse it', () => {
  assert.match(configError(() => sinkConfig({ topic: 't', table: 'x', mode: 'log', format: 'avro', onUnknwn: 'ignore', columns: { a: 'int' } }, 'f.yaml', true)), /onUnknwn: unknown key \(did you mean onUnknown\?\)/);
  assert.match(configError(() => derivedV1({ onUnknown: 'drop' })), /onUnknown: expected one of ignore, quarantine/);
  assert.match(configError(() => sinkConfig({ topic: 't', table: 'x', mode: 'log', format: 'avro', onUnknown: 'ignore', columns: { a: 'int' } }, 'f.yaml')), /onUnknown: only for columns derived from the registered schema/);
});

test('verify judges with the columns stored with the job: a sink derived from v2 pinned to the v1 columns decodes as the v1 worker does', async (t) => {
  const reg = await registry(t);
  const v1 = new SinkJob(derivedV1(), reg);
  const v2 = new SinkJob(derivedV2(), reg);
  assert.notEqual(v2.settings['columns'], v1.settings['columns']);
  const pinned = v2.withStoredColumns(v1.settings);
  assert.deepEqual(pinned.settings, v1.settings);
  assert.equal(v1.withStoredColumns(v1.settings), v1, 'the same columns: itself');
  await pinned.lookup!.fetch(records, new AbortController().signal);
  assert.deepEqual(canonical(pinned.audit.expect(records[1]!)), { kind: 'row', key: { partition: 0, offset: '1' }, row: { id: '2', page: '/b' } });
});

// Columns moved forward by `schema apply --job` (src/jobs/sink/column-eras.ts): a record below its
// partition's switch is decoded exactly as the v1 worker decoded it, one at or past it with every column.
const R = (partition: number, offset: number, id: number, value: object) => ({ ...record(offset, id, value), partition });
const eraRecords = [
  R(0, 1, 2, { id: 1n, page: '/a', channel: 'app', geo: { lat: 1.5 } }),
  R(0, 4, 2, { id: 2n, page: '/b', channel: 'web', geo: { lat: 2.5 } }),
  R(0, 5, 2, { id: 3n, page: '/c', channel: 'tv', geo: { lat: 3.5 } }),
  R(1, 0, 2, { id: 4n, page: '/d', channel: 'app', geo: { lat: 4.5 } }),
  R(0, 2, 1, { id: 5n, page: '/e' }),
];

test('columnsFrom: below the switch a record is decoded as the v1 worker decoded it (added columns unset, their fields unknown), from it with every column', async (t) => {
  const reg = await registry(t);
  for (const extra of [{}, { onUnknown: 'quarantine' }]) {
    const v1 = new SinkJob(derivedV1(extra), reg);
    const plain = new SinkJob(derivedV2(extra), reg);
    const added = addedColumns(v1.settings['columns']!, plain.settings['columns']!)!;
    assert.deepEqual(added, ['channel', 'geo_lat']);
    const from = new Map(added.map((c) => [c, new Map([[0, 5n]])]));
    const job = new SinkJob(derivedV2(extra), reg, from);
    assert.equal(job.settings['columnsFrom'], '{"channel":{"0":"5"},"geo_lat":{"0":"5"}}');
    await job.lookup!.fetch(eraRecords, new AbortController().signal);
    await v1.lookup!.fetch(eraRecords, new AbortController().signal);
    await plain.lookup!.fetch(eraRecords, new AbortController().signal);
    const shown = (j: SinkJob, r: (typeof eraRecords)[number]) => canonical(j.audit.expect(r));
    for (const r of eraRecords) {
      const old = r.partition === 0 && r.offset < 5n;
      const want = shown(old ? v1 : plain, r) as { kind: string; row?: Record<string, unknown> };
      // The v1 row lacks the added columns, which read back as null (their cells never written).
      if (old && want.kind === 'row') want.row = { ...want.row, channel: null, geo_lat: null };
      assert.deepEqual(shown(job, r), want, `partition ${r.partition} offset ${r.offset} (${JSON.stringify(extra)})`);
      const d = job.decode(r);
      const v = v1.decode(r);
      if (old && d.ok && d.value.kind === 'row' && v.ok && v.value.kind === 'row') {
        assert.deepEqual(d.value.unknown, v.value.unknown, 'the same fields are unknown (and counted)');
        assert.equal(d.value.bytes, v.value.bytes, 'the same size (a row stored then is not refused as too large when read again)');
        assert.equal(d.value.values.length, 4);
      }
    }
  }
  const quarantining = new SinkJob(derivedV2({ onUnknown: 'quarantine' }), reg, new Map([['channel', new Map([[0, 5n]])], ['geo_lat', new Map([[0, 5n]])]]));
  await quarantining.lookup!.fetch(eraRecords, new AbortController().signal);
  assert.deepEqual(eraRecords.map((r) => quarantining.audit.expect(r).kind), ['quarantine', 'quarantine', 'row', 'row', 'row']);
});

test('columnsFrom: verify judges with the stored switch; a worker learns it from the stored job', async (t) => {
  const reg = await registry(t);
  const plain = new SinkJob(derivedV2(), reg);
  const stored = { ...plain.settings, columnsFrom: '{"channel":{"0":"5"},"geo_lat":{"0":"5"}}' };
  const judged = plain.withStoredColumns(stored);
  assert.deepEqual(judged.settings, stored);
  await judged.lookup!.fetch(eraRecords, new AbortController().signal);
  assert.deepEqual(canonical(judged.audit.expect(eraRecords[0]!)), { kind: 'row', key: { partition: 0, offset: '1' }, row: { id: '1', page: '/a', channel: null, geo_lat: null } });
  assert.deepEqual(canonical(judged.audit.expect(eraRecords[2]!)), { kind: 'row', key: { partition: 0, offset: '5' }, row: { id: '3', page: '/c', channel: 'tv', geo_lat: 3.5 } });
  assert.equal(plain.withStoredColumns(plain.settings), plain, 'nothing moved: itself');
});

test('columnsFrom: the stored setting round-trips, is refused when not one schema apply writes, and only added columns move forward', () => {
  const from = new Map([['b', new Map([[1, 7n], [0, 0n]])], ['a', new Map([[2, 12345678901234n]])]]);
  const text = columnsFromSetting(from)!;
  assert.equal(text, '{"b":{"0":"0","1":"7"},"a":{"2":"12345678901234"}}');
  assert.deepEqual(parseColumnsFrom(text), new Map([['b', new Map([[0, 0n], [1, 7n]])], ['a', new Map([[2, 12345678901234n]])]]));
  assert.equal(columnsFromSetting(new Map()), undefined);
  assert.deepEqual(parseColumnsFrom(undefined), new Map());
  for (const bad of ['[]', '{"a":[1]}', '{"a":{"x":"1"}}', '{"a":{"0":1}}', '{"a":{"0":"-1"}}', '{"a":{"01":"1"}}', 'nope', '{"a":null}']) {
    assert.throws(() => parseColumnsFrom(bad), /EO_JOB_CONFIG_MISMATCH|not what schema apply --job writes/, bad);
  }
  assert.deepEqual(inactiveColumns(from, 1, 6n), ['b']);
  assert.deepEqual(inactiveColumns(from, 1, 7n), []);
  assert.deepEqual(inactiveColumns(from, 2, 0n), ['a']);
  assert.deepEqual(inactiveColumns(from, 3, 0n), [], 'a partition without a switch (none then, or added later) has every column');
  const c = (...cols: unknown[][]) => JSON.stringify(cols);
  const id = ['id', 'bigint', 'id', false, null];
  const page = ['page', 'text', 'page', false, null];
  assert.deepEqual(addedColumns(c(id, page), c(id, page, ['x', 'text', 'x', false, null])), ['x']);
  assert.deepEqual(addedColumns(c(id, page), c(id, page)), []);
  assert.equal(addedColumns(c(id, page), c(id)), undefined, 'a column removed');
  assert.equal(addedColumns(c(id, page), c(id, ['page', 'bigint', 'page', false, null])), undefined, 'a type changed');
  assert.equal(addedColumns('not json', c(id)), undefined);
});
