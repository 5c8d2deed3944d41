// `exactlyonce checkpoints list` and `checkpoints reset` on the real stack: exact list output, a reset
// while a SIGSTOPped worker holds the partition (its late writes must lose), a stopped partition reset
// under a running worker, --dry-run, and the coded lines for bad flags.
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { formatTable } from '../../src/text-table.js';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { join } from 'node:path';
import { connectedProducer, freshKeyspace, freshTopic, recreateTopic, repoRoot, runCli, testConfig, waitFor } from '../helpers.js';
import { assertExactlyOnce, checkpoints, generate, sleep, startWorker, stopWorkers, waitDrained, waitOwns, type Worker } from '../pipeline.js';

function cliArgs(config: ConnectionConfig): string[] {
  return ['--brokers', config.brokers.join(','), '--cassandra', config.cassandra.join(','), '--keyspace', config.keyspace, '--topic', config.topic];
}

const list = (config: ConnectionConfig, extra: string[] = []) => runCli(['checkpoints', 'list', ...cliArgs(config), ...extra]);
const reset = (config: ConnectionConfig, extra: string[]) => runCli(['checkpoints', 'reset', ...cliArgs(config), ...extra]);

/** The owner name a worker records: its host name and pid (bin/exactlyonce execs node in place). */
const ownerOf = (w: Worker) => `${hostname()}-${w.pid}`;

interface Observed {
  next: bigint;
  epoch: number;
  writetime: bigint;
  at: number;
}

async function readRow(session: Client, config: ConnectionConfig, partition: number): Promise<Observed | null> {
  const r = await session.execute(
    `SELECT next_offset, epoch, writetime(next_offset) AS wt FROM ${config.keyspace}.checkpoints WHERE topic = ? AND partition = ?`,
    [config.topic, partition],
    { prepare: true },
  );
  const row = r.first();
  if (row === null) return null;
  return { next: BigInt(row['next_offset'].toString()), epoch: (row['epoch'] as number | null) ?? 0, writetime: BigInt(row['wt'].toString()), at: Date.now() };
}

/** Records every distinct value of one partition's checkpoint row (polled every 25 ms) until stopped. */
function watchRow(t: { after: (fn: () => Promise<unknown>) => void }, session: Client, config: ConnectionConfig, partition: number) {
  const seen: Observed[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const o = await readRow(session, config, partition);
        const last = seen.at(-1);
        if (o !== null && (last === undefined || last.next !== o.next || last.epoch !== o.epoch || last.writetime !== o.writetime)) seen.push(o);
      } catch {
        // a slow poll is retried
      }
      await sleep(25);
    }
  })();
  const stop = async () => {
    running = false;
    await loop;
    return seen;
  };
  t.after(stop);
  return { stop };
}

test('checkpoints list shows each partition of a drained topic exactly, as a table and as JSON', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 3);
  await generate(config, ['--count', '3000', '--rate', '100000', '--clients', '24', '--seed', '15', '--bad-ratio', '0.01']);
  const worker = startWorker(t, config);
  await waitDrained(session, config);
  const marks = await admin.watermarks(config.topic);
  assert.equal(marks.reduce((n, w) => n + w.high, 0n), 3000n);
  const owner = ownerOf(worker);
  // The owner is recorded at assignment and refreshed every 2 s.
  await waitFor(async () => (await list(config)).stdout.split(owner).length === 4, { timeoutMs: 30_000, message: `list names ${owner} as the owner of every partition` });

  const r = await list(config);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stderr, '');
  const expected =
    formatTable(
      ['partition', 'checkpoint', 'log start', 'log end', 'lag', 'held', 'epoch', 'owner', 'stopped'],
      marks.map((w) => [w.partition, w.high, 0, w.high, 0, 0, 0, owner, '-']),
    ) + '\n(3 partitions)\n';
  assert.equal(r.stdout, expected);
  assert.match(r.stdout, /^ partition \| checkpoint \| log start \| log end \| lag \| held \| epoch \| owner +\| stopped\n/);
  t.diagnostic(`checkpoints list:\n${r.stdout}`);

  const json = await list(config, ['--json']);
  assert.equal(json.code, 0, json.stderr);
  assert.deepEqual(
    json.stdout.trim().split('\n').map((l) => JSON.parse(l) as unknown),
    marks.map((w) => ({ partition: w.partition, checkpoint: String(w.high), epoch: 0, logStart: '0', logEnd: String(w.high), lag: '0', held: '0', owner, stopped: null })),
  );
  await stopWorkers([worker]);
});

// The brief's scenario: a reset while a frozen worker holds the partition with a batch in flight.
// Woken, it finishes that batch and may store more before it notices the reset: every checkpoint it
// writes then is of the old epoch and must lose to the reset, in whatever order they land. The
// partition's rows are deleted with the reset (as if to rebuild them), so the final exactly-once check
// also proves that the owner resumed exactly at the reset point: nothing from there on was skipped.
test('a reset while a SIGSTOPped worker holds the partition wins over every late write of the woken worker', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  await generate(config, ['--count', '40000', '--rate', '1000000', '--clients', '24', '--seed', '1515', '--bad-ratio', '0.01']);
  const marks = await admin.watermarks(config.topic);
  const t0 = Date.now();
  const timeline: string[] = [];
  const mark = (what: string) => timeline.push(`${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  // A session timeout far above the freeze: the frozen worker keeps the partition (no rebalance), so
  // it is the reset, not the group, that must take the partition's progress away from its old task.
  const worker = startWorker(t, config, ['--session-timeout-ms', '45000', '--max-batch', '200']);
  const owned = await waitOwns(worker);
  const p = [...owned.keys()].sort()[0]!;
  assert.equal(owned.size, 2, 'the one worker owns both partitions');
  const end = marks.find((w) => w.partition === p)!.high;
  mark('the worker owns both partitions');
  // Freeze it mid-drain: it stores a batch of 200 every few milliseconds, so one is in flight.
  await waitFor(async () => ((await checkpoints(session, config)).get(p) ?? 0n) >= 3000n, { timeoutMs: 120_000, intervalMs: 20, message: `partition ${p} passes 3000` });
  worker.kill('SIGSTOP');
  mark('SIGSTOP');
  const atStop = (await readRow(session, config, p))!;
  assert.ok(atStop.next < end, `partition ${p} was still draining when frozen (checkpoint ${atStop.next}, log end ${end})`);
  assert.equal(atStop.epoch, 0);
  const watch = watchRow(t, session, config, p);

  // Rebuild the partition from its start: delete its rows, then reset its checkpoint to the log start.
  await session.execute(`DELETE FROM ${config.keyspace}.events WHERE partition = ?`, [p], { prepare: true });
  await session.execute(`DELETE FROM ${config.keyspace}.quarantine WHERE partition = ?`, [p], { prepare: true });
  const r = await reset(config, ['--partition', String(p), '--to', 'earliest']);
  assert.equal(r.code, 0, r.stderr);
  mark('reset');
  assert.match(
    r.stdout,
    new RegExp(
      '^ partition \\| checkpoint \\| epoch \\| new checkpoint \\| new epoch \\| log start \\| log end\n-+(\\+-+){6}\n' +
        ` ${p} +\\| \\d+ +\\| 0 +\\| 0 +\\| 1 +\\| 0 +\\| ${end} *\n` +
        `reset 1 partition of ${config.topic}; running workers resume there within a few seconds\n$`,
    ),
  );
  const afterReset = (await readRow(session, config, p))!;
  assert.deepEqual([afterReset.next, afterReset.epoch], [0n, 1], 'the reset wrote epoch 1 at offset 0');

  worker.kill('SIGCONT');
  mark('SIGCONT');
  const resumed = `"msg":"partition ${p} was reset to 0 (epoch 1`;
  await waitFor(() => worker.output().includes(resumed), { timeoutMs: 60_000, message: 'the woken worker notices the reset and resumes there' });
  mark('the worker resumed at the reset point');
  await waitDrained(session, config);
  mark('drained');
  await stopWorkers([worker]);
  const seen = await watch.stop();

  // The checkpoint's history after the reset: the reset's value, then only the new epoch moving forward
  // from it. An old-epoch value here is the woken worker's late write winning.
  const history = seen.slice(seen.findIndex((o) => o.epoch >= 1));
  const describe = history.map((o) => `${o.next}@e${o.epoch}`).join(' ');
  assert.deepEqual(history.filter((o) => o.epoch !== 1).map((o) => `${o.next}@e${o.epoch}`), [], `only epoch 1 after the reset: ${describe}`);
  assert.equal(history[0]!.next, 0n, `the reset's own value comes first: ${describe}`);
  for (let i = 1; i < history.length; i++) assert.ok(history[i]!.next >= history[i - 1]!.next, `never backwards: ${describe}`);
  assert.equal(history.at(-1)!.next, end);
  for (const o of history) assert.equal(o.writetime, 2n ** 44n + o.next, 'the reset and every later write are timestamped 2^44 + offset');
  assert.ok(history.length > 10, `the new owner moved the checkpoint batch by batch (${history.length} values)`);

  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 40000);
  const l = await list(config);
  assert.equal(l.code, 0, l.stderr);
  const row = l.stdout.split('\n').find((line) => line.startsWith(` ${p} `))!;
  assert.match(row, new RegExp(`^ ${p} +\\| ${end} +\\| 0 +\\| ${end} +\\| 0 +\\| 0 +\\| 1 +\\| `));
  t.diagnostic(`${timeline.join(', ')}; checkpoint of partition ${p} after the reset: ${history.length} values, ${history[0]!.next}..${history.at(-1)!.next}; ${JSON.stringify(ledger)}`);
});

test('a stopped partition: list says why and which command to run; --dry-run changes nothing; bad flags get one coded line; the reset resumes it under the running worker', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  await generate(config, ['--count', '2000', '--rate', '100000', '--clients', '24', '--seed', '7']);
  const marks = await admin.watermarks(config.topic);
  const end1 = marks.find((w) => w.partition === 1)!.high;
  assert.ok(end1 > 0n && marks[0]!.high > 0n, 'both partitions have records');
  // A checkpoint beyond the log end (as after the topic's log was truncated): the worker stops partition 1.
  await new CheckpointStore(session, config.keyspace, config.topic).write(1, end1 + 50n);
  const worker = startWorker(t, config);
  await waitFor(async () => (await checkpoints(session, config)).get(0) === marks[0]!.high, { timeoutMs: 120_000, message: 'partition 0 drains' });
  const stoppedLine = await waitFor(
    async () => (await list(config)).stdout.split('\n').find((l) => l.startsWith('partition 1 stopped at ')),
    { timeoutMs: 30_000, message: 'list shows why partition 1 is stopped' },
  );
  assert.match(
    stoppedLine,
    new RegExp(
      `^partition 1 stopped at \\S+ by ${ownerOf(worker)}: EO_CHECKPOINT_OUT_OF_RANGE: partition 1: checkpoint ${end1 + 50n} is beyond the log end ${end1} .*` +
        '`exactlyonce checkpoints reset --partition 1 --to earliest`',
    ),
  );
  assert.doesNotMatch(worker.output(), /schema apply --reset/);
  const before = await list(config);
  assert.match(before.stdout, new RegExp(`\\n 1 +\\| ${end1 + 50n} +\\| 0 +\\| ${end1} +\\| -50 +\\| 0 +\\| 0 +\\| \\S+ +\\| EO_CHECKPOINT_OUT_OF_RANGE\\n`));

  // --dry-run: the plan, and nothing written.
  const fields = (o: Observed | null) => o && [o.next, o.epoch, o.writetime];
  const rowBefore = fields(await readRow(session, config, 1));
  const dry = await reset(config, ['--partition', '1', '--to', 'earliest', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.equal(
    dry.stdout,
    formatTable(['partition', 'checkpoint', 'epoch', 'new checkpoint', 'new epoch', 'log start', 'log end'], [[1, end1 + 50n, 0, 0, 1, 0, end1]]) + '\ndry run: nothing changed\n',
  );
  await sleep(3000); // two reset checks of the worker
  assert.deepEqual(fields(await readRow(session, config, 1)), rowBefore);
  assert.deepEqual(rowBefore, [end1 + 50n, 0, end1 + 50n]);
  assert.equal((await list(config)).stdout, before.stdout, 'list is unchanged after --dry-run');

  // Bad flags: one coded line naming the flag, nothing on stdout, nothing changed.
  const bad: Array<[string[], RegExp]> = [
    [['--partition', '1', '--to', 'yesterday'], /^error EO_CONFIG_INVALID: --to: expected earliest, latest or an offset .*\(got 'yesterday'\)\n$/],
    [['--partition', '1', '--to', String(end1 + 1n)], new RegExp(`^error EO_CONFIG_INVALID: --to: offset ${end1 + 1n} is outside partition 1's log \\[0, ${end1}\\].*\\n$`)],
    [['--partition', '1', '--to', '-5'], /^error EO_CONFIG_INVALID: --to: .*\n$/],
    [['--partition', 'one', '--to', 'earliest'], /^error EO_CONFIG_INVALID: --partition: expected a whole number .*\(got 'one'\)\n$/],
    [['--partition', '7', '--to', 'earliest'], new RegExp(`^error EO_CONFIG_INVALID: --partition: topic ${config.topic} has partitions 0\\.\\.1 \\(got 7\\)\\n$`)],
    [['--to', 'earliest'], /^error EO_USAGE: checkpoints reset: give --partition P or --all\n$/],
    [['--all', '--to', '5'], /^error EO_USAGE: --to: an offset is for one --partition \(a time is resolved for each partition\); with --all use earliest or latest\n$/],
    [['--partition', '1'], /^error EO_USAGE: --to: required.*\n$/],
    [['--partition', '1', '--to', 'earliest', '--rebind'], /^error EO_USAGE: --rebind: .*--all\n$/],
  ];
  for (const [args, stderr] of bad) {
    const b = await reset(config, args);
    assert.equal(b.code, 2, `${args.join(' ')}: ${b.stderr}`);
    assert.match(b.stderr, stderr, args.join(' '));
    assert.equal(b.stdout, '', args.join(' '));
  }
  const help = await runCli(['checkpoints', 'reset', '--help']);
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--to <where>[\s\S]*--dry-run/);

  // The real reset: the running worker picks it up, resumes the paused partition and drains it.
  const r = await reset(config, ['--partition', '1', '--to', 'earliest']);
  assert.equal(r.code, 0, r.stderr);
  await waitDrained(session, config, 120_000);
  await waitFor(async () => !(await list(config)).stdout.includes('EO_CHECKPOINT_OUT_OF_RANGE'), { timeoutMs: 30_000, message: 'the stop record is gone' });
  const after = await list(config);
  assert.match(after.stdout, new RegExp(`\\n 1 +\\| ${end1} +\\| 0 +\\| ${end1} +\\| 0 +\\| 0 +\\| 1 +\\| ${ownerOf(worker)} +\\| - +\\n`));
  assert.match(worker.output(), /"msg":"partition 1 was reset to 0 \(epoch 1/);
  await stopWorkers([worker]);
  await assertExactlyOnce(session, config);
});

test('a topic deleted and re-created under a running worker: reset --all --to earliest --rebind starts the job over on the new topic, the worker follows', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 1);
  await generate(config, ['--count', '300', '--rate', '100000', '--clients', '6', '--seed', '21']);
  const worker = startWorker(t, config);
  await waitDrained(session, config);
  const { oldId, newId } = await recreateTopic(admin, config, 1);
  await generate(config, ['--count', '2000', '--rate', '100000', '--clients', '6', '--seed', '22']);
  await waitFor(async () => (await list(config)).stdout.includes('EO_TOPIC_RECREATED'), { timeoutMs: 120_000, message: 'list shows partition 0 stopped with EO_TOPIC_RECREATED' });
  const l = await list(config);
  assert.match(l.stdout, /\n 0 +\| 300 +\| 0 +\| 2000 +\| 1700 +\| 0 +\| 0 +\| \S+ +\| EO_TOPIC_RECREATED\n/);
  assert.ok(l.stderr.startsWith('warning ') && l.stderr.includes(oldId) && l.stderr.includes(newId), l.stderr);
  assert.match(l.stderr, /checkpoints reset --all --to earliest --rebind/);

  // One partition without --rebind would leave the job bound to the old topic: refused.
  const partial = await reset(config, ['--partition', '0', '--to', 'earliest']);
  assert.equal(partial.code, 6);
  assert.match(partial.stderr, /^error EO_TOPIC_RECREATED: .*a reset without --rebind is refused\)\n$/);
  const dry = await reset(config, ['--all', '--to', 'earliest', '--rebind', '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  const ks = config.keyspace;
  assert.ok(
    dry.stdout.endsWith(
      `dry run: nothing changed (would also clear the old topic's outputs: ${ks}.events, ${ks}.quarantine, ${ks}.alert_window_counts, ${ks}.alerts, ` +
        `topic ${config.alertsTopic} (a tombstone for each alert of the table); and bind the job to topic ID ${newId})\n`,
    ),
    dry.stdout,
  );

  const r = await reset(config, ['--all', '--to', 'earliest', '--rebind']);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /reset 1 partition of \S+; the job is bound to topic ID \S+ now; running workers resume there within a few seconds\n$/);
  await waitFor(async () => (await checkpoints(session, config)).get(0) === 2000n, { timeoutMs: 120_000, message: 'the running worker drains the new topic' });
  assert.match(worker.output(), /"msg":"the job was bound to topic ID /);
  const after = await list(config);
  assert.equal(after.stderr, '');
  assert.match(after.stdout, new RegExp(`\\n 0 +\\| 2000 +\\| 0 +\\| 2000 +\\| 0 +\\| 0 +\\| 1 +\\| ${ownerOf(worker)} +\\| - +\\n`));
  await stopWorkers([worker]);
  // The old topic's rows were cleared by the rebind: the new topic's 2,000 records are all that remains.
  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 2000);
});

test("a reset picked up while a job's onAssign still runs is not lost: the worker reads from the reset offset, each record once", async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 1);
  const producer = await connectedProducer(t, config);
  await producer.send(config.topic, Array.from({ length: 200 }, (_, i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 })));
  const job = ['--job', join(repoRoot, 'test', 'fixtures', 'slow-assign-job.ts')];
  const store = new CheckpointStore(session, config.keyspace, config.topic, 'slow-assign');
  const stored = async () => (await store.readOne(0))?.next;
  const first = startWorker(t, config, job);
  await waitFor(async () => ((await stored()) === 200n ? true : undefined), { timeoutMs: 180_000, message: `the first worker stores 0..199 (${first.output().slice(-400)})` });
  await stopWorkers([first]);

  // The next worker plans partition 0 at 200 and its job's onAssign then takes 15 s: a reset to 0
  // meanwhile is picked up (every 2 s) while the consumer has not taken the partition yet.
  const second = startWorker(t, config, [...job, '--job-option', 'assignDelayMs=15000']);
  await waitFor(() => (/slow-assign: onAssign waits/.test(second.output()) ? true : undefined), { timeoutMs: 120_000, message: 'the second worker is assigned' });
  const before = await store.readOne(0);
  await store.reset(0, 0n, before!.epoch);
  await waitFor(() => (/partition 0 was reset to 0 .*resuming there/.test(second.output()) ? true : undefined), { timeoutMs: 12_000, message: `the reset picked up during onAssign (${second.output().slice(-600)})` });
  await producer.send(config.topic, [{ key: 'k200', value: 'v200', partition: 0 }]);
  await waitFor(async () => ((await stored()) === 201n ? true : undefined), { timeoutMs: 120_000, message: `the second worker stores 0..200 (${second.output().slice(-600)})` });
  const written = second
    .output()
    .split('\n')
    .filter((l) => l.includes('"slow-assign: wrote"'))
    .flatMap((l) => (JSON.parse(l) as { offsets: string[] }).offsets.map(Number));
  assert.deepEqual(written, Array.from({ length: 201 }, (_, i) => i), 'read again from the reset offset, each record once');
  assert.doesNotMatch(second.output(), /EO_OFFSET_GAP/);
  await stopWorkers([second]);
});
