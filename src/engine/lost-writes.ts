/**
 * Finds acknowledged writes the store lost, and writes them again (docs/design.md §6).
 *
 * Cassandra acknowledges a write before its commit log is synced unless the node runs
 * `commitlog_sync: batch`: with the default (`periodic`, every 10 s), a node that crashes forgets what it
 * acknowledged since the last sync — on one node (RF 1), or when every replica crashes together. Rows
 * and checkpoints go back together (the commit log replays a prefix of what was written, and a
 * checkpoint is written after its rows), so the stored checkpoint still never passes a lost row; but a
 * worker that keeps its partition goes on from its in-memory position, and its next checkpoint would
 * cover the hole for good.
 *
 * So each PartitionTask remembers the highest checkpoint it knows was stored — the one it was planned
 * from (an assignment, a reset, a rewind: read back from Cassandra) and then each one it wrote and saw
 * acknowledged — and compares it with the stored one (both as write timestamps, epoch·2^44 + offset,
 * so a reset is never taken for a loss):
 * - after any Cassandra failure this worker saw (an outage: this class counts them, from before the
 *   planned checkpoint was read), a task reads its stored checkpoint back before the job writes its
 *   next batch and before it writes its next checkpoint — inside each write's retry, so even a write in
 *   flight across the outage checks first. Before the job's write too, because a job may build on what
 *   it stored before: the alert counts add a batch to the count row read back (src/jobs/events/alerts.ts), and
 *   a count row written at a high offset on top of a count the crash took back would win over the
 *   replay's correct ones for good. For the same reason a batch's rows wait, after an outage, for the
 *   batch before to be written again (below);
 * - every 2 s, on the checkpoint read the ResetWatcher makes anyway (a crash this worker saw no failure
 *   of, e.g. a node restarted while it was idle). The driver losing every connection to a node
 *   (`hostDown`) counts as an outage too, whether or not an operation of ours failed with it.
 * A new owner thus finds a checkpoint its predecessor wrote and Cassandra then forgot (a rolling restart
 * followed by a crash), as the worker that wrote it would.
 *
 * That compares checkpoints only: the rows of a batch acknowledged before an outage, whose checkpoint
 * was not acknowledged yet, may be gone while the checkpoint before them survived, so a batch's rows
 * acknowledged before an outage are written again before its checkpoint (PartitionTask.checkpoint).
 * And on a ring, rows acknowledged by a replica that crashes before syncing and by one that missed
 * them can be gone while the checkpoint after them, on other replicas, survives: no checkpoint goes
 * back. So when a node goes down (`hostDown`), every task that acknowledged rows within the window
 * before Cassandra's last answer (`windowMs`: the commit log's sync period plus a margin) reads its
 * partition again from the first of them (nodeDown).
 *
 * A loss rewinds the partition: its old task writes no rows and no checkpoint any more (a write of it
 * still retrying would build on what the store lost: the alert counts read back), the stored offset is
 * written again in the next reset epoch (so no late checkpoint of the old position, ours or a zombie's,
 * can cover the hole again), the job forgets what it remembers of the partition (Job.onRewind), and the
 * consumer seeks back there: every record from it on is written again (writes are idempotent). One log
 * line per rewind, and `exactlyonce_lost_writes_total{partition}` for a checkpoint found lost,
 * `exactlyonce_crash_replays_total{partition}` for a replay after a node went down.
 *
 * A task that dies (a worker SIGKILLed) takes what it knows with it, so each checkpoint also stores
 * where its writer would read again after a node crash (StoredCheckpoint.replay: the first offset it
 * acknowledged within the window, and when). A new owner resumes from there when a node started after
 * that window began, or is down (resume), and keeps it as acknowledged by itself, so that a node going
 * down after the hand-over replays its predecessor's rows as well as its own (PartitionTask.inherit).
 *
 * What remains (docs/guarantees.md, "Durability of an acknowledged write"): a loss no worker that owns
 * the partition can see — the worker that wrote the lost checkpoint is gone and no owner planned from
 * it yet (the next owner then reads the lower checkpoint and writes from there: nothing is missed) —
 * and clocks: a node's start and a checkpoint's time are compared across machines, within the
 * window's margin over the sync period.
 */
import type { Logger } from '../log.js';
import { checkpointTimestamp, type CheckpointStore, type StoredCheckpoint } from './checkpoint-store.js';
import type { EngineMetrics } from './metrics.js';
import type { LostWritesGuard, PartitionControl, ResetPlanner, RewindableTask, TaskOwner } from './ports.js';
import { isLost, permanentError } from './task-errors.js';
import { AbortedError } from './retry.js';

/** ' (epoch N)' after the stored checkpoint and the task's, when they differ (a lost reset), else ''. */
function epochs(stored: StoredCheckpoint | null, epoch: number): [string, string] {
  return stored === null || stored.epoch === epoch ? ['', ''] : [` (epoch ${stored.epoch})`, ` (epoch ${epoch})`];
}

/** The Cassandra nodes as this worker sees them (src/cassandra/session.ts ringState). */
export interface RingState {
  /** The nodes the driver holds down now. */
  down: readonly string[];
  /** When the last node to start started (epoch ms, rounded up; null: unknown). */
  lastStart: number | null;
}

export interface LostWritesDeps {
  checkpoints: Pick<CheckpointStore, 'reset' | 'readOne'>;
  /** The nodes' state now, for a new owner's plan (resume). */
  ring: () => Promise<RingState>;
  planner: ResetPlanner;
  tasks: () => TaskOwner | undefined;
  consumer: PartitionControl;
  /** The partition's log start (where a partition whose every checkpoint was lost starts again). */
  logStart: (partition: number) => Promise<bigint>;
  /** Tells the job to forget what it remembers of the partition (Job.onRewind); must not throw. */
  onRewind: (partition: number, from: bigint) => void;
  retrying: <T>(server: 'Cassandra' | 'Kafka', fn: () => Promise<T>) => Promise<T>;
  /** The worker is stopping: a failure then is the shutdown's (a client closed under the call), not the partition's. */
  stopping: () => boolean;
  metrics: EngineMetrics;
  log: Logger;
}

export class LostWrites implements LostWritesGuard {
  /** Cassandra failures seen so far: a task whose last check is older reads its checkpoint back first. */
  private outages = 0;
  /** The move of each task under way (one at a time per task: see move). */
  private readonly moving = new Map<RewindableTask, Promise<void>>();
  private deps: LostWritesDeps | undefined;
  /** When Cassandra last answered (performance.now()): a node that crashed did so after it. */
  private lastAnswer = performance.now();

  /**
   * `windowMs`: how long before its crash a node may have acknowledged writes it then forgets — its
   * commit log's sync period plus a margin (RunnerOptions.lostWritesWindowMs; 0: never replay).
   */
  constructor(readonly windowMs = 15_000) {}

  /** Cassandra answered an operation. */
  answered(): void {
    this.lastAnswer = performance.now();
  }

  /**
   * The oldest time (performance.now()) at which an acknowledged write may still be taken back by a
   * crash not seen yet: a node crashes after its last answer, and forgets what it acknowledged within
   * the window before it. Tasks keep what they acknowledged since (PartitionTask.replayFrom).
   */
  get horizon(): number {
    return this.lastAnswer - this.windowMs;
  }

  /** Wired once the roles it uses exist (the Runner creates this first: the tasks need it). */
  wire(deps: LostWritesDeps): void {
    this.deps = deps;
  }

  /** A Cassandra operation failed: acknowledged writes may be lost (counted, never reset). */
  outage(): void {
    this.outages++;
  }

  get generation(): number {
    return this.outages;
  }

  /**
   * The driver lost every connection to a node: it may have crashed and forgotten what it acknowledged
   * within the window before its crash. On one node rows and checkpoints go back together, which the
   * checkpoint read-back finds; on a ring a row acknowledged by the crashed replica and one that missed
   * it can be gone while its checkpoint, on other replicas, survives: no checkpoint goes back. So every
   * running task that acknowledged rows within the window before Cassandra's last answer reads its
   * partition again from the first of them (or from its stored checkpoint, when that went back further).
   */
  nodeDown(): void {
    this.outage();
    if (this.windowMs <= 0) return;
    const since = this.horizon;
    for (const task of this.deps?.tasks()?.tasks.values() ?? []) {
      const from = task.replayFrom(since);
      if (from !== null) task.holdFor(this.replay(task, from));
    }
  }

  /**
   * Where newly assigned partitions resume, when a node crash may have taken back rows their previous
   * owner acknowledged while its checkpoint survived (on a ring: the crashed replica and one that missed
   * them held them, the checkpoint's other replicas did not crash). That owner would have read them
   * again (nodeDown) had it lived; its checkpoint says what it acknowledged within the window before
   * writing it (StoredCheckpoint.replay). A node that started after that window began, or one down
   * now, may have crashed inside it: such a partition resumes from there instead, moved by a reset (the
   * next epoch: no late checkpoint of the old position, its writer's or a zombie's, covers it again).
   * Returns `stored` with those checkpoints moved; the others resume where they are.
   */
  async resume(stored: ReadonlyMap<number, StoredCheckpoint>, assigned: readonly number[], logStarts: ReadonlyMap<number, bigint>): Promise<ReadonlyMap<number, StoredCheckpoint>> {
    const deps = this.deps;
    if (deps === undefined || this.windowMs <= 0) return stored;
    const candidates = assigned.flatMap((p) => {
      const c = stored.get(p);
      return c?.replay !== undefined && c.replay.from < c.next ? [{ p, c, replay: c.replay }] : [];
    });
    if (candidates.length === 0) return stored;
    const ring = await deps.ring();
    const moved = new Map(stored);
    for (const { p, c, replay } of candidates) {
      const since = replay.writtenAt - this.windowMs;
      const why =
        ring.down.length > 0
          ? `Cassandra node${ring.down.length === 1 ? '' : 's'} ${ring.down.join(', ')} ${ring.down.length === 1 ? 'is' : 'are'} down`
          : ring.lastStart === null || ring.lastStart >= since
            ? `a Cassandra node started ${ring.lastStart === null ? 'at an unknown time' : `at ${new Date(ring.lastStart).toISOString()}`}, after ${new Date(since).toISOString()}`
            : null;
      if (why === null) continue;
      const low = logStarts.get(p) ?? 0n;
      const to = replay.from > low ? replay.from : low;
      if (to >= c.next) continue;
      const reset = await deps.checkpoints.reset(p, to, c.epoch);
      moved.set(p, reset);
      deps.metrics.crashReplays.inc({ partition: String(p) });
      deps.log.warn(
        { partition: p, from: String(to), checkpoint: String(c.next), writtenAt: new Date(replay.writtenAt).toISOString(), windowMs: this.windowMs },
        `partition ${p}: ${why}: it may have forgotten rows acknowledged in the ${this.windowMs} ms before the checkpoint ${c.next} was written; writing every record from ${to} again`,
      );
    }
    return moved;
  }

  /**
   * Reads `task`'s partition again from `from` (its rows acknowledged since may be gone: nodeDown), or
   * from its stored checkpoint if Cassandra lost that too (then counted as lost writes, as rewind).
   */
  async replay(task: RewindableTask, from: bigint): Promise<void> {
    await this.move(task, async (deps) => {
      const stored = await deps.retrying('Cassandra', () => deps.checkpoints.readOne(task.partition));
      const acked = task.acknowledged;
      if (isLost(stored, task.epoch ?? 0, acked)) return { stored, to: stored?.next ?? (await deps.retrying('Kafka', () => deps.logStart(task.partition))), lost: acked! };
      // Someone went on past what this task knows (a reset, or a new owner while this one was held
      // still: a zombie): what this task wrote is not its partition's position any more.
      if (stored !== null && acked !== null && checkpointTimestamp(stored.epoch, stored.next) > checkpointTimestamp(task.epoch ?? 0, acked)) return null;
      const to = stored !== null && stored.next < from ? stored.next : from;
      return { stored, to, lost: null };
    }, true);
  }

  /**
   * Rewinds `task`'s partition to `stored` (see the file comment). Idempotent per task; returns once
   * the consumer was moved (or the partition changed hands meanwhile: its new owner read afresh).
   */
  async rewind(task: RewindableTask, stored: StoredCheckpoint | null, acked: bigint): Promise<void> {
    await this.move(task, async (deps) => ({ stored, to: stored?.next ?? (await deps.retrying('Kafka', () => deps.logStart(task.partition))), lost: acked }));
  }

  /**
   * Moves `task`'s partition back to where `where` says — `to`, with `lost` the checkpoint found lost
   * (null: a replay of what a crashed node may have forgotten, the checkpoint intact) — one move per
   * task at a time. A replay (`decideFirst`) is decided before the task stops: it may not concern it
   * (someone went on). A loss already found stops the task at once — it must hand over no later
   * batch, and write nothing that builds on what the store lost — even while a replay of it is still
   * deciding (waiting for Cassandra); it then moves once that one is done, unless that one moved the
   * partition already.
   */
  private move(
    task: RewindableTask,
    where: (deps: LostWritesDeps) => Promise<{ stored: StoredCheckpoint | null; to: bigint; lost: bigint | null } | null>,
    decideFirst = false,
  ): Promise<void> {
    const deps = this.deps;
    if (deps === undefined) return Promise.resolve();
    const before = this.moving.get(task);
    if (before !== undefined && decideFirst) return before; // the move under way reads the store afresh
    if (!decideFirst && deps.tasks()?.tasks.get(task.partition) === task) {
      task.abandon();
      deps.consumer.pause([task.partition]);
    }
    const run = (before ?? Promise.resolve()).then(() => this.moveNow(deps, task, where, decideFirst));
    this.moving.set(task, run);
    void run.finally(() => {
      if (this.moving.get(task) === run) this.moving.delete(task);
    });
    return run;
  }

  private async moveNow(
    deps: LostWritesDeps,
    task: RewindableTask,
    where: (deps: LostWritesDeps) => Promise<{ stored: StoredCheckpoint | null; to: bigint; lost: bigint | null } | null>,
    decideFirst: boolean,
  ): Promise<void> {
    const p = task.partition;
    // A task that is no longer its partition's (rewound already, reset, revoked) has nothing to rewind:
    // the partition's owner started from a checkpoint read afresh. Its batches still retrying find the
    // loss again once Cassandra is back; pausing the partition for them would stall the new owner.
    const current = () => deps.tasks()?.tasks.get(p) === task;
    if (!current() || (decideFirst && task.status.state !== 'running')) return;
    try {
      const found = await where(deps);
      if (found === null) return;
      if (decideFirst) {
        if (!current() || task.status.state === 'stopped') return;
        task.abandon();
        deps.consumer.pause([p]);
      }
      const { stored, to, lost } = found;
      if (lost !== null) {
        deps.metrics.lostWrites.inc({ partition: String(p) });
        deps.log.warn(
          { partition: p, stored: stored === null ? null : String(stored.next), acknowledged: String(lost), code: 'EO_WRITES_LOST' },
          `partition ${p}: Cassandra lost acknowledged writes (its checkpoint is ${stored === null ? 'gone' : String(stored.next)}${epochs(stored, task.epoch ?? 0)[0]}, below ${lost}${epochs(stored, task.epoch ?? 0)[1]}, written and acknowledged before; a node crashed before syncing its commit log?); ` +
            `writing every record from ${to} again`,
        );
      } else {
        deps.metrics.crashReplays.inc({ partition: String(p) });
        deps.log.warn(
          { partition: p, from: String(to), windowMs: this.windowMs },
          `partition ${p}: a Cassandra node went down, and may have forgotten what it acknowledged in the ${this.windowMs} ms before; writing every record from ${to} again`,
        );
      }
      // The next epoch: above every checkpoint of the old position still in flight (ours or a zombie's).
      const fromEpoch = Math.max(stored?.epoch ?? 0, task.epoch ?? 0);
      const readAt = this.outages;
      const reset = await deps.retrying('Cassandra', () => deps.checkpoints.reset(p, to, fromEpoch));
      const [plan] = await deps.retrying('Kafka', () => deps.planner.planResets(new Map([[p, reset]])));
      const tasks = deps.tasks();
      if (plan === undefined || tasks === undefined || tasks.tasks.get(p) !== task) return; // revoked meanwhile
      // From here on synchronous: no batch of the partition is handed over between these steps.
      deps.onRewind(p, to);
      tasks.replace(plan, readAt);
      if (plan.stop === null) deps.consumer.restartAt(p, to);
    } catch (e) {
      // Shutting down (whatever a call threw once the stop began): the next owner reads the stored
      // checkpoint anyway. Anything else (a refusal no retry fixes) stops the partition where it is,
      // visibly, rather than leaving it paused.
      if (e instanceof AbortedError) return;
      if (!deps.stopping()) task.stop(permanentError(p, e));
      else deps.log.warn({ partition: p, err: e }, `partition ${p}: reading it again failed while the worker stops (${String(e instanceof Error ? e.message : e).slice(0, 200)}); its next owner reads the stored checkpoint`);
    }
  }
}
