import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isDrained } from '../../src/harness/drain.js';
import { Producer } from '../../src/kafka/producer.js';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { CASSANDRA, cassandraSession, ensureRegistry, freshKeyspace, freshTopic, REGISTRY_ENV, runCli, startCli, testConfig, topicsAdmin, waitFor } from '../helpers.js';
import { assertExactlyOnce, checkpoints, generate, startWorker, waitDrained } from '../pipeline.js';

const JOB = 'examples/page-views/job.ts';

/** The records the test produces: every 7th is malformed, of a kind the job names. */
function pageView(i: number): string {
  if (i % 7 === 3) return i % 2 === 0 ? '{"url": "no-slash", "user": "u", "durationMs": 1}' : 'not json';
  return JSON.stringify({ url: `/page/${i % 5}`, user: `u-${i}`, durationMs: i * 10 });
}

test('the example job runs from the public API, beside the events job on the same topic and keyspace, each with its own positions', async (t) => {
  const config = testConfig();
  const session = await cassandraSession(t, config);
  const admin = topicsAdmin(t, config, [config.topic]);
  await admin.ensureTopic({ topic: config.topic, partitions: 3, replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.alertsTopic, partitions: 1, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } });
  t.after(() => admin.deleteTopic(config.alertsTopic).catch(() => undefined));
  const args = connectionArgs(config);
  const jobArgs = ['--job', JOB, '--job-option', `topic=${config.topic}`];

  // The engine's migrations, then the job's own, recorded apart; a second apply does nothing.
  const apply = await runCli(['schema', 'apply', ...args, ...jobArgs]);
  assert.equal(apply.code, 0, apply.stderr);
  assert.match(apply.stdout, /applied 010_job_tables/);
  assert.match(apply.stdout, /applied page-views\/1_page_views/);
  const again = await runCli(['schema', 'apply', ...args, ...jobArgs]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /job page-views: up to date \(1 migrations already applied\)/);
  const recorded = await session.execute(`SELECT job, version, name FROM ${config.keyspace}.job_schema_migrations`);
  assert.deepEqual(recorded.rows.map((r) => [r['job'], r['version'], r['name']]), [['page-views', 1, 'page_views']]);

  const n = 300;
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.send(config.topic, Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: pageView(i), partition: i % 3 })));

  // The example job and the events job, on the same topic and keyspace, in their own groups.
  const example = startCli(t, ['run', ...args, ...jobArgs, '--session-timeout-ms', '6000']);
  const events = startCli(t, ['run', ...args, '--group', `${config.group}-events`, '--session-timeout-ms', '6000']);
  const marks = await admin.watermarks(config.topic);
  const read = async (table: string, where = '') =>
    new Map((await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.${table}${where}`)).rows.map((r) => [r['partition'] as number, BigInt(String(r['next_offset']))]));
  await waitFor(async () => isDrained(marks, await read('job_checkpoints')) && isDrained(marks, await read('checkpoints')), {
    timeoutMs: 240_000,
    intervalMs: 500,
    message: `both jobs reach the log ends (example: ${example.output().slice(-400)}; events: ${events.output().slice(-400)})`,
  });
  assert.equal(example.exitCode, null);

  // Each offset exactly once in the example's table or its quarantine, with the record's values.
  const rows = await session.execute(`SELECT partition, offset, url, user_id, duration_ms FROM ${config.keyspace}.page_views`, [], { fetchSize: 10_000 });
  const quarantined = await session.execute(`SELECT job, partition, offset, reason FROM ${config.keyspace}.job_quarantine`, [], { fetchSize: 10_000 });
  const expectedRows: string[] = [];
  const expectedBad: string[] = [];
  for (let i = 0; i < n; i++) {
    const at = `${i % 3}/${Math.floor(i / 3)}`;
    if (i % 7 === 3) expectedBad.push(`page-views ${at} ${i % 2 === 0 ? 'bad_url' : 'bad_json'}`);
    else expectedRows.push(`${at} /page/${i % 5} u-${i} ${i * 10}`);
  }
  assert.deepEqual(rows.rows.map((r) => `${r['partition']}/${r['offset']} ${r['url']} ${r['user_id']} ${r['duration_ms']}`).sort(), expectedRows.sort());
  assert.deepEqual(quarantined.rows.map((r) => `${r['job']} ${r['partition']}/${r['offset']} ${r['reason']}`).sort(), expectedBad.sort());
  // The job's positions are its own: the events job (whose decoder rejects page views) keeps its
  // checkpoints and quarantine in the first tables, every one of the n offsets there.
  const jobCheckpoints = await session.execute(`SELECT job, topic FROM ${config.keyspace}.job_checkpoints`);
  assert.deepEqual([...new Set(jobCheckpoints.rows.map((r) => `${r['job']} ${r['topic']}`))], [`page-views ${config.topic}`]);
  const eventsQuarantine = await session.execute(`SELECT partition, offset FROM ${config.keyspace}.quarantine`, [], { fetchSize: 10_000 });
  assert.equal(eventsQuarantine.rowLength, n);
  const boundJobs = await session.execute(`SELECT name, input_topic FROM ${config.keyspace}.job`);
  assert.deepEqual(boundJobs.rows.map((r) => `${r['name']} ${r['input_topic']}`).sort(), [`events ${config.topic}`, `page-views ${config.topic}`]);

  // The proof from the job's own description of its output (audit.expect), offset by offset.
  const proof = await runCli(['verify', ...args, ...jobArgs, '--json', '--no-record']);
  assert.equal(proof.code, 0, proof.stdout.slice(-3000) + proof.stderr);
  const report = JSON.parse(proof.stdout) as { ok: boolean; job: string; violationTotal: number; totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.ok, report.job, report.violationTotal], [true, 'page-views', 0]);
  assert.deepEqual(report.totals.records, n);
  assert.deepEqual([report.totals.stored, report.totals.quarantined], [expectedRows.length, expectedBad.length]);
  // A row that differs from its record is found, by partition and offset.
  await session.execute(`UPDATE ${config.keyspace}.page_views SET duration_ms = -1 WHERE partition = 0 AND offset = 0`);
  const broken = await runCli(['verify', ...args, ...jobArgs, '--no-record']);
  assert.equal(broken.code, 9);
  assert.match(broken.stdout, /partition 0 offset 0: duration_ms is -1, the record says 0/);

  // A clean stop runs the job's close hook.
  example.kill('SIGTERM');
  await waitFor(() => example.exitCode !== null, { timeoutMs: 60_000, message: 'the example worker stops on SIGTERM' });
  assert.equal(example.exitCode, 0);
  assert.match(example.output(), /page-views: partitions assigned/);
  assert.match(example.output(), /page-views: closed/);
});

test('upgrading a keyspace to job-keyed tables (migration 010) keeps the events job\'s positions: the worker resumes from its stored checkpoints', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 2);
  // A keyspace as the previous version left it: no job-keyed tables, migration 010 not recorded.
  for (const table of ['job_checkpoints', 'job_partition_state', 'job_quarantine', 'job_schema_migrations']) await session.execute(`DROP TABLE ${config.keyspace}.${table}`);
  await session.execute(`DELETE FROM ${config.keyspace}.schema_migrations WHERE version = 10`);

  await generate(config, ['--count', '100', '--no-delay', '--seed', '3']);
  const before = startWorker(t, config);
  await waitDrained(session, config);
  const positions = await checkpoints(session, config);
  before.kill('SIGTERM');
  await waitFor(() => before.exitCode !== null, { timeoutMs: 60_000, message: 'the worker stops' });

  const apply = await runCli(['schema', 'apply', '--cassandra', CASSANDRA, '--keyspace', config.keyspace]);
  assert.equal(apply.code, 0, apply.stderr);
  assert.deepEqual(apply.stdout.split('\n').filter((l) => l.includes('applied')), ['  applied 010_job_tables']);
  assert.deepEqual(await checkpoints(session, config), positions, 'the checkpoints are where they were');
  assert.equal((await session.execute(`SELECT * FROM ${config.keyspace}.job_checkpoints`)).rowLength, 0, 'nothing copied: the events job keeps its tables');

  await generate(config, ['--count', '100', '--no-delay', '--seed', '4']);
  const after = startWorker(t, config);
  await waitDrained(session, config);
  // It resumed from the stored positions, not from the log start (nor the end).
  const assigned = /"assigned":(\{[^}]*\})/.exec(after.output());
  assert.ok(assigned !== null, after.output().slice(-2000));
  const starts = JSON.parse(assigned[1]!) as Record<string, string>;
  assert.ok(positions.size > 0);
  for (const [p, o] of positions) assert.equal(starts[String(p)], String(o), `partition ${p} resumes at its checkpoint`);
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 200);
  after.kill('SIGTERM');
});

test("a job of the public API reads Avro through the package's decoders (--job-option format=avro): lookup before decode, verify --job", async (t) => {
  const { avroType, encodeAvro } = await import('../../src/formats/avro.js');
  const { withWireHeader } = await import('../../src/formats/wire.js');
  const { SchemaRegistry } = await import('../../src/registry/schema-registry.js');
  await ensureRegistry();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 1);
  const schema = JSON.stringify({ type: 'record', name: 'PageView', fields: [{ name: 'url', type: 'string' }, { name: 'user', type: 'string' }, { name: 'durationMs', type: 'int' }] });
  const id = await new SchemaRegistry(config.schemaRegistry).register(`${config.topic}-value`, 'AVRO', schema);
  const type = avroType(schema);
  const args = connectionArgs(config);
  const jobArgs = ['--job', JOB, '--job-option', `topic=${config.topic}`, '--job-option', 'format=avro'];
  const apply = await runCli(['schema', 'apply', ...args, ...jobArgs], REGISTRY_ENV);
  assert.equal(apply.code, 0, apply.stderr);
  const producer = new Producer(config);
  await producer.connect();
  await producer.send(config.topic, [
    { key: null, value: withWireHeader(id, encodeAvro(type, { url: '/a', user: 'u-1', durationMs: 5 })), partition: 0 },
    { key: null, value: withWireHeader(id, encodeAvro(type, { url: 'no-slash', user: 'u-2', durationMs: 6 })), partition: 0 },
    { key: null, value: Buffer.from('{"url": "/json"}'), partition: 0 },
  ]);
  await producer.close();
  startCli(t, ['run', ...args, ...jobArgs], REGISTRY_ENV);
  await waitFor(async () => (await session.execute(`SELECT offset FROM ${config.keyspace}.page_views`)).rowLength === 1, { timeoutMs: 180_000, message: 'the Avro page view stored' });
  const row = (await session.execute(`SELECT url, user_id, duration_ms FROM ${config.keyspace}.page_views`)).rows[0]!;
  assert.deepEqual([row['url'], row['user_id'], row['duration_ms']], ['/a', 'u-1', 5]);
  const proof = await waitFor(async () => {
    const r = await runCli(['verify', ...args, ...jobArgs, '--json', '--no-record'], REGISTRY_ENV);
    return r.code === 0 ? (JSON.parse(r.stdout) as { totals: { stored: number; quarantined: number }; partitions: Array<{ reasons: Record<string, number> }> }) : undefined;
  }, { timeoutMs: 120_000, message: 'verify --job passes' });
  assert.deepEqual([proof.totals.stored, proof.totals.quarantined, proof.partitions[0]!.reasons], [1, 2, { bad_url: 1, missing_magic_byte: 1 }]);
});
