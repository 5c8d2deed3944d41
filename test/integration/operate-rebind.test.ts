// `checkpoints reset --job <sink> --all --to earliest --rebind` (issue 40 item 1): a sink's topic deleted
// and re-created under a running worker; the rebind clears the sink's quarantine rows and truncates its
// table, binds the job to the new topic, and the worker starts over on it: rows, quarantine and verify
// --job exact for the new topic.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { BROKERS, CASSANDRA, cassandraSession, freshTopic, produceRecords, recreateTopic, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import { applyPagesSink } from '../pages-sink.js';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];

function produce(config: ConnectionConfig, count: number, badAt: number): Promise<void> {
  return produceRecords(config, Array.from({ length: count }, (_, i) => ({ value: i === badAt ? '{' : JSON.stringify({ id: 1000 + i, name: `n${i}` }) })));
}

test("a sink's topic re-created under a running worker: reset --job --all --to earliest --rebind clears the sink's rows and quarantine, and the worker starts over on the new topic", async (t) => {
  const config = testConfig();
  const admin = await freshTopic(t, config, 1);
  const session = await cassandraSession(t, config);
  const job = 'pages_rebind';
  const file = await applyPagesSink(t, config, job);
  await produce(config, 300, 7);
  const worker = startCli(t, ['sink', ...conn(config), '--config', file]);
  const checkpoint = async () =>
    (await session.execute(`SELECT next_offset, epoch FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ? AND partition = 0`, [job, config.topic], { prepare: true })).first();
  await waitFor(async () => String((await checkpoint())?.['next_offset']) === '300', { timeoutMs: 120_000, message: 'the worker drains the first topic' });

  const { oldId, newId } = await recreateTopic(admin, config, 1);
  await produce(config, 40, 21);
  const list = (extra: string[] = []) => runCli(['checkpoints', 'list', ...conn(config), '--job', job, ...extra]);
  await waitFor(async () => (await list()).stdout.includes('EO_TOPIC_RECREATED'), { timeoutMs: 120_000, message: 'partition 0 stopped with EO_TOPIC_RECREATED' });

  // By name, a rebind cannot know the sink's table: refused, naming what to give.
  const byName = await runCli(['checkpoints', 'reset', ...conn(config), '--job', job, '--all', '--to', 'earliest', '--rebind']);
  assert.equal(byName.code, 2);
  assert.equal(byName.stderr, `error EO_USAGE: --rebind: give job ${job}'s module or sink config as --job (not its name): the rebind clears the tables it declares\n`);
  const ks = config.keyspace;
  const dry = await runCli(['checkpoints', 'reset', ...conn(config), '--job', file, '--all', '--to', 'earliest', '--rebind', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.ok(dry.stdout.endsWith(`dry run: nothing changed (would also clear the old topic's outputs: ${ks}.job_quarantine (job ${job}'s rows), ${ks}.pages; and bind the job to topic ID ${newId})\n`), dry.stdout);
  const r = await runCli(['checkpoints', 'reset', ...conn(config), '--job', file, '--all', '--to', 'earliest', '--rebind']);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(
    r.stdout.split('\n').slice(-3).join('\n'),
    `cleared the old topic's outputs: ${ks}.job_quarantine (job ${job}'s rows), ${ks}.pages\nreset 1 partition of ${config.topic}; the job is bound to topic ID ${newId} now; running workers resume there within a few seconds\n`,
  );
  await waitFor(async () => String((await checkpoint())?.['next_offset']) === '40', { timeoutMs: 120_000, message: 'the running worker drains the new topic' });
  const offsets = async (table: string) =>
    (await session.execute(`SELECT offset FROM ${ks}.${table} WHERE ${table === 'pages' ? '' : 'job = ? AND '}partition = 0`, table === 'pages' ? [] : [job], { prepare: true })).rows.map((row) => Number(String(row['offset']))).sort((a, b) => a - b);
  assert.deepEqual(await offsets('pages'), Array.from({ length: 40 }, (_, i) => i).filter((i) => i !== 21));
  assert.deepEqual(await offsets('job_quarantine'), [21]);
  const v = await runCli(['verify', ...conn(config), '--job', file, '--full', '--json']);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const totals = (JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number } }).totals;
  assert.deepEqual([totals.records, totals.stored, totals.quarantined], [40, 39, 1]);
  worker.kill('SIGTERM');
});
