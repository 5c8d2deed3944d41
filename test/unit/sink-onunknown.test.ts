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

/** The config resolveSinkConfig makes from v1 (columns derived), with `extra` keys. */
function derivedV1(extra: object = {}) {
  const d = deriveColumns(compile(1, 'AVRO', JSON.stringify(V1)));
  const columns = Object.fromEntries(d.columns.map((c) => [c.name, { type: c.type, ...(c.field === c.name ? {} : { field: valueFieldSpec(c.field) }) }]));
  return { ...sinkConfig({ topic: 't', table: 'clicks', mode: 'log', format: 'avro', columns, ...extra }, 'f.yaml', true), derived: true };
}

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
  const d2 = deriveColumns(compile(2, 'AVRO', JSON.stringify(V2)));
  const columns = Object.fromEntries(d2.columns.map((c) => [c.name, { type: c.type, ...(c.field === c.name ? {} : { field: valueFieldSpec(c.field) }) }]));
  const v2 = new SinkJob({ ...sinkConfig({ topic: 't', table: 'clicks', mode: 'log', format: 'avro', columns }, 'f.yaml', true), derived: true }, reg);
  assert.notEqual(v2.settings['columns'], v1.settings['columns']);
  const pinned = v2.withStoredColumns(v1.settings);
  assert.deepEqual(pinned.settings, v1.settings);
  assert.equal(v1.withStoredColumns(v1.settings), v1, 'the same columns: itself');
  await pinned.lookup!.fetch(records, new AbortController().signal);
  assert.deepEqual(canonical(pinned.audit.expect(records[1]!)), { kind: 'row', key: { partition: 0, offset: '1' }, row: { id: '2', page: '/b' } });
});
