// When a stored checkpoint counts as lost: below the one the task saw acknowledged, compared as write
// timestamps (epoch·2^44 + offset), so a reset (a higher epoch, any offset) never looks like a loss.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { StoredCheckpoint } from '../../src/engine/checkpoint-store.js';
import { LostWrites, type RingState } from '../../src/engine/lost-writes.js';
import { isLost } from '../../src/engine/task-errors.js';
import { fakeEngine, rec, series, settle } from './engine-fakes.js';

test('nothing acknowledged yet: nothing can be lost', () => {
  assert.equal(isLost(null, 0, null), false);
  assert.equal(isLost({ next: 0n, epoch: 0 }, 0, null), false);
});

test('a stored checkpoint below the acknowledged one, or none at all, is lost', () => {
  assert.equal(isLost({ next: 741n, epoch: 0 }, 0, 848n), true);
  assert.equal(isLost(null, 0, 848n), true);
  assert.equal(isLost(undefined, 3, 1n), true);
});

test('at or above the acknowledged one (a later write landed, another owner went on) is not', () => {
  assert.equal(isLost({ next: 848n, epoch: 0 }, 0, 848n), false);
  assert.equal(isLost({ next: 900n, epoch: 0 }, 0, 848n), false);
});

test('a reset (a higher epoch) is never a loss, whatever its offset; a lost reset (a lower epoch) is', () => {
  assert.equal(isLost({ next: 0n, epoch: 1 }, 0, 848n), false);
  assert.equal(isLost({ next: 5000n, epoch: 1 }, 2, 10n), true);
});

/**
 * The TaskManager over fakes with LostWrites wired as the Runner wires it (window `windowMs`), partition
 * 0 checkpointed at `stored` (epoch 0) in a log [0, 9000]; `calls` records what the rewinds do; the
 * rewinds' reads of the stored checkpoint wait for `gate` (Cassandra not back yet).
 */
function wired(
  stored: bigint,
  windowMs = 60_000,
  gate: () => Promise<void> = async () => undefined,
  ring: RingState = { down: [], lastStart: 0 },
  replay?: StoredCheckpoint['replay'],
  stopping?: () => boolean,
  /** A failure the rewinds' checkpoint reset meets, if any. */
  resetFails?: () => Error | undefined,
) {
  const world = { stored: new Map([[0, { next: stored, epoch: 0, ...(replay === undefined ? {} : { replay }) }]]), marks: [{ partition: 0, low: 0n, high: 9000n, stable: 9000n }] };
  const lostWrites = new LostWrites(windowMs);
  const { tasks, planner, metrics, log, ctx, world: w } = fakeEngine(world, { resume: (s, a, l) => lostWrites.resume(s, a, l), stopping });
  ctx.lostWrites = lostWrites;
  ctx.checkpoints = { ...ctx.checkpoints, readOne: async (p: number) => w.stored.get(p) ?? null } as unknown as typeof ctx.checkpoints;
  const calls: string[] = [];
  lostWrites.wire({
    ring: async () => ring,
    checkpoints: {
      readOne: async (p) => (await gate(), w.stored.get(p) ?? null),
      reset: async (p, to, fromEpoch) => {
        const failure = resetFails?.();
        if (failure !== undefined) throw failure;
        calls.push(`reset ${p}:${to}@${fromEpoch + 1}`);
        return { next: to, epoch: fromEpoch + 1 };
      },
    },
    planner,
    tasks: () => tasks,
    consumer: { pause: (ps) => void calls.push(`pause ${ps.join(',')}`), restartAt: (p, o) => void calls.push(`restartAt ${p}:${o}`) },
    logStart: async () => 0n,
    onRewind: (p, from) => void calls.push(`onRewind ${p}:${from}`),
    retrying: (_server, fn) => fn(),
    stopping: stopping ?? (() => false),
    metrics,
    log,
  });
  return { tasks, metrics, lostWrites, calls, w };
}

test('a rewind moves the partition once: a task already rewound that finds the loss again (its batches still retrying) neither pauses nor resets the new owner', async () => {
  const { tasks, metrics, lostWrites, calls } = wired(500n);
  await tasks.assign([0]);
  const old = tasks.tasks.get(0)!;
  // The checkpoint went back from 700 (acknowledged) to 500: the partition is read again from 500.
  await lostWrites.rewind(old, { next: 500n, epoch: 0 }, 700n);
  assert.deepEqual(calls, ['pause 0', 'reset 0:500@1', 'onRewind 0:500', 'restartAt 0:500']);
  const owner = tasks.tasks.get(0)!;
  assert.notEqual(owner, old);
  assert.deepEqual([owner.status.next, owner.epoch], [500n, 1]);
  // The old task's write, retried across the outage, finds the loss again once Cassandra is back.
  await lostWrites.rewind(old, { next: 500n, epoch: 0 }, 700n);
  assert.deepEqual(calls, ['pause 0', 'reset 0:500@1', 'onRewind 0:500', 'restartAt 0:500'], 'nothing more: the new owner is not paused');
  assert.equal(tasks.tasks.get(0), owner);
  assert.deepEqual(await series(metrics, 'lost_writes_total'), ['exactlyonce_lost_writes_total{partition="0"} 1']);
});

test('a rewind that fails stops the partition, coded, unless the worker is stopping: then the failure is the shutdown\'s (a client closed under the call) and the next owner reads the stored checkpoint', async () => {
  let stopping = false;
  const { tasks, calls, w, lostWrites } = wired(500n, 60_000, undefined, undefined, undefined, () => stopping, () => new Error('Connection closed'));
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  stopping = true;
  await lostWrites.rewind(task, { next: 500n, epoch: 0 }, 700n);
  assert.deepEqual(w.events.filter((e) => e.startsWith('stop')), [], 'no stop while stopping');
  stopping = false;
  await lostWrites.rewind(task, { next: 500n, epoch: 0 }, 700n);
  assert.deepEqual(w.events.filter((e) => e.startsWith('stop')), ['stop 0:EO_PERMANENT_ERROR']);
  assert.deepEqual(calls, ['pause 0', 'pause 0']);
});

test('a new owner finds the checkpoint it was planned from gone after an outage (its predecessor wrote it; Cassandra lost it) and rewinds, before writing a row', async () => {
  const { tasks, metrics, lostWrites, calls, w } = wired(6000n);
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  assert.equal(task.acknowledged, 6000n, 'the planned checkpoint is what the task must find again');
  lostWrites.outage();
  w.stored.clear();
  await tasks.process(0, [rec(6000n), rec(6001n)]);
  await settle(5);
  assert.deepEqual(w.events.filter((e) => e.startsWith('rows')), [], 'no row is written on top of the lost checkpoint');
  assert.deepEqual(calls, ['pause 0', 'reset 0:0@1', 'onRewind 0:0', 'restartAt 0:0']);
  assert.deepEqual(await series(metrics, 'lost_writes_total'), ['exactlyonce_lost_writes_total{partition="0"} 1']);
});

test('a node going down reads each partition again from the first batch it acknowledged within the window before Cassandra last answered; batches before that are not read again', async () => {
  const { tasks, metrics, lostWrites, calls, w } = wired(100n, 200);
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  await tasks.process(0, [rec(100n), rec(101n)]);
  await task.flush();
  // Past the window: Cassandra answered 300 ms after that batch, so a crash now cannot take it back.
  await settle(300);
  lostWrites.answered();
  await tasks.process(0, [rec(102n), rec(103n)]);
  await tasks.process(0, [rec(104n)]);
  await task.flush();
  w.stored.set(0, { next: 105n, epoch: 0 });
  lostWrites.nodeDown();
  await settle(5);
  assert.deepEqual(calls, ['pause 0', 'reset 0:102@1', 'onRewind 0:102', 'restartAt 0:102']);
  assert.deepEqual(await series(metrics, 'crash_replays_total'), ['exactlyonce_crash_replays_total{partition="0"} 1']);
  assert.deepEqual(await series(metrics, 'lost_writes_total'), [], 'the checkpoint was intact: not a loss found');
  const owner = tasks.tasks.get(0)!;
  assert.deepEqual([owner.status.next, owner.epoch], [102n, 1]);
  // The new task has acknowledged nothing yet: a second node going down reads nothing again.
  lostWrites.nodeDown();
  await settle(5);
  assert.equal(calls.length, 4);
});

test('a node going down when the stored checkpoint itself went back below the window: read again from the stored checkpoint, counted as lost writes', async () => {
  const { tasks, metrics, lostWrites, calls, w } = wired(100n);
  await tasks.assign([0]);
  await tasks.process(0, [rec(100n), rec(101n)]);
  await tasks.tasks.get(0)!.flush();
  w.stored.delete(0);
  lostWrites.nodeDown();
  await settle(5);
  assert.deepEqual(calls, ['pause 0', 'reset 0:0@1', 'onRewind 0:0', 'restartAt 0:0']);
  assert.deepEqual(await series(metrics, 'lost_writes_total'), ['exactlyonce_lost_writes_total{partition="0"} 1']);
  assert.deepEqual(await series(metrics, 'crash_replays_total'), []);
});

test('a node going down does not move a partition someone went on with (a new owner while this worker was held still, a reset): a zombie never moves progress back', async () => {
  const { tasks, metrics, lostWrites, calls, w } = wired(100n);
  await tasks.assign([0]);
  await tasks.process(0, [rec(100n), rec(101n)]);
  await tasks.tasks.get(0)!.flush();
  // Meanwhile another worker owns the partition and went on to 400.
  w.stored.set(0, { next: 400n, epoch: 0 });
  lostWrites.nodeDown();
  await tasks.process(0, [rec(102n)]);
  await settle(5);
  assert.deepEqual(calls, []);
  assert.equal(tasks.tasks.get(0)!.status.state, 'running', 'this task goes on until its revocation reaches it');
  assert.deepEqual(w.events.filter((e) => e.startsWith('rows')), ['rows 0:100,101', 'rows 0:102'], 'its batch held for the decision then writes');
  assert.deepEqual(await series(metrics, 'crash_replays_total'), []);
});

test('while a replay waits for Cassandra, the next batch writes nothing; once decided (the checkpoint lost too), the partition moves once and the held batch is left to the new task', async () => {
  let release!: () => void;
  const back = new Promise<void>((r) => (release = r));
  const { tasks, metrics, lostWrites, calls, w } = wired(100n, 60_000, () => back);
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  await tasks.process(0, [rec(100n), rec(101n)]);
  await task.flush();
  // A node goes down: the replay waits for Cassandra to read the stored checkpoint.
  lostWrites.nodeDown();
  const held = tasks.process(0, [rec(102n), rec(103n)]);
  await settle(5);
  assert.deepEqual(calls, []);
  assert.deepEqual(w.events.filter((e) => e.startsWith('rows')), ['rows 0:100,101'], 'the next batch waits for the decision');
  // Cassandra lost the checkpoint as well: decided, the partition is read again from the log start.
  w.stored.delete(0);
  release();
  await held;
  await settle(5);
  assert.deepEqual(calls, ['pause 0', 'reset 0:0@1', 'onRewind 0:0', 'restartAt 0:0']);
  assert.deepEqual(await series(metrics, 'lost_writes_total'), ['exactlyonce_lost_writes_total{partition="0"} 1']);
  assert.deepEqual(w.events.filter((e) => e.startsWith('rows')), ['rows 0:100,101'], 'the held batch wrote nothing: the new task reads it again');
  assert.equal(task.status.next, 102n);
});

// A worker SIGKILLed takes with it what it acknowledged within the window: its checkpoint says it
// (replay: the first offset of those batches, and when the checkpoint was written), and a new owner
// reads again from there when a node may have crashed after that window began.

test('each checkpoint says from where its writer would read again after a node crash: the first batch it acknowledged within the window', async () => {
  const { tasks, w } = wired(100n, 60_000);
  await tasks.assign([0]);
  await tasks.process(0, [rec(100n), rec(101n)]);
  await tasks.process(0, [rec(102n)]);
  await tasks.tasks.get(0)!.flush();
  assert.deepEqual(w.replays, ['0:102 from 100', '0:103 from 100']);
});

test('a new owner whose predecessor died, with a node started after the window before its checkpoint began: resumes from the replay point, by a reset', async () => {
  const writtenAt = Date.now() - 600_000; // written 10 minutes ago; the node came back 1 minute ago
  const { tasks, metrics, calls } = wired(6000n, 15_000, undefined, { down: [], lastStart: Date.now() - 60_000 }, { from: 5000n, writtenAt });
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  assert.deepEqual([task.status.next, task.epoch, task.acknowledged], [5000n, 1, 5000n]);
  assert.deepEqual(calls, ['reset 0:5000@1'], 'planned from the moved checkpoint: no rewind of a running task');
  assert.deepEqual(await series(metrics, 'crash_replays_total'), ['exactlyonce_crash_replays_total{partition="0"} 1']);
});

test('a node down when a new owner plans: it resumes from the replay point', async () => {
  const { tasks, calls } = wired(6000n, 15_000, undefined, { down: ['10.0.0.3'], lastStart: 0 }, { from: 5000n, writtenAt: Date.now() });
  await tasks.assign([0]);
  assert.deepEqual(tasks.tasks.get(0)!.status.next, 5000n);
  assert.deepEqual(calls, ['reset 0:5000@1']);
});

test('an assignment that arrives while the worker stops (its group leave pending) is not planned: no checkpoint moved, nothing read', async () => {
  // The same crash evidence as above; a stopping worker would otherwise reset the checkpoint back to the
  // replay point and leave before reading it again, leaving the partition behind for the next owner.
  let stopping = false;
  const { tasks, calls, metrics } = wired(6000n, 15_000, undefined, { down: ['10.0.0.3'], lastStart: 0 }, { from: 5000n, writtenAt: Date.now() }, () => stopping);
  stopping = true;
  await tasks.assign([0]);
  assert.deepEqual([tasks.tasks.get(0)!.status.state, calls], ['revoked', []]);
  assert.deepEqual(await series(metrics, 'crash_replays_total'), []);
});

test('no node started since the window before the checkpoint began, none down: the new owner resumes at the checkpoint; a node going down afterwards reads its predecessor\'s rows again too', async () => {
  const writtenAt = Date.now() - 1000;
  const { tasks, lostWrites, calls, metrics } = wired(6000n, 15_000, undefined, { down: [], lastStart: writtenAt - 15_000 - 1 }, { from: 5000n, writtenAt });
  await tasks.assign([0]);
  assert.deepEqual([tasks.tasks.get(0)!.status.next, tasks.tasks.get(0)!.epoch], [6000n, 0]);
  assert.deepEqual(calls, []);
  lostWrites.answered();
  lostWrites.nodeDown();
  await settle(5);
  assert.deepEqual(calls, ['pause 0', 'reset 0:5000@1', 'onRewind 0:5000', 'restartAt 0:5000']);
  assert.deepEqual(await series(metrics, 'crash_replays_total'), ['exactlyonce_crash_replays_total{partition="0"} 1']);
});

test('a predecessor\'s rows acknowledged longer ago than the window are not read again when a node goes down now', async () => {
  const { tasks, lostWrites, calls } = wired(6000n, 200, undefined, { down: [], lastStart: 0 }, { from: 5000n, writtenAt: Date.now() - 300 });
  await tasks.assign([0]);
  lostWrites.answered();
  lostWrites.nodeDown();
  await settle(5);
  assert.deepEqual(calls, []);
});

test('a replay point below the log start (records deleted since) resumes at the log start; none, or a reset\'s checkpoint, moves nothing', async () => {
  const { tasks, calls } = wired(6000n, 15_000, undefined, { down: ['n'], lastStart: null }, { from: 5000n, writtenAt: Date.now() });
  await tasks.assign([0]);
  assert.deepEqual(calls, ['reset 0:5000@1']);
  const none = wired(6000n, 15_000, undefined, { down: ['n'], lastStart: null });
  await none.tasks.assign([0]);
  assert.deepEqual(none.calls, []);
  const deleted = wired(6000n, 15_000, undefined, { down: [], lastStart: null }, { from: 5000n, writtenAt: Date.now() });
  deleted.w.marks[0] = { partition: 0, low: 5500n, high: 9000n, stable: 9000n };
  await deleted.tasks.assign([0]);
  assert.deepEqual(deleted.calls, ['reset 0:5500@1']);
});
