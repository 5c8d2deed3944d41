/**
 * Picks up `exactlyonce checkpoints reset` while running. Every few seconds it reads the checkpoints
 * (one Cassandra partition) and the job's binding. An owned partition whose stored reset epoch is
 * above its task's was reset: its task is dropped (what it has in flight finishes, and its checkpoint
 * write loses to the reset's, src/engine/checkpoint-store.ts), a new task starts at the stored offset
 * and epoch after the same checks as an assignment (AssignmentPlanner), and the consumer is moved
 * there (resumed if the partition was stopped). A job bound to a re-created topic's new ID
 * (`reset --all --rebind`) is followed too: the partitions it had stopped are planned again. A change
 * of the job's stored settings stops every partition, once. Each tick also says which partitions this
 * worker owns (for `checkpoints list`).
 */
import type { Logger } from '../log.js';
import type { AssignmentPlanner } from './assignment-planner.js';
import type { CheckpointStore } from './checkpoint-store.js';
import { settingDifferences, settingsChangedUnder, type BoundJob, type Settings } from './job-binding.js';
import type { LostWrites } from './lost-writes.js';
import { isLost } from './task-errors.js';
import type { PartitionTask } from './partition-task.js';
import type { Binding, PartitionControl } from './ports.js';
import type { TaskManager } from './task-manager.js';

export interface ResetWatcherDeps {
  topic: string;
  keyspace: string;
  /** The job's settings as this worker runs them. */
  settings: Settings;
  /** The job as stored in the keyspace (JobBinding.read). */
  readJob: () => Promise<BoundJob | null>;
  checkpoints: Pick<CheckpointStore, 'readStored' | 'recordOwner' | 'clearStop'>;
  planner: AssignmentPlanner;
  tasks: TaskManager;
  /** What the job is bound to; this watcher moves it on a rebind or a settings change. */
  binding: Binding;
  consumer: PartitionControl;
  log: Logger;
  workerId: string;
  /** Compares each task's acknowledged checkpoint with the stored one on every check (src/engine/lost-writes.ts). */
  lostWrites?: Pick<LostWrites, 'outage' | 'rewind' | 'generation'>;
  /** A partition is read again from an earlier offset: the job forgets what it remembers past it (Job.onRewind). */
  onRewind?: (partition: number, from: bigint) => void;
}

export class ResetWatcher {
  /** Tasks created without an epoch (their checkpoint could not be read): the epoch first seen. */
  private readonly seen = new Map<number, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: ResetWatcherDeps) {}

  /** One check. Throws when a server does not answer (checked again next time). */
  async tick(): Promise<void> {
    const { checkpoints, binding, tasks, consumer, log } = this.deps;
    const owned = [...tasks.tasks.keys()];
    if (owned.length === 0) return;
    void checkpoints.recordOwner(owned, this.deps.workerId).catch(() => undefined);
    // What each task saw acknowledged, taken before the read: a checkpoint acknowledged later may not be in it.
    const acked = new Map([...tasks.tasks].map(([p, t]) => [p, t.acknowledged]));
    const readAt = this.deps.lostWrites?.generation;
    const [stored, bound] = await Promise.all([checkpoints.readStored(), this.deps.readJob()]);
    for (const [p, task] of tasks.tasks) {
      const a = acked.get(p) ?? null;
      if (task.epoch !== undefined && task.status.state === 'running' && isLost(stored.get(p), task.epoch, a)) void this.deps.lostWrites?.rewind(task, stored.get(p) ?? null, a!);
    }
    if (bound !== null && binding.settingsChanged === undefined) {
      // The job's settings changed under this worker (`alerts rule` run while it was not
      // registered): what it computes would no longer be the job's. Every partition stops, once.
      const diffs = settingDifferences(bound.settings, this.deps.settings);
      if (diffs.length > 0) {
        binding.settingsChanged = settingsChangedUnder(this.deps.keyspace, diffs);
        consumer.pause(tasks.stopAll(binding.settingsChanged));
        return;
      }
    }
    if (binding.settingsChanged !== undefined) return;
    let rebound = false;
    if (bound !== null && binding.topicId !== undefined && bound.inputTopicId !== binding.topicId) {
      log.info({ topic: this.deps.topic, was: binding.topicId, now: bound.inputTopicId }, `the job was bound to topic ID ${bound.inputTopicId} of ${this.deps.topic} (\`checkpoints reset --rebind\`)`);
      binding.topicId = bound.inputTopicId;
      if (binding.partitions !== undefined && bound.inputPartitions !== null) binding.partitions = bound.inputPartitions;
      rebound = true;
    }
    const reset = new Map<number, PartitionTask>();
    for (const [p, task] of tasks.tasks) {
      const c = stored.get(p);
      if (c === undefined || task.status.state === 'revoked') continue; // (revoked: being rewound, src/engine/lost-writes.ts)
      const known = task.epoch ?? this.seen.get(p);
      if (known === undefined) this.seen.set(p, c.epoch);
      if ((known !== undefined && c.epoch > known) || (rebound && task.status.state === 'stopped')) reset.set(p, task);
    }
    if (reset.size === 0) return;
    const plans = await this.deps.planner.planResets(new Map([...reset.keys()].map((p) => [p, stored.get(p)!])));
    // From here on synchronous: a rebalance cannot slip in between the checks and the seek, and the
    // seek is queued before the client hands over another batch of these partitions.
    for (const plan of plans) {
      const p = plan.partition;
      if (tasks.tasks.get(p) !== reset.get(p)) continue; // revoked or re-assigned meanwhile (that read the checkpoint afresh)
      tasks.replace(plan, readAt);
      this.seen.delete(p);
      if (plan.stop !== null) {
        consumer.pause([p]);
        continue;
      }
      this.deps.onRewind?.(p, plan.checkpoint!);
      consumer.restartAt(p, plan.checkpoint!);
      void checkpoints.clearStop([p]).catch(() => undefined);
      log.warn(
        { partition: p, checkpoint: String(plan.checkpoint), epoch: plan.epoch },
        `partition ${p} was reset to ${plan.checkpoint} (epoch ${plan.epoch}, \`checkpoints reset\`); resuming there`,
      );
    }
  }

  /** Checks every `intervalMs`, one check at a time; the timer does not keep the process alive. */
  start(intervalMs = 2000): void {
    let busy = false;
    this.timer = setInterval(() => {
      if (busy) return;
      busy = true;
      this.tick()
        .catch((e: unknown) => {
          // (Cassandra or Kafka: a spurious outage only costs each task one read of its checkpoint.)
          this.deps.lostWrites?.outage();
          this.deps.log.debug({ err: e instanceof Error ? e.message : String(e) }, 'reset check failed; checked again next time');
        })
        .finally(() => (busy = false));
    }, intervalMs);
    this.timer.unref();
  }

  /** Idempotent. */
  close(): void {
    clearInterval(this.timer);
  }
}
