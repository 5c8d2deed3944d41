// Paths outside the happy envelope (issue 15): each must end in the right result or in a stopped
// partition with a coded error at error level, a metric and the worker still answering — never in
// silence, never in a skipped record.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { connectedProducer, freshKeyspaceAndTopic, freshTopic, recreateTopic, repoRoot, runCli, waitFor } from '../helpers.js';
import { checkpoints, connectionArgs, generate, readyz, sleep, startServedWorker, waitDrained, type Worker } from '../pipeline.js';

/** The worker's error-level log lines (pino level 50) carrying `code`, as {partition, msg}. */
function coded(worker: Worker, code: string): Array<{ partition: number | undefined; msg: string }> {
  return worker
    .output()
    .split('\n')
    .filter((l) => l.includes(`"code":"${code}"`))
    .map((l) => JSON.parse(l) as { level: number; partition?: number; msg: string })
    .map((e) => {
      assert.equal(e.level, 50, `logged at error level: ${e.msg}`);
      return { partition: e.partition, msg: e.msg };
    });
}

async function metric(worker: { port: number }, name: string): Promise<string[]> {
  const text = await (await fetch(`http://127.0.0.1:${worker.port}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(name));
}

async function stop(worker: Worker): Promise<void> {
  if (worker.exitCode !== null) return;
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
}

async function eventCount(session: Client, config: ConnectionConfig, partition: number): Promise<number> {
  const r = await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.events WHERE partition = ?`, [partition], { prepare: true });
  return Number(r.first()['n']);
}

/** Deletes the config's topic and creates it again with `partitions`, once Kafka has let go of it. */
async function drainedWorker(t: TestContext, config: ConnectionConfig, session: Client, count: number, partitions: number) {
  await generate(config, ['--count', String(count), '--rate', '100000', '--clients', '6', '--seed', '7']);
  const worker = await startServedWorker(t, config);
  const ends = await waitDrained(session, config, 120_000);
  assert.equal([...ends.values()].reduce((a, b) => a + b, 0n), BigInt(count));
  assert.equal(ends.size, partitions);
  return { worker, ends };
}

test('a topic deleted and re-created with more records than the checkpoints: stopped at assignment, nothing read', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const { worker, ends } = await drainedWorker(t, config, session, 400, 2);
  await stop(worker);
  const oldId = (await admin.topicId(config.topic))!;

  await recreateTopic(admin, config, 2);
  const newId = (await admin.topicId(config.topic))!;
  await generate(config, ['--count', '3000', '--rate', '100000', '--clients', '6', '--seed', '8']); // more than each old checkpoint
  const stored = [await eventCount(session, config, 0), await eventCount(session, config, 1)];

  const again = await startServedWorker(t, config);
  await waitFor(() => coded(again, 'EO_TOPIC_RECREATED').filter((l) => l.partition !== undefined).length === 2, { timeoutMs: 120_000, message: 'both partitions stop with EO_TOPIC_RECREATED' });
  const lines = coded(again, 'EO_TOPIC_RECREATED').filter((l) => l.partition !== undefined);
  assert.deepEqual(lines.map((l) => l.partition).sort(), [0, 1]);
  for (const l of lines) {
    assert.ok(l.msg.includes(`topic ID ${oldId}`) && l.msg.includes(`ID ${newId}`), l.msg);
    assert.match(l.msg, /exactlyonce checkpoints reset --all --to earliest --rebind/);
  }
  assert.deepEqual(await metric(again, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_TOPIC_RECREATED"} 2']);
  assert.deepEqual((await metric(again, 'exactlyonce_partition_stopped')).sort(), ['exactlyonce_partition_stopped{partition="0"} 1', 'exactlyonce_partition_stopped{partition="1"} 1']);
  // Every partition it owns is stopped: not ready, so an orchestrator does not count it as working (issue 43 item 5).
  assert.deepEqual(await readyz(again), {
    status: 503,
    detail: 'not ready: every partition it owns is stopped: 0 EO_TOPIC_RECREATED, 1 EO_TOPIC_RECREATED (the error log says why; `exactlyonce checkpoints list` too)',
  });
  // Nothing of the new topic was stored over the old rows, and no checkpoint moved.
  await sleep(3000);
  assert.deepEqual(await checkpoints(session, config), ends);
  assert.deepEqual([await eventCount(session, config, 0), await eventCount(session, config, 1)], stored);
  await stop(again);
});

test('a topic re-created under a running worker: its partitions stop, no checkpoint moves', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 1);
  const { worker, ends } = await drainedWorker(t, config, session, 300, 1);
  await recreateTopic(admin, config, 1);
  await generate(config, ['--count', '2000', '--rate', '100000', '--clients', '6', '--seed', '9']);
  await waitFor(() => coded(worker, 'EO_TOPIC_RECREATED').length === 1, { timeoutMs: 120_000, message: 'the partition stops with EO_TOPIC_RECREATED' });
  await sleep(3000);
  assert.deepEqual(await checkpoints(session, config), ends);
  assert.equal(await eventCount(session, config, 0), 300);
  assert.deepEqual(await metric(worker, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_TOPIC_RECREATED"} 1']);
  await stop(worker);
});

test("records deleted under a running worker before it read them: the partition stops, the consumer never jumps", async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 1);
  await generate(config, ['--count', '60000', '--rate', '100000', '--clients', '6', '--seed', '10']);
  // Small batches and the smallest prefetch: the worker is far behind when the records go.
  const worker = await startServedWorker(t, config, ['--max-batch', '50', '--max-buffer-mb', '1']);
  await waitFor(async () => ((await checkpoints(session, config)).get(0) ?? 0n) > 0n, { timeoutMs: 120_000, message: 'the worker stores a first batch' });
  await admin.deleteRecords(config.topic, 0, 60000n);
  await waitFor(() => coded(worker, 'EO_POSITION_OUT_OF_RANGE').length === 1, { timeoutMs: 120_000, message: 'the partition stops with EO_POSITION_OUT_OF_RANGE' });
  const [line] = coded(worker, 'EO_POSITION_OUT_OF_RANGE');
  assert.equal(line!.partition, 0);
  assert.match(line!.msg, /is outside the log \[60000, 60000\]/);
  const stoppedAt = (await checkpoints(session, config)).get(0)!;
  assert.ok(stoppedAt < 60000n, `stopped below the new log start (${stoppedAt})`);
  assert.equal(BigInt(await eventCount(session, config, 0)), stoppedAt, 'every offset below the checkpoint is stored, none above');
  await sleep(3000);
  assert.equal((await checkpoints(session, config)).get(0), stoppedAt, 'the checkpoint never jumps to the new log start');
  assert.deepEqual(await metric(worker, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_POSITION_OUT_OF_RANGE"} 1']);
  await stop(worker);
});

test('a permanent Cassandra error (a column dropped under a running worker) stops the partition once, visibly', async (t) => {
  const { config, session } = await freshKeyspaceAndTopic(t, 1);
  const { worker, ends } = await drainedWorker(t, config, session, 200, 1);
  await session.execute(`ALTER TABLE ${config.keyspace}.events DROP client`);
  await generate(config, ['--count', '200', '--rate', '100000', '--clients', '6', '--seed', '11']);
  await waitFor(() => coded(worker, 'EO_PERMANENT_ERROR').length > 0, { timeoutMs: 120_000, message: 'the partition stops with EO_PERMANENT_ERROR' });
  await sleep(3000);
  const lines = coded(worker, 'EO_PERMANENT_ERROR');
  assert.equal(lines.length, 1, 'one line, not one per redelivery');
  assert.equal(lines[0]!.partition, 0);
  assert.match(lines[0]!.msg, /a statement no longer prepares: a table or column it uses was altered or dropped/);
  assert.deepEqual(await checkpoints(session, config), ends, 'the checkpoint stays where every record is stored');
  assert.deepEqual(await metric(worker, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_PERMANENT_ERROR"} 1']);
  await stop(worker);
});

test('a keyspace serves one topic: a worker for another topic refuses with one coded line', async (t) => {
  const { config, session } = await freshKeyspaceAndTopic(t, 1);
  await drainedWorker(t, config, session, 50, 1).then(({ worker }) => stop(worker));
  const other = { ...config, topic: `${config.topic}-other`, alertsTopic: config.alertsTopic };
  await freshTopic(t, { ...other, alertsTopic: `${config.alertsTopic}-unused` }, 1);
  const r = await runCli(['run', ...connectionArgs(other as ConnectionConfig)], {}, 120_000);
  assert.equal(r.code, 5, r.stderr);
  assert.equal(
    r.stderr.trim().split('\n').pop(),
    `error EO_TOPIC_MISMATCH: keyspace ${config.keyspace} serves topic ${config.topic}, not ${other.topic}: one keyspace holds one topic's records (their rows are keyed by partition and offset). Use --topic ${config.topic}, or another --keyspace for ${other.topic}`,
  );
});

test('planning an assignment fails for good (the checkpoints table is gone): the partitions stop, never read from a default position', async (t) => {
  const { config, session } = await freshKeyspaceAndTopic(t, 2);
  await generate(config, ['--count', '100', '--rate', '100000', '--clients', '6', '--seed', '12']);
  await session.execute(`DROP TABLE ${config.keyspace}.checkpoints`);
  const worker = await startServedWorker(t, config);
  await waitFor(() => coded(worker, 'EO_ASSIGNMENT_FAILED').length === 2, { timeoutMs: 120_000, message: 'both partitions stop with EO_ASSIGNMENT_FAILED' });
  const lines = coded(worker, 'EO_ASSIGNMENT_FAILED');
  assert.deepEqual(lines.map((l) => l.partition).sort(), [0, 1]);
  assert.match(lines[0]!.msg, /^partitions 0,1: planning where they resume failed \(.*checkpoints.*\); they are stopped, not read from a default position/);
  await sleep(3000);
  assert.deepEqual([await eventCount(session, config, 0), await eventCount(session, config, 1)], [0, 0], 'nothing was read');
  assert.deepEqual(await metric(worker, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_ASSIGNMENT_FAILED"} 2']);
  await stop(worker);
});

test('the alerts topic deleted under a running worker: the partition stops with EO_TOPIC_MISMATCH, never a send retried for ever', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 1);
  const { worker, ends } = await drainedWorker(t, config, session, 200, 1);
  await admin.deleteTopic(config.alertsTopic);
  // Every event unhealthy: the first batch raises alerts, whose send finds no topic.
  await generate(config, ['--count', '200', '--rate', '100000', '--clients', '2', '--health-mix', '2:1', '--seed', '13']);
  await waitFor(() => coded(worker, 'EO_TOPIC_MISMATCH').length > 0, { timeoutMs: 240_000, message: 'the partition stops with EO_TOPIC_MISMATCH' });
  await sleep(3000);
  const lines = coded(worker, 'EO_TOPIC_MISMATCH');
  assert.equal(lines.length, 1, 'one line');
  assert.equal(lines[0]!.partition, 0);
  assert.equal(
    lines[0]!.msg,
    `output topic ${config.alertsTopic} does not exist at ${config.brokers.join(',')} (deleted under a running worker?): the partition stops at its checkpoint, nothing is skipped. ` +
      `Run \`exactlyonce topic create --topic ${config.topic} --alerts-topic ${config.alertsTopic}\`, then restart the worker`,
  );
  assert.deepEqual(await checkpoints(session, config), ends, 'the checkpoint stays where every record is stored');
  assert.deepEqual(await metric(worker, 'exactlyonce_partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_TOPIC_MISMATCH"} 1']);
  assert.equal((await fetch(`http://127.0.0.1:${worker.port}/healthz`)).status, 200, 'the worker still answers');
  await stop(worker);
});

// The last resort: a rejection nothing handles (a bug, here a job's promise nobody awaits) used to end
// the worker with Node's own report. It is logged with a code at error level and counted, and the
// worker goes on reading, every record once.
test('a failure nothing handles (an unhandled rejection) is logged as EO_INTERNAL and counted; the worker goes on, every record once', async (t) => {
  const { config } = await freshKeyspaceAndTopic(t, 1);
  const producer = await connectedProducer(t, config);
  const job = ['--job', join(repoRoot, 'test', 'fixtures', 'slow-assign-job.ts'), '--job-option', 'rejectOnAssign=1'];
  const worker = await startServedWorker(t, config, job);
  await waitFor(() => coded(worker, 'EO_INTERNAL').length === 1, { timeoutMs: 120_000, message: 'the unhandled rejection is logged as EO_INTERNAL' });
  const [line] = coded(worker, 'EO_INTERNAL');
  assert.match(line!.msg, /^a failure nothing handled \(a bug: please report it, with this line\): Error: a bug in the job: a promise nobody awaits \(partitions 0\)\n/);
  assert.match(line!.msg, /; the worker goes on$/);
  assert.deepEqual(await metric(worker, 'exactlyonce_errors_total{server="worker"'), ['exactlyonce_errors_total{server="worker",error="EO_INTERNAL"} 1']);
  // Alive and at work: records sent after it are read, each once.
  await producer.send(config.topic, Array.from({ length: 50 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 })));
  const written = () =>
    worker
      .output()
      .split('\n')
      .filter((l) => l.includes('"slow-assign: wrote"'))
      .flatMap((l) => (JSON.parse(l) as { offsets: string[] }).offsets.map(Number));
  await waitFor(() => written().length >= 50, { timeoutMs: 120_000, message: 'the worker reads the records sent after the failure' });
  assert.deepEqual(written(), Array.from({ length: 50 }, (_, i) => i));
  assert.equal(worker.exitCode, null);
  await stop(worker);
});
