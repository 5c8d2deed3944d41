import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CASSANDRA, cassandraSession, runCli, testConfig } from '../helpers.js';

/** Columns of a table from system_schema: name → [kind, position, type, clustering order]. */
async function columns(session: Awaited<ReturnType<typeof cassandraSession>>, keyspace: string, table: string) {
  const r = await session.execute(
    'SELECT column_name, kind, position, type, clustering_order FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?',
    [keyspace, table],
  );
  return Object.fromEntries(
    r.rows
      .map((row) => [row['column_name'], [row['kind'], row['position'], row['type'], row['clustering_order']]] as const)
      .sort(([a], [b]) => String(a).localeCompare(String(b))),
  );
}

test('schema apply creates the original tables verbatim, and a second apply is a no-op', async (t) => {
  const config = testConfig();
  const session = await cassandraSession(t, config);
  const args = ['schema', 'apply', '--cassandra', CASSANDRA, '--keyspace', config.keyspace];

  const first = await runCli(args);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(
    first.stdout,
    `keyspace ${config.keyspace}: created\n  applied 001_original_tables\n  applied 002_engine_tables\n  applied 003_alert_index\n` +
      '  applied 004_workers\n  applied 005_audit_runs\n  applied 006_job\n  applied 007_checkpoint_epoch\n  applied 010_job_tables\n  applied 020_alert_counts\n  applied 030_events_bucketed\n  applied 040_audit_proof\n  applied 045_job_input_partitions\n  applied 050_table_owner\n  applied 060_checkpoint_replay\n',
  );
  // An event's own fields, regular columns of both layouts' tables.
  const fields = {
    client: ['regular', -1, 'text', 'none'],
    health: ['regular', -1, 'int', 'none'],
    id: ['regular', -1, 'bigint', 'none'],
    source: ['regular', -1, 'text', 'none'],
    ts: ['regular', -1, 'timestamp', 'none'],
  };
  // The bucketed layout's table: one Cassandra partition per (Kafka partition, bucket of offsets).
  assert.deepEqual(await columns(session, config.keyspace, 'events_bucketed'), {
    ...fields,
    bucket: ['partition_key', 1, 'bigint', 'none'],
    offset: ['clustering', 0, 'bigint', 'asc'],
    partition: ['partition_key', 0, 'int', 'none'],
  });

  assert.deepEqual(await columns(session, config.keyspace, 'events'), {
    ...fields,
    offset: ['clustering', 0, 'bigint', 'desc'],
    partition: ['partition_key', 0, 'int', 'none'],
  });
  assert.deepEqual(await columns(session, config.keyspace, 'alerts'), {
    event_count: ['regular', -1, 'int', 'none'],
    source: ['partition_key', 0, 'text', 'none'],
    ts: ['clustering', 0, 'timestamp', 'asc'],
  });
  // 007: each checkpoint carries its reset epoch; 060: where its writer would read again after a node
  // crash (src/engine/checkpoint-store.ts).
  assert.deepEqual(await columns(session, config.keyspace, 'checkpoints'), {
    epoch: ['regular', -1, 'int', 'none'],
    next_offset: ['regular', -1, 'bigint', 'none'],
    partition: ['clustering', 0, 'int', 'asc'],
    replay: ['regular', -1, 'frozen<tuple<bigint, timestamp>>', 'none'],
    topic: ['partition_key', 0, 'text', 'none'],
  });
  const ks = await session.execute('SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = ?', [config.keyspace]);
  assert.deepEqual(ks.first()['replication'], { class: 'org.apache.cassandra.locator.SimpleStrategy', replication_factor: '1' });

  await session.execute(`INSERT INTO ${config.keyspace}.alerts (source, ts, event_count) VALUES ('s', 0, 10)`);
  const second = await runCli(args);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.stdout, `keyspace ${config.keyspace}: exists\n  up to date (14 migrations already applied)\n`);
  assert.equal((await session.execute(`SELECT * FROM ${config.keyspace}.alerts`)).rowLength, 1, 'a plain apply keeps data');

  const reset = await runCli([...args, '--reset']);
  assert.equal(reset.code, 0, reset.stderr);
  assert.match(reset.stdout, /truncated .*alerts/);
  assert.equal((await session.execute(`SELECT * FROM ${config.keyspace}.alerts`)).rowLength, 0, '--reset truncates');
  const versions = await session.execute(`SELECT version FROM ${config.keyspace}.schema_migrations`);
  assert.deepEqual(versions.rows.map((r) => r['version'] as number).sort((a, b) => a - b), [1, 2, 3, 4, 5, 6, 7, 10, 20, 30, 40, 45, 50, 60]);
});

test('cql runs one statement and prints rows as a table', async (t) => {
  const config = testConfig();
  const session = await cassandraSession(t, config);
  assert.equal((await runCli(['schema', 'apply', '--cassandra', CASSANDRA, '--keyspace', config.keyspace])).code, 0);
  await session.execute(`INSERT INTO ${config.keyspace}.events (partition, offset, id, ts, source, client, health) VALUES (1, 7, -9223372036854775808, 0, 'My Router', 'c', 2)`);
  const r = await runCli(['cql', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, 'SELECT partition, offset, id, health FROM events']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout,
    ' partition | offset | id                   | health\n' +
      '-----------+--------+----------------------+-------\n' +
      ' 1         | 7      | -9223372036854775808 | 2     \n' +
      '(1 row)\n',
  );
  const bad = await runCli(['cql', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, 'SELECT nope FROM events']);
  assert.equal(bad.code, 4);
  assert.match(bad.stderr, /^error EO_CASSANDRA_QUERY: .*nope/);
});
