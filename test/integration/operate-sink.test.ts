// The operator commands for a job other than the events job (issue 40 item 1): a JSON sink's
// checkpoints reset to a time (resolved per partition with Kafka's offsets-for-times) while a worker
// runs and a SIGSTOPped zombie holds batches in flight; `checkpoints list --job`, `quarantine list
// --job`, `status` and `verify --job` then agree, exactly.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { Producer } from '../../src/kafka/producer.js';
import { BROKERS, CASSANDRA, cassandraSession, freshTopic, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import { ownedPartitions, stopWorkers, waitOwns } from '../pipeline.js';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];
const PER_PARTITION = 3000;
/**
 * Record i of a partition is stamped T0 + i s, so the first record at or after T0 + k s is offset k. A
 * day ago, in whole seconds: within the topic's retention (7 days by default), since older records are
 * deleted at the broker's next retention check (every 5 minutes), and all PER_PARTITION of them in the past.
 */
const T0 = Math.floor(Date.now() / 1000) * 1000 - 24 * 3_600_000;
const bad = (i: number) => i % 97 === 13;

function sinkFile(config: ConnectionConfig, name: string): string {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-operate-')), 'sink.json');
  writeFileSync(file, JSON.stringify({ name, topic: config.topic, format: 'json', table: 'ops', mode: 'log', columns: { id: 'bigint', name: { type: 'text', required: true } } }));
  return file;
}

async function produce(config: ConnectionConfig, partitions: number): Promise<void> {
  const p = new Producer(config);
  try {
    await p.connect();
    for (let part = 0; part < partitions; part++) {
      const records = Array.from({ length: PER_PARTITION }, (_, i) => ({ key: `k${i}`, value: bad(i) ? '{"id": oops' : JSON.stringify({ id: i, name: `n${part}-${i}` }), partition: part, timestampMs: T0 + i * 1000 }));
      for (let i = 0; i < records.length; i += 500) await p.send(config.topic, records.slice(i, i + 500));
    }
  } finally {
    await p.close();
  }
}

const startSink = (t: TestContext, config: ConnectionConfig, file: string, extra: string[]) => startCli(t, ['sink', ...conn(config), '--config', file, ...extra]);

async function checkpointRows(session: Awaited<ReturnType<typeof cassandraSession>>, config: ConnectionConfig, job: string) {
  const r = await session.execute(`SELECT partition, next_offset, epoch FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ?`, [job, config.topic], { prepare: true });
  return new Map(r.rows.map((row) => [row['partition'] as number, { next: BigInt(String(row['next_offset'])), epoch: row['epoch'] as number }]));
}

async function offsetsOf(session: Awaited<ReturnType<typeof cassandraSession>>, query: string, params: unknown[]): Promise<number[]> {
  const r = await session.execute(query, params, { prepare: true, fetchSize: 100_000 });
  return r.rows.map((row) => Number(String(row['offset']))).sort((a, b) => a - b);
}

test("a sink's checkpoints reset to a time under a running worker and a SIGSTOPped zombie: the worker resumes at each partition's first record of that time, the zombie's late writes lose, verify --job holds", async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 2);
  const session = await cassandraSession(t, config);
  const job = `ops_${config.keyspace.slice(-8)}`;
  const file = sinkFile(config, job);
  const apply = await runCli(['schema', 'apply', ...conn(config), '--job', file]);
  assert.equal(apply.code, 0, apply.stderr);
  await produce(config, 2);

  // The zombie-to-be: small batches, so that it is frozen with work in flight.
  const zombie = startSink(t, config, file, ['--max-batch', '20', '--session-timeout-ms', '6000']);
  await waitOwns(zombie);
  await waitFor(async () => [...(await checkpointRows(session, config, job)).values()].some((c) => c.next > 200n), { timeoutMs: 120_000, message: 'the zombie-to-be stores some batches' });
  zombie.kill('SIGSTOP');
  t.after(() => void zombie.kill('SIGCONT'));
  const frozenAt = await checkpointRows(session, config, job);

  // The running worker takes the partitions over (past the 6 s session timeout) and drains the topic.
  const worker = startSink(t, config, file, ['--max-batch', '200', '--session-timeout-ms', '6000']);
  await waitFor(() => ownedPartitions(worker).size === 2, { timeoutMs: 120_000, message: 'the running worker owns both partitions' });
  await waitFor(async () => [...(await checkpointRows(session, config, job)).values()].every((c) => c.next === BigInt(PER_PARTITION)) && (await checkpointRows(session, config, job)).size === 2, {
    timeoutMs: 180_000,
    message: 'the running worker drains both partitions',
  });

  // Rows from each reset point are deleted first (as if to rebuild them): the final check then proves
  // that the worker resumed exactly at the offset the time resolves to, nothing skipped.
  const at = 1234; // seconds after T0: each partition's first record at or after that time is offset 1234
  const when = new Date(T0 + at * 1000).toISOString();
  for (const p of [0, 1]) {
    await session.execute(`DELETE FROM ${config.keyspace}.ops WHERE partition = ? AND offset >= ?`, [p, at], { prepare: true });
    await session.execute(`DELETE FROM ${config.keyspace}.job_quarantine WHERE job = ? AND partition = ? AND offset >= ?`, [job, p, at], { prepare: true });
  }
  const dry = await runCli(['checkpoints', 'reset', ...conn(config), '--job', file, '--all', '--to', when, '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stdout, new RegExp(`^job ${job}, topic ${config.topic}, to the first record at or after ${when.replace(/\./g, '\\.')}\n`));
  assert.match(dry.stdout, new RegExp(`\\n 0 +\\| ${PER_PARTITION} +\\| 0 +\\| 1234 +\\| 1 +\\| 0 +\\| ${PER_PARTITION} *\\n 1 +\\| ${PER_PARTITION} +\\| 0 +\\| 1234 +\\| 1 +\\| 0 +\\| ${PER_PARTITION} *\\ndry run: nothing changed\\n$`));
  const reset = await runCli(['checkpoints', 'reset', ...conn(config), '--job', file, '--all', '--to', when]);
  assert.equal(reset.code, 0, reset.stderr);
  assert.match(reset.stdout, new RegExp(`reset 2 partitions of ${config.topic}; running workers resume there within a few seconds\\n$`));
  await waitFor(() => /"msg":"partition 0 was reset to 1234 \(epoch 1/.test(worker.output()) && /"msg":"partition 1 was reset to 1234 \(epoch 1/.test(worker.output()), { timeoutMs: 60_000, message: 'the running worker picks up both resets' });

  // The zombie wakes with batches in flight of epoch 0: its rows are the same rows, its checkpoints lose.
  zombie.kill('SIGCONT');
  await waitFor(() => /"msg":"(lost|revoked) partitions/.test(zombie.output()), { timeoutMs: 120_000, message: 'the woken zombie finds its partitions gone' });
  await waitFor(
    async () => {
      const c = await checkpointRows(session, config, job);
      return [0, 1].every((p) => c.get(p)?.next === BigInt(PER_PARTITION) && c.get(p)?.epoch === 1);
    },
    { timeoutMs: 180_000, message: 'both partitions drained again in epoch 1' },
  );
  await stopWorkers([zombie, worker] as never);
  assert.ok([...frozenAt.values()].some((c) => c.next > 0n && c.next < BigInt(PER_PARTITION)), `the zombie was frozen mid-way: ${JSON.stringify([...frozenAt].map(([p, c]) => [p, String(c.next)]))}`);
  const final = await checkpointRows(session, config, job);
  assert.deepEqual([...final].sort(([a], [b]) => a - b).map(([p, c]) => [p, c.next, c.epoch]), [[0, 3000n, 1], [1, 3000n, 1]]);

  const all = Array.from({ length: PER_PARTITION }, (_, i) => i);
  for (const p of [0, 1]) {
    assert.deepEqual(await offsetsOf(session, `SELECT offset FROM ${config.keyspace}.ops WHERE partition = ?`, [p]), all.filter((i) => !bad(i)), `partition ${p}'s rows`);
    assert.deepEqual(await offsetsOf(session, `SELECT offset FROM ${config.keyspace}.job_quarantine WHERE job = ? AND partition = ?`, [job, p]), all.filter(bad), `partition ${p}'s quarantine`);
  }
  const v = await runCli(['verify', ...conn(config), '--job', file, '--full', '--json']);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const totals = (JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number } }).totals;
  const quarantined = all.filter(bad).length * 2;
  assert.deepEqual({ records: totals.records, stored: totals.stored, quarantined: totals.quarantined }, { records: 6000, stored: 6000 - quarantined, quarantined });

  // The same job seen through the other commands, by its name.
  const list = await runCli(['checkpoints', 'list', ...conn(config), '--job', job, '--json']);
  assert.equal(list.code, 0, list.stderr);
  assert.deepEqual(
    list.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown),
    [0, 1].map((p) => ({ job, topic: config.topic, partition: p, checkpoint: '3000', epoch: 1, logStart: '0', logEnd: '3000', lag: '0', held: '0', owner: null, stopped: null })),
  );
  const q = await runCli(['quarantine', 'list', ...conn(config), '--job', file, '--json', '--limit', '1000']);
  assert.equal(q.code, 0, q.stderr);
  assert.equal(q.stdout.trim().split('\n').length, quarantined);
  const status = await runCli(['status', ...conn(config), '--json']);
  assert.equal(status.code, 0, status.stderr);
  const jobs = (JSON.parse(status.stdout) as { jobs: Array<{ name: string; lag: string; stopped: unknown[]; workers: string[]; quarantine: Record<string, number>; lastVerify: { ok: boolean } | null }> }).jobs;
  assert.deepEqual(
    jobs.map((j) => ({ name: j.name, lag: j.lag, stopped: j.stopped, workers: j.workers, quarantine: j.quarantine, ok: j.lastVerify?.ok })),
    [{ name: job, lag: '0', stopped: [], workers: [], quarantine: { bad_json: quarantined }, ok: true }],
  );
});
