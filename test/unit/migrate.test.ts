import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadMigrations, parseReplication, replicationCql, splitStatements } from '../../src/cassandra/migrate.js';
import { ExactlyOnceError } from '../../src/errors.js';

test('migrations load in version order with the keyspace substituted', () => {
  const ms = loadMigrations('ks1');
  assert.deepEqual(ms.map((m) => m.version), [...ms.map((m) => m.version)].sort((a, b) => a - b));
  assert.equal(ms[0]!.name, 'original_tables');
  assert.equal(ms[0]!.statements.length, 2);
  assert.ok(ms.every((m) => m.statements.every((s) => !s.includes('{{keyspace}}'))));
  assert.match(ms[0]!.statements[0]!, /^CREATE TABLE IF NOT EXISTS ks1\.events \(/);
});

test('splitStatements drops comments and empty statements', () => {
  assert.deepEqual(splitStatements('-- c1\nA x; -- c2\n\n B y ;\n;'), ['A x', 'B y']);
});

test('replication specs', () => {
  assert.equal(replicationCql(parseReplication('SimpleStrategy:1')), "{'class': 'SimpleStrategy', 'replication_factor': 1 }");
  assert.equal(
    replicationCql(parseReplication('NetworkTopologyStrategy:dc1=3,dc2=2')),
    "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2 }",
  );
  for (const bad of ['SimpleStrategy:0', 'Simple:1', 'NetworkTopologyStrategy:', 'NetworkTopologyStrategy:dc1']) {
    assert.throws(() => parseReplication(bad), (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_CONFIG_INVALID');
  }
});

test('the migrations are numbered 1..7, then in ascending ranges of their own (020 the alert counts, 030 the cluster layouts); 007 adds the checkpoint epoch and partition_state, safe to run again', () => {
  const ms = loadMigrations('ks1');
  assert.deepEqual(ms.slice(0, 7).map((m) => m.version), [1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(ms.map((m) => m.version), [...new Set(ms.map((m) => m.version))].sort((a, b) => a - b), 'increasing, each once');
  assert.deepEqual(ms.slice(5, 7).map((m) => `${m.version} ${m.name}`), ['6 job', '7 checkpoint_epoch']);
  assert.ok(ms.some((m) => `${m.version} ${m.name}` === '20 alert_counts'), '020: the per-partition alert counts');
  assert.ok(ms.some((m) => m.version === 30 && m.name === 'events_bucketed'));
  assert.deepEqual(ms.find((m) => m.version === 45)?.statements, ['ALTER TABLE ks1.job ADD IF NOT EXISTS input_partitions int'], '045: the partition count a job is bound to');
  assert.deepEqual(ms.find((m) => m.version === 50)?.statements, ['CREATE TABLE IF NOT EXISTS ks1.table_owner (\n    table_name text PRIMARY KEY,\n    job text,\n    bound_at timestamp)'], '050: the job that writes each table');
  assert.deepEqual(ms[6]!.statements.map((s) => s.split('\n')[0]), [
    'ALTER TABLE ks1.checkpoints ADD IF NOT EXISTS epoch int',
    'CREATE TABLE IF NOT EXISTS ks1.partition_state (',
  ]);
});

test('010 adds the job-keyed engine tables beside the first ones, and the job of a registered worker', () => {
  const m = loadMigrations('ks1').find((x) => x.version === 10)!;
  assert.equal(m.name, 'job_tables');
  assert.deepEqual(m.statements.map((s) => s.split('\n')[0]), [
    'CREATE TABLE IF NOT EXISTS ks1.job_checkpoints (',
    'CREATE TABLE IF NOT EXISTS ks1.job_partition_state (',
    'CREATE TABLE IF NOT EXISTS ks1.job_quarantine (',
    'CREATE TABLE IF NOT EXISTS ks1.job_schema_migrations (',
    'ALTER TABLE ks1.workers ADD IF NOT EXISTS job text',
  ]);
});
