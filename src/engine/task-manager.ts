/**
 * The TaskManager (after Kafka Streams'): which PartitionTask owns which partition. On assignment it
 * asks the AssignmentPlanner where each partition resumes and creates the tasks; on revocation it drops
 * them; it hands each batch the poll loop receives to its partition's task. It knows no consumer: what
 * to fetch from where is returned to the poll loop (the Runner).
 */
import { ExactlyOnceError } from '../errors.js';
import type { StartOffset } from '../kafka/consumer-contract.js';
import type { Logger } from '../log.js';
import type { AssignmentPlanner } from './assignment-planner.js';
import type { IdentityGate } from './identity-gate.js';
import type { SourceRecord } from './job.js';
import type { EngineMetrics } from './metrics.js';
import { PartitionTask } from './partition-task.js';
import type { PartitionPlan, TaskContext } from './ports.js';
import { permanentError } from './task-errors.js';
import { abortedBy } from './retry.js';

/** Who owns which partition and why one stopped, for `checkpoints list` (CheckpointStore). */
export interface OwnershipRecorder {
  recordOwner(partitions: readonly number[], owner: string): Promise<void>;
  clearOwner(partitions: readonly number[]): Promise<void>;
  clearStop(partitions: readonly number[]): Promise<void>;
}

export class TaskManager {
  private readonly byPartition = new Map<number, PartitionTask>();

  constructor(
    private readonly ctx: TaskContext,
    private readonly planner: AssignmentPlanner,
    private readonly ownership: OwnershipRecorder,
    private readonly metrics: EngineMetrics,
    private readonly log: Logger,
    /** When given, each batch waits for a topic-identity check that started after its records were fetched. */
    private readonly identity?: Pick<IdentityGate, 'ticket' | 'confirm'>,
  ) {}

  /** The tasks of the partitions owned now. */
  get tasks(): ReadonlyMap<number, PartitionTask> {
    return this.byPartition;
  }

  /**
   * Partitions were assigned: plans where each resumes and creates its task. Returns each partition's
   * start offset for the consumer, 'stopped' for those that must not be read — also every one of them
   * when planning failed, never a default position.
   */
  async assign(assigned: number[]): Promise<Map<number, StartOffset>> {
    this.metrics.rebalances.inc({ kind: 'assign' });
    this.metrics.health.joinedGroup();
    const starts = new Map<number, StartOffset>();
    if (assigned.length === 0) return starts;
    // Counted before the checkpoints are read: an outage from here on may have taken them back.
    const readAt = this.ctx.lostWrites?.generation;
    const plan = await this.planner.plan(assigned);
    if (plan.kind === 'planned') {
      for (const p of plan.partitions) {
        const task = this.create(p, readAt);
        starts.set(p.partition, task.status.state === 'stopped' ? 'stopped' : (p.checkpoint ?? 'beginning'));
      }
    } else {
      for (const p of assigned) {
        // Created without an epoch: it never writes a checkpoint.
        const task = new PartitionTask(p, null, this.ctx);
        this.byPartition.set(p, task);
        if (plan.kind === 'failed') task.stop(plan.error);
        else task.revoke();
        starts.set(p, 'stopped');
      }
    }
    this.recordOwnership(starts);
    this.metrics.assignments.inc(assigned.length);
    this.metrics.assigned.set(this.byPartition.size);
    this.log.info(
      { assigned: Object.fromEntries([...starts].map(([p, s]) => [p, String(s)])) },
      `assigned partitions ${assigned.join(',')}; resuming from the stored checkpoints`,
    );
    return starts;
  }

  /**
   * The Kafka client refused to assign partitions just planned (nothing of them is read): each stops
   * with EO_ASSIGNMENT_FAILED, visibly, instead of staying owned in the group and silently idle.
   */
  assignFailed(partitions: readonly number[], cause: Error): void {
    const error = new ExactlyOnceError(
      'EO_ASSIGNMENT_FAILED',
      `partitions ${partitions.join(',')}: the Kafka client could not assign them (${cause.message.split('\n')[0]}); they are stopped, not read. Restart the worker once the cause is fixed`,
      { cause },
    );
    for (const p of partitions) {
      const task = this.byPartition.get(p);
      if (task !== undefined && task.status.state !== 'stopped') task.stop(error);
    }
  }

  /** Partitions were revoked (or lost): their tasks finish what is in flight, but start nothing new. */
  revoke(revoked: number[], lost: boolean): void {
    this.metrics.rebalances.inc({ kind: lost ? 'lost' : 'revoke' });
    for (const p of revoked) {
      this.byPartition.get(p)?.revoke();
      this.byPartition.delete(p);
      this.ctx.lag.partitionRevoked(p);
    }
    void this.ownership.clearOwner(revoked).catch(() => undefined);
    this.metrics.revocations.inc(revoked.length);
    this.metrics.assigned.set(this.byPartition.size);
    this.log.info({ revoked, lost }, `${lost ? 'lost' : 'revoked'} partitions ${revoked.join(',')}`);
  }

  /**
   * Hands a batch to its partition's task. Resolves true when the partition is stopped (the poll loop
   * pauses it). A batch of a partition no longer owned is dropped: nothing is checkpointed.
   */
  async process(partition: number, records: readonly SourceRecord[], fetchedAt?: number): Promise<boolean> {
    const task = this.byPartition.get(partition);
    if (task === undefined) return false; // not ours any more; nothing is checkpointed
    const arrived = performance.now();
    try {
      // Records of a topic re-created under the worker must not be written as the old topic's: a
      // check that started after they were fetched (without the time, after now) vouches for them.
      if (this.identity !== undefined) await this.identity.confirm(fetchedAt ?? this.identity.ticket());
      if (task.status.state === 'stopped') return true;
      await task.process(records, arrived);
    } catch (e) {
      // On shutdown a batch still retrying rejects with AbortedError (or whatever the job throws on
      // the aborted signal): it is abandoned before its checkpoint, so the next owner reads it again.
      if (abortedBy(e, this.ctx.signal)) return false;
      // Anything else is an error retrying cannot fix (transient ones are retried inside): stop
      // the partition where its checkpoint is, visibly, instead of letting the client redeliver
      // the batch in a loop.
      task.stop(permanentError(partition, e, records.length === 0 ? undefined : { first: records[0]!.offset, last: records[records.length - 1]!.offset }));
    }
    return task.status.state === 'stopped';
  }

  /**
   * Replaces a partition's task by one planned afresh (a reset picked up while running, a rewind), its
   * checkpoint read after `readAt` outages were counted: the old task
   * finishes what it has in flight (its checkpoint write loses to the reset's, see
   * src/engine/checkpoint-store.ts) and starts nothing new.
   */
  replace(plan: PartitionPlan, readAt?: number): PartitionTask {
    this.byPartition.get(plan.partition)?.revoke();
    return this.create(plan, readAt);
  }

  /** Stops every partition not stopped yet on `error`; returns those it stopped. */
  stopAll(error: ExactlyOnceError): number[] {
    const stopped = [...this.byPartition.values()].filter((t) => t.status.state !== 'stopped');
    for (const t of stopped) t.stop(error);
    return stopped.map((t) => t.partition);
  }

  /** `readAt`: the Cassandra outages counted before the plan's checkpoint was read (PartitionTask). */
  private create(plan: PartitionPlan, readAt?: number): PartitionTask {
    const task = new PartitionTask(plan.partition, plan.checkpoint, this.ctx, plan.epoch, readAt);
    if (plan.replay !== undefined) task.inherit(plan.replay);
    this.byPartition.set(plan.partition, task);
    // Assigned first: a task that replaces a stopped one (a reset) starts unstopped unless its plan stops it.
    this.ctx.lag.partitionAssigned(plan.partition, plan.checkpoint, plan.marks);
    if (plan.stop !== null) task.stop(plan.stop);
    return task;
  }

  /** Says who owns the partitions just assigned, and forgets the old stop records of those readable now. */
  private recordOwnership(starts: ReadonlyMap<number, StartOffset>): void {
    void this.ownership.recordOwner([...starts.keys()], this.metrics.workerId).catch(() => undefined);
    void this.ownership.clearStop([...starts].filter(([, s]) => s !== 'stopped').map(([p]) => p)).catch(() => undefined);
  }
}
