import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { encodeEvent } from '../../src/jobs/events/event.js';
import { toLong } from '../../src/cassandra/session.js';
import { Producer, type OutgoingRecord } from '../../src/kafka/producer.js';
import { parsePrometheus, select, type Sample } from '../../src/dashboard/prometheus.js';
import { freshKeyspace, freshTopic, testConfig, waitFor } from '../helpers.js';
import { freePort, startWorker, waitStarted } from '../pipeline.js';

async function scrape(port: number): Promise<Sample[]> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  return parsePrometheus(await r.text());
}

/** The value of one series, undefined when the series is absent. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  const found = select(samples, `exactlyonce_${name}`, labels).filter((s) => Object.keys(s.labels).length === Object.keys(labels).length);
  assert.ok(found.length <= 1, `${name} ${JSON.stringify(labels)}: ${found.length} series`);
  return found[0]?.value;
}

const event = (i: number, partition: number): OutgoingRecord => ({
  key: `k${i}`,
  partition,
  value: encodeEvent({ id: BigInt(i) * 7919n, ts: 1_700_000_000_000 + i, source: 'My Router', client: 'c', health: 0 }),
});
const broken = (partition: number): OutgoingRecord => ({ key: 'bad', partition, value: '{"id":' });

test("a worker's /metrics: exact per-partition counts, checkpoints, lag refreshed from the log end; /healthz, /readyz; the workers table", async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const port = await freePort();

  // Partition 0 has a checkpoint beyond its (empty) log: the worker stops it, so it never moves, and
  // its lag can only change through the periodic log end refresh.
  await session.execute(`UPDATE ${config.keyspace}.checkpoints USING TIMESTAMP 50 SET next_offset = ? WHERE topic = ? AND partition = ?`, [
    toLong(50n),
    config.topic,
    0,
  ]);
  const worker = startWorker(t, config, ['--metrics-port', String(port)]);
  await waitStarted(worker);
  const health = await fetch(`http://127.0.0.1:${port}/healthz`);
  assert.equal(health.status, 200);
  // (A first assignment can be empty while the new topic's metadata reaches the client: then the
  // worker is ready but owns nothing, until the next rebalance hands it the partitions.)
  await waitFor(
    async () => {
      const r = await fetch(`http://127.0.0.1:${port}/readyz`);
      return r.status === 200 && (await r.text()) === 'ready: owns partitions 0,1,2 (stopped: 0 EO_CHECKPOINT_OUT_OF_RANGE)\n';
    },
    { timeoutMs: 60_000, message: '/readyz answers 200 "ready: owns partitions 0,1,2 (stopped: 0 EO_CHECKPOINT_OUT_OF_RANGE)"' },
  );

  // Partition 1: 300 events and 7 undecodable records; partition 2: 120 events; partition 0: 80 records (not read).
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const p1 = [...Array.from({ length: 300 }, (_, i) => event(i, 1)), ...Array.from({ length: 7 }, () => broken(1))];
  await producer.send(config.topic, p1);
  await producer.send(config.topic, Array.from({ length: 120 }, (_, i) => event(1000 + i, 2)));
  await producer.send(config.topic, Array.from({ length: 80 }, (_, i) => event(2000 + i, 0)));

  const m = await waitFor(
    async () => {
      const s = await scrape(port);
      return value(s, 'checkpoint_offset', { partition: '1' }) === 307 &&
        value(s, 'checkpoint_offset', { partition: '2' }) === 120 &&
        value(s, 'lag_records', { partition: '0' }) === 30
        ? s
        : undefined;
    },
    { timeoutMs: 60_000, message: 'partitions 1 and 2 checkpointed at their log ends, partition 0 lag refreshed to 80 − 50' },
  );
  assert.equal(value(m, 'records_consumed_total', { partition: '1' }), 307);
  assert.equal(value(m, 'records_stored_total', { partition: '1' }), 300);
  assert.equal(value(m, 'records_quarantined_total', { partition: '1', reason: 'invalid_json' }), 7);
  assert.equal(value(m, 'records_consumed_total', { partition: '2' }), 120);
  assert.equal(value(m, 'records_stored_total', { partition: '2' }), 120);
  assert.equal(value(m, 'records_consumed_total', { partition: '0' }), undefined, 'the stopped partition reads nothing');
  for (const p of ['1', '2']) {
    assert.equal(value(m, 'lag_records', { partition: p }), 0);
    assert.equal(value(m, 'log_end_offset', { partition: p }), p === '1' ? 307 : 120);
    assert.equal(value(m, 'partition_owned', { partition: p }), 1);
  }
  assert.equal(value(m, 'checkpoint_offset', { partition: '0' }), 50);
  assert.equal(value(m, 'log_end_offset', { partition: '0' }), 80);
  assert.equal(value(m, 'partition_stopped', { partition: '0' }), 1);
  assert.equal(value(m, 'partition_owned', { partition: '0' }), 1);
  assert.equal(value(m, 'assigned_partitions'), 3);
  assert.equal(value(m, 'partitions_assigned_total'), 3);
  assert.ok((value(m, 'rebalances_total', { kind: 'assign' }) ?? 0) >= 1);
  const batches = select(m, 'exactlyonce_batches_total').reduce((a, s) => a + s.value, 0);
  assert.ok(batches >= 2);
  assert.equal(value(m, 'batch_duration_seconds_count'), batches, 'one latency observation per batch');
  assert.equal(value(m, 'batch_records_sum'), 427, 'every record read is in exactly one batch');
  assert.ok((value(m, 'identity_checks_total') ?? 0) >= 1, 'the batches were vouched for by identity checks');
  // Each checkpointed batch timed its rows, its wait for the previous checkpoint and its own checkpoint write.
  for (const stage of ['decode', 'rows', 'checkpoint_wait', 'checkpoint']) {
    assert.equal(value(m, 'batch_stage_seconds_count', { stage }), batches, `one ${stage} observation per batch`);
  }
  assert.equal(value(m, 'server_up', { server: 'Kafka' }), 1);
  assert.equal(value(m, 'server_up', { server: 'Cassandra' }), 1);
  const info = select(m, 'exactlyonce_worker_info')[0];
  assert.equal(info?.labels['pid'], String(worker.pid));

  // The worker announced itself for the dashboard.
  const row = (await session.execute(`SELECT worker_id, host, metrics_port, topic, pid FROM ${config.keyspace}.workers`)).rows;
  assert.equal(row.length, 1);
  assert.deepEqual({ ...row[0] }, { worker_id: info?.labels['worker_id'], host: '127.0.0.1', metrics_port: port, topic: config.topic, pid: worker.pid });

  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
  assert.equal((await session.execute(`SELECT worker_id FROM ${config.keyspace}.workers`)).rowLength, 0, 'a clean stop removes its row');

  // Logs: one line per state change, none per batch or record (quarantine: one line per batch that had any).
  const lines = worker
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg: string; level: number; server?: string });
  const msgs = lines.map((l) => l.msg);
  const stateChanges = [
    /^worker started$/,
    /^serving \/metrics, \/healthz, \/readyz on 127\.0\.0\.1:\d+: loopback only/,
    /^job settings: /,
    /^stopping: /,
    /^worker stopped$/,
    /^assigned partitions /,
    /^(revoked|lost) partitions /,
    /^partition 0: checkpoint 50 is beyond the log end 0 /,
    /^quarantined \d+ records? of partition \d+$/,
    // A server going away and coming back (the shared stack may be restarted by another test).
    / is not answering|answers again$/,
  ];
  assert.deepEqual(msgs.filter((m) => !stateChanges.some((re) => re.test(m))), [], 'only state changes are logged');
  assert.equal(msgs.filter((s) => s === 'worker started').length, 1);
  assert.equal(msgs.filter((s) => s.startsWith('job settings: ')).length, 1, 'where the settings come from, once');
  assert.equal(msgs.filter((s) => s === 'worker stopped').length, 1);
  assert.equal(msgs.filter((s) => s.startsWith('partition 0: checkpoint 50 is beyond the log end')).length, 1);
  assert.equal(
    msgs.filter((s) => s.startsWith('quarantined ')).reduce((n, s) => n + Number(/^quarantined (\d+)/.exec(s)![1]), 0),
    7,
    'the quarantine lines account for the 7 records',
  );
  const ownLines = lines.filter((l) => l.server === undefined && !l.msg.startsWith('quarantined '));
  assert.ok(ownLines.length <= 10, `a handful of lines for 507 records (${ownLines.length}):\n${msgs.join('\n')}`);
});
