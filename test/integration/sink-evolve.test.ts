// Additive schema evolution of a sink whose columns are derived from the real Schema Registry
// (src/jobs/sink/evolve.ts): v2 adds an optional field and `schema apply --job` adds its column; v3 changes
// a field's type and is refused with EO_SINK_TABLE_INVALID naming the field and both types, the table
// unchanged; a second apply with nothing new changes nothing.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { SchemaRegistry } from '../../src/registry/schema-registry.js';
import { BROKERS, CASSANDRA, cassandraSession, ensureRegistry, REGISTRY_ENV, runCli, testConfig } from '../helpers.js';

test('schema apply --job on a derived sink: an added field adds its column; a changed type is refused, the table unchanged', async (t) => {
  await ensureRegistry();
  const config = testConfig();
  const session = await cassandraSession(t, config);
  const registry = new SchemaRegistry(config.schemaRegistry);
  const subject = `${config.topic}-value`;
  const v1 = { type: 'record', name: 'Click', fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'string' }] };
  const v2 = { ...v1, fields: [...v1.fields, { name: 'channel', type: ['null', 'string'], default: null }] };
  const v3 = { ...v2, fields: [{ name: 'id', type: 'long' }, { name: 'page', type: 'long' }, v2.fields[2]!] };
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-evolve-')), 'sink.json');
  writeFileSync(file, JSON.stringify({ name: 'clicks_evolve', topic: config.topic, format: 'avro', table: 'clicks', mode: 'log' }));
  const apply = () => runCli(['schema', 'apply', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', file], REGISTRY_ENV);
  const columns = async () =>
    Object.fromEntries((await session.execute('SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [config.keyspace, 'clicks'], { prepare: true })).rows.map((r) => [r['column_name'] as string, r['type'] as string]));

  await registry.register(subject, 'AVRO', JSON.stringify(v1));
  const a1 = await apply();
  assert.equal(a1.code, 0, a1.stdout + a1.stderr);
  assert.deepEqual(await columns(), { partition: 'int', offset: 'bigint', id: 'bigint', page: 'text' });

  await registry.register(subject, 'AVRO', JSON.stringify(v2));
  const a2 = await apply();
  assert.equal(a2.code, 0, a2.stdout + a2.stderr);
  assert.match(a2.stdout, /applied ALTER TABLE \w+\.clicks ADD channel text/);
  assert.deepEqual(await columns(), { partition: 'int', offset: 'bigint', id: 'bigint', page: 'text', channel: 'text' });
  const again = await apply();
  assert.equal(again.code, 0, again.stdout + again.stderr);
  assert.doesNotMatch(again.stdout, /ALTER/);

  await registry.register(subject, 'AVRO', JSON.stringify(v3));
  const a3 = await apply();
  assert.notEqual(a3.code, 0, a3.stdout);
  assert.match(a3.stderr, /EO_SINK_TABLE_INVALID/);
  assert.match(a3.stderr, /field page \(column page\) changed type: was text, now bigint/);
  assert.deepEqual(await columns(), { partition: 'int', offset: 'bigint', id: 'bigint', page: 'text', channel: 'text' });
});
