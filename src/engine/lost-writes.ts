/**
 * Finds acknowledged writes the store lost, and writes them again (DESIGN §4.8).
 *
 * Cassandra acknowledges a write before its commit log is synced unless the node runs
 * `commitlog_sync: batch`: with the default (`periodic`, every 10 s), a node that crashes forgets what it
 * acknowledged since the last sync — on one node (RF 1), or when every replica crashes together. Rows
 * and checkpoints go back together (the commit log replays a prefix of what was written, and a
 * checkpoint is written after its rows), so the stored checkpoint still never passes a lost row; but a
 * worker that keeps its partition goes on from its in-memory position, and its next checkpoint would
 * cover the hole for good.
 *
 * So each PartitionTask remembers the highest checkpoint it wrote and saw acknowledged, and compares it
 * with the stored one (both as write timestamps, epoch·2^44 + offset, so a reset is never taken for a
 * loss):
 * - after any Cassandra failure this worker saw (an outage: this class counts them), a task reads its
 *   stored checkpoint back before the job writes its next batch and before it writes its next
 *   checkpoint — inside each write's retry, so even a write in flight across the outage checks first.
 *   Before the job's write too, because a job may build on what it stored before: the alert counts add
 *   a batch to the count row read back (src/app/alerts.ts), and a count row written at a high offset
 *   on top of a count the crash took back would win over the replay's correct ones for good;
 * - every 2 s, on the checkpoint read the ResetWatcher makes anyway (a crash this worker saw no failure
 *   of, e.g. a node restarted while it was idle). The driver losing every connection to a node
 *   (`hostDown`) counts as an outage too, whether or not an operation of ours failed with it.
 * That compares checkpoints only: the rows of a batch acknowledged before an outage, whose checkpoint
 * was not acknowledged yet, may be gone while the checkpoint before them survived. So a batch's rows
 * acknowledged before an outage are written again before its checkpoint (PartitionTask.checkpoint).
 * A loss rewinds the partition: its old task writes no rows and no checkpoint any more (a write of it
 * still retrying would build on what the store lost: the alert counts read back), the stored offset is
 * written again in the next reset epoch (so no late checkpoint of the old position, ours or a zombie's,
 * can cover the hole again), the job forgets what it remembers of the partition (Job.onRewind), and the
 * consumer seeks back there: every record from it on is written again (writes are idempotent). One log
 * line per rewind and `exactlyonce_lost_writes_total{partition}`.
 *
 * What remains: a loss that neither signal reveals — the worker that wrote the lost checkpoint is gone
 * (SIGKILLed, or it handed the partition over) before it could compare — leaves the rows missing from
 * the stored checkpoint on, until the partition is read again from there; `verify` reports them (README,
 * "Durability").
 */
import type { Logger } from '../log.js';
import type { AssignmentPlanner } from './assignment-planner.js';
import { checkpointTimestamp, type CheckpointStore, type StoredCheckpoint } from './checkpoint-store.js';
import type { EngineMetrics } from './metrics.js';
import { permanentError, type PartitionTask } from './partition-task.js';
import { AbortedError } from './retry.js';
import type { PartitionControl } from './position-watcher.js';
import type { TaskManager } from './task-manager.js';

/** Whether `stored` is below the checkpoint `acked` that a task of reset epoch `epoch` saw acknowledged. */
export function isLost(stored: StoredCheckpoint | undefined | null, epoch: number, acked: bigint | null): boolean {
  if (acked === null) return false;
  if (stored === undefined || stored === null) return true;
  return checkpointTimestamp(stored.epoch, stored.next) < checkpointTimestamp(epoch, acked);
}

/** Thrown inside a batch's write or checkpoint write that found the stored checkpoint lower than one acknowledged before. */
export class LostWritesFound extends Error {
  constructor(
    readonly stored: StoredCheckpoint | null,
    readonly acked: bigint,
  ) {
    super(`stored checkpoint ${stored === null ? 'none' : String(stored.next)} is below ${acked}, written and acknowledged before`);
    this.name = 'LostWritesFound';
  }
}

export interface LostWritesDeps {
  checkpoints: Pick<CheckpointStore, 'reset'>;
  planner: Pick<AssignmentPlanner, 'planResets'>;
  tasks: () => TaskManager | undefined;
  consumer: PartitionControl;
  /** The partition's log start (where a partition whose every checkpoint was lost starts again). */
  logStart: (partition: number) => Promise<bigint>;
  /** Tells the job to forget what it remembers of the partition (Job.onRewind); must not throw. */
  onRewind: (partition: number, from: bigint) => void;
  retrying: <T>(server: 'Cassandra' | 'Kafka', fn: () => Promise<T>) => Promise<T>;
  metrics: EngineMetrics;
  log: Logger;
}

export class LostWrites {
  /** Cassandra failures seen so far: a task whose last check is older reads its checkpoint back first. */
  private outages = 0;
  private readonly rewinding = new Set<PartitionTask>();
  private deps: LostWritesDeps | undefined;

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
   * Rewinds `task`'s partition to `stored` (see the file comment). Idempotent per task; returns once
   * the consumer was moved (or the partition changed hands meanwhile: its new owner read afresh).
   */
  async rewind(task: PartitionTask, stored: StoredCheckpoint | null, acked: bigint): Promise<void> {
    const deps = this.deps;
    if (deps === undefined || this.rewinding.has(task)) return;
    const p = task.partition;
    // A task that is no longer its partition's (rewound already, reset, revoked) has nothing to rewind:
    // the partition's owner started from a checkpoint read afresh. Its batches still retrying find the
    // loss again once Cassandra is back; pausing the partition for them would stall the new owner.
    if (deps.tasks()?.tasks.get(p) !== task) return;
    this.rewinding.add(task);
    try {
      task.abandon();
      deps.consumer.pause([p]);
      deps.metrics.lostWrites.inc({ partition: String(p) });
      const to = stored?.next ?? (await deps.retrying('Kafka', () => deps.logStart(p)));
      deps.log.warn(
        { partition: p, stored: stored === null ? null : String(stored.next), acknowledged: String(acked), code: 'EO_WRITES_LOST' },
        `partition ${p}: Cassandra lost acknowledged writes (its checkpoint is ${stored === null ? 'gone' : String(stored.next)}, below ${acked}, written and acknowledged before; a node crashed before syncing its commit log?); ` +
          `writing every record from ${to} again`,
      );
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
      // Shutting down: the next owner reads the stored checkpoint anyway. Anything else (a refusal no
      // retry fixes) stops the partition where it is, visibly, rather than leaving it paused.
      if (!(e instanceof AbortedError)) task.stop(permanentError(p, e));
    } finally {
      this.rewinding.delete(task);
    }
  }
}
