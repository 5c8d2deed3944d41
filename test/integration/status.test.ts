// `exactlyonce status` (issue 40 item 3): a sink with a partition stopped (its checkpoint below the log
// start) shows the stop's code and the command that gets it going; that very command does; status then
// shows nothing stopped, no lag, the quarantine by reason and the last verify.
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { BROKERS, CASSANDRA, cassandraSession, freshTopic, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import { stoppedPagesSink } from '../pages-sink.js';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];

interface Status {
  keyspace: string;
  jobs: Array<{ name: string; topic: string; lag: string; workers: string[]; stopped: Array<{ partition: number; code: string; fix: string }>; quarantine: Record<string, number>; lastVerify: { ok: boolean } | null }>;
}

test('status names a stopped partition, its code and the command that gets it going; after that command, nothing is stopped', async (t) => {
  const config = testConfig();
  const admin = await freshTopic(t, config, 2);
  const session = await cassandraSession(t, config);
  const job = 'pages_status';
  // Partition 1 resumes at 5, but the log now starts at 20: the worker must stop it, not skip.
  const file = await stoppedPagesSink(t, config, session, admin, job);

  const worker = startCli(t, ['sink', ...conn(config), '--config', file]);
  const owner = `${hostname()}-${worker.pid}`;
  const status = async () => {
    const r = await runCli(['status', ...conn(config), '--json']);
    assert.equal(r.code, 0, r.stderr);
    return JSON.parse(r.stdout) as Status;
  };
  const fix = `exactlyonce checkpoints reset --job ${job} --partition 1 --to earliest`;
  const stopped = await waitFor(async () => {
    const s = await status();
    return s.jobs[0]?.stopped.length === 1 && s.jobs[0].lag === '95' && s.jobs[0].workers.length === 1 ? s : undefined;
  }, { timeoutMs: 120_000, message: 'partition 1 stopped, partition 0 drained' });
  assert.deepEqual(
    stopped.jobs.map((j) => ({ ...j, stopped: j.stopped.map((s) => ({ partition: s.partition, code: s.code, fix: s.fix })) })).map(({ name, topic, lag, workers, stopped: st, quarantine, lastVerify }) => ({ name, topic, lag, workers, stopped: st, quarantine, lastVerify })),
    [{ name: job, topic: config.topic, lag: '95', workers: [owner], stopped: [{ partition: 1, code: 'EO_CHECKPOINT_OUT_OF_RANGE', fix }], quarantine: { bad_json: 1 }, lastVerify: null }],
  );
  const text = await runCli(['status', ...conn(config)]);
  assert.equal(text.code, 0, text.stderr);
  assert.match(text.stdout, new RegExp(`^keyspace ${config.keyspace}: 1 job\\n\\njob ${job}: topic ${config.topic}, 2 partitions, lag 95, 1 stopped, workers ${owner}\\n`));
  assert.match(text.stdout, new RegExp(`\\n  partition 1 stopped, EO_CHECKPOINT_OUT_OF_RANGE: .*\\n    to get it going: ${fix}\\n  quarantine: 1 bad_json\\n  last verify: none recorded`));

  // The command status gave, as given.
  const run = await runCli([...fix.split(' ').slice(1), ...conn(config)]);
  assert.equal(run.code, 0, run.stderr);
  await waitFor(async () => {
    const s = await status();
    return s.jobs[0]?.stopped.length === 0 && s.jobs[0].lag === '0' ? true : undefined;
  }, { timeoutMs: 120_000, message: 'partition 1 going again and drained' });
  const v = await runCli(['verify', ...conn(config), '--job', file, '--full']);
  assert.equal(v.code, 0, v.stdout + v.stderr);
  const after = await status();
  assert.deepEqual(
    after.jobs.map((j) => ({ lag: j.lag, stopped: j.stopped, quarantine: j.quarantine, ok: j.lastVerify?.ok })),
    [{ lag: '0', stopped: [], quarantine: { bad_json: 2 }, ok: true }],
  );
  worker.kill('SIGTERM');
});
