// Additive schema evolution of a derived sink (src/jobs/sink/evolve.ts): an added field → ALTER TABLE … ADD;
// a removed field or a changed type → EO_SINK_TABLE_INVALID naming the field, the old and the new type.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compile } from '../../src/formats/compile.js';
import { deriveColumns } from '../../src/jobs/sink/derive-columns.js';
import { evolveStatements } from '../../src/jobs/sink/evolve.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { cqlColumnType } from '../../src/jobs/sink/cql-types.js';
import { valueFieldSpec } from '../../src/jobs/sink/column-source.js';
import { configError } from './config-error.js';

/** A log sink's config with the columns derived from an Avro schema, as resolveSinkConfig makes it. */
function derived(fields: object[], mode: 'log' | 'upsert' = 'log') {
  const d = deriveColumns(compile(1, 'AVRO', JSON.stringify({ type: 'record', name: 'Click', fields })));
  const columns = Object.fromEntries(d.columns.map((c) => [c.name, { type: c.type, ...(c.field === c.name ? {} : { field: valueFieldSpec(c.field) }) }]));
  return { ...sinkConfig({ topic: 't', table: 'clicks', mode, format: 'avro', columns, ...(mode === 'upsert' ? { key: ['id'] } : {}) }), derived: true };
}

/** The live table as system_schema.columns has it, for a config. */
const liveOf = (c: ReturnType<typeof derived>) => new Map([...(c.mode === 'log' ? [['partition', 'int'], ['offset', 'bigint']] as const : []), ...c.columns.map((x) => [x.name, cqlColumnType(x.type)] as const)]);

const V1 = [
  { name: 'id', type: 'long' },
  { name: 'page', type: 'string' },
  { name: 'tags', type: { type: 'map', values: 'int' } },
];

const refusal = (fn: () => unknown): string => configError(fn, 'EO_SINK_TABLE_INVALID');

test('the same schema: nothing to alter; no table yet: nothing either (migration 1 creates it)', () => {
  const v1 = derived(V1);
  assert.deepEqual(evolveStatements(v1, liveOf(v1), 'ks'), []);
  assert.deepEqual(evolveStatements(v1, new Map(), 'ks'), []);
  // system_schema spells a frozen map with a space; case and spaces do not matter.
  assert.deepEqual(evolveStatements(v1, new Map([['partition', 'int'], ['offset', 'bigint'], ['id', 'bigint'], ['page', 'text'], ['tags', 'frozen<map<text, int>>']]), 'ks'), []);
});

test('added fields (an optional one, a nested record): one ALTER TABLE … ADD per new column, in order', () => {
  const v1 = derived(V1);
  const v2 = derived([...V1, { name: 'channel', type: ['null', 'string'], default: null }, { name: 'geo', type: { type: 'record', name: 'Geo', fields: [{ name: 'lat', type: 'double' }, { name: 'seen', type: { type: 'array', items: 'long' } }] } }]);
  assert.deepEqual(evolveStatements(v2, liveOf(v1), 'ks'), ['ALTER TABLE ks.clicks ADD channel text', 'ALTER TABLE ks.clicks ADD geo_lat double', 'ALTER TABLE ks.clicks ADD geo_seen frozen<list<bigint>>']);
  // Half applied (a crash between two ALTERs): the next apply adds what is still missing.
  const half = new Map([...liveOf(v1), ['channel', 'text']]);
  assert.deepEqual(evolveStatements(v2, half, 'ks'), ['ALTER TABLE ks.clicks ADD geo_lat double', 'ALTER TABLE ks.clicks ADD geo_seen frozen<list<bigint>>']);
  const u1 = derived(V1, 'upsert');
  const u2 = derived([...V1, { name: 'channel', type: 'string', default: 'web' }], 'upsert');
  assert.deepEqual(evolveStatements(u2, liveOf(u1), 'ks'), ['ALTER TABLE ks.clicks ADD channel text']);
});

test('a changed type is refused naming the field, the old and the new type; nothing is altered', () => {
  const v1 = derived(V1);
  const v3 = derived([{ name: 'id', type: 'long' }, { name: 'page', type: 'long' }, { name: 'tags', type: { type: 'map', values: 'int' } }, { name: 'added', type: 'string' }]);
  const m = refusal(() => evolveStatements(v3, liveOf(v1), 'ks'));
  assert.match(m, /field page \(column page\) changed type: was text, now bigint/);
  assert.match(m, /nothing was altered/);
  // A collection's inner type too.
  const v4 = derived([{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }, { name: 'tags', type: { type: 'map', values: 'long' } }]);
  assert.match(refusal(() => evolveStatements(v4, liveOf(v1), 'ks')), /field tags \(column tags\) changed type: was frozen<map<text, int>>, now frozen<map<text, bigint>>/);
});

test('a removed field is refused naming it and its type; the log position columns are no fields', () => {
  const v1 = derived(V1);
  const v2 = derived([{ name: 'id', type: 'long' }, { name: 'tags', type: { type: 'map', values: 'int' } }, { name: 'channel', type: 'string' }]);
  const m = refusal(() => evolveStatements(v2, liveOf(v1), 'ks'));
  assert.match(m, /field for column page was removed \(the table has it as text/);
  assert.doesNotMatch(m, /partition|offset \(/);
});
