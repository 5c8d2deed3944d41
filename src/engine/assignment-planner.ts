/**
 * The assignment planner: where each partition given to this worker resumes, or why it must not be
 * read. Its stored checkpoint is checked against the topic's identity and the partition's log start and
 * end (as Kafka Streams' TaskManager reads a task's committed offsets before the task runs). The same
 * checks serve a new assignment and a `checkpoints reset` picked up while running, so they are written
 * once (startError).
 */
import { ExactlyOnceError } from '../errors.js';
import type { Watermarks } from '../kafka/admin.js';
import type { StoredCheckpoint } from './checkpoint-store.js';
import { partitionsAdded, topicRecreated } from './job-binding.js';
import type { Binding, LogAdmin, PartitionPlan } from './ports.js';
import { outOfRange } from './task-errors.js';
import { AbortedError } from './retry.js';

/** Reads the stored checkpoints (CheckpointStore). */
export interface CheckpointReader {
  /** `withReplay`: with what each checkpoint's writer would read again after a node crash. */
  readStored(withReplay?: boolean): Promise<ReadonlyMap<number, StoredCheckpoint>>;
}

/**
 * planned: one verdict per partition; failed: planning itself failed, every partition must stop with
 * `error`; aborted: the worker is shutting down, nothing is read.
 */
export type AssignmentPlan =
  | { kind: 'planned'; partitions: PartitionPlan[] }
  | { kind: 'failed'; error: ExactlyOnceError }
  | { kind: 'aborted' };

export interface PlannerDeps {
  topic: string;
  checkpoints: CheckpointReader;
  admin: LogAdmin;
  binding: () => Binding;
  /** Runs a call with retries until the server answers (AbortedError on shutdown). */
  retrying: <T>(server: 'Cassandra' | 'Kafka', fn: () => Promise<T>) => Promise<T>;
  /**
   * True once the worker is stopping: an assignment that arrives while it leaves the group is not
   * planned, so it moves no checkpoint (a crash replay's reset) that it would then never read again.
   */
  stopping?: () => boolean;
  /**
   * Records this worker as the owner of the assigned partitions, then compares the job's stored
   * settings with the worker's: the error to stop them with when the settings changed since the worker
   * started, else null. In that order, against the commands that change the settings: each marks them
   * first. `schema apply --job` moving a sink's columns then refuses while any partition has an owner,
   * so a worker is either seen by it or sees its mark, and never reads a partition on settings changed
   * under it. (`alerts rule` refuses on registered workers only; a worker it cannot see is stopped by
   * this check at its next assignment, or by the ResetWatcher's a tick later.)
   */
  settingsNow?: (assigned: readonly number[]) => Promise<ExactlyOnceError | null>;
  /** Moves checkpoints whose rows a node crash may have taken back to where they are read again (LostWrites.resume). */
  resume?: (stored: ReadonlyMap<number, StoredCheckpoint>, assigned: readonly number[], logStarts: ReadonlyMap<number, bigint>) => Promise<ReadonlyMap<number, StoredCheckpoint>>;
}

/** Kafka clients take offsets as JS numbers: a checkpoint beyond 2^53 cannot be sought to. */
const MAX_SEEKABLE = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * Why a partition must not be read from `checkpoint`, or null when it may. Pure. A topic re-created
 * under the job (a new topic ID) stops every partition; a checkpoint beyond the log end (the log was
 * truncated or re-created) or below the log start (records deleted before they were read) stops its
 * partition, as does one the client cannot seek to. A partition never checkpointed starts at the log
 * start, whatever it is.
 */
export function startError(
  partition: number,
  checkpoint: bigint | null,
  marks: Watermarks | undefined,
  topic: { name: string; bound: string | undefined; now: string | null; boundPartitions?: number | undefined; partitions?: number },
): ExactlyOnceError | null {
  if (topic.now !== null && topic.bound !== undefined && topic.now !== topic.bound) return topicRecreated(topic.name, topic.bound, topic.now);
  if (topic.boundPartitions !== undefined && topic.partitions !== undefined && topic.partitions > topic.boundPartitions) {
    return partitionsAdded(topic.name, topic.boundPartitions, topic.partitions);
  }
  if (checkpoint === null) return null;
  if (marks !== undefined && checkpoint > marks.high) return outOfRange(partition, checkpoint, 'beyond', marks.high);
  if (marks !== undefined && checkpoint < marks.low) return outOfRange(partition, checkpoint, 'below', marks.low);
  if (checkpoint > MAX_SEEKABLE) {
    return new ExactlyOnceError('EO_CHECKPOINT_OUT_OF_RANGE', `partition ${partition}: checkpoint ${checkpoint} is beyond 2^53, which the Kafka client cannot seek to; the partition is stopped`);
  }
  return null;
}

export class AssignmentPlanner {
  constructor(private readonly deps: PlannerDeps) {}

  /**
   * Where each newly assigned partition resumes. Never throws: a failure while planning (other than
   * shutdown) is returned as `failed`, so that the partitions are stopped visibly — the client would
   * otherwise fall back to its default assignment and read from a position nobody chose.
   */
  async plan(assigned: readonly number[]): Promise<AssignmentPlan> {
    const { topic, checkpoints, admin, retrying, stopping = () => false } = this.deps;
    if (stopping()) return { kind: 'aborted' };
    try {
      // Read back where each partition stands; retried until the servers answer, because proceeding
      // without the checkpoint could only replay from the start or skip.
      const read = await retrying('Cassandra', () => checkpoints.readStored(true));
      const [marks, topicId] = await retrying('Kafka', () => Promise.all([admin.watermarks(topic), admin.topicId(topic)]));
      const { topicId: bound, partitions: boundPartitions } = this.deps.binding();
      const settingsNow = this.deps.settingsNow;
      const settingsChanged = this.deps.binding().settingsChanged ?? (settingsNow === undefined ? null : await retrying('Cassandra', () => settingsNow(assigned))) ?? undefined;
      // A partition of another topic (re-created) or with a changed job is not read: nothing to move.
      const resume = this.deps.resume;
      if (stopping()) return { kind: 'aborted' };
      const stored = resume === undefined || settingsChanged !== undefined || (topicId !== null && bound !== undefined && topicId !== bound)
        ? read
        : await retrying('Cassandra', () => resume(read, assigned, new Map(marks.map((m) => [m.partition, m.low]))));
      return {
        kind: 'planned',
        partitions: assigned.map((p) => {
          const c = stored.get(p);
          const w = marks.find((m) => m.partition === p);
          const checkpoint = c?.next ?? null;
          return { partition: p, checkpoint, epoch: c?.epoch ?? 0, marks: w, stop: settingsChanged ?? startError(p, checkpoint, w, { name: topic, bound, now: topicId, boundPartitions, partitions: marks.length }), replay: c?.replay };
        }),
      };
    } catch (e) {
      // Shutting down (or failed once the worker was stopping): nothing is read, nothing is stopped.
      if (e instanceof AbortedError || stopping()) return { kind: 'aborted' };
      const error = new ExactlyOnceError(
        'EO_ASSIGNMENT_FAILED',
        `partitions ${assigned.join(',')}: planning where they resume failed (${e instanceof Error ? e.message.split('\n')[0] : String(e)}); they are stopped, not read from a default position. Restart the worker once the cause is fixed`,
        { cause: e },
      );
      return { kind: 'failed', error };
    }
  }

  /**
   * The partitions reset while running (`checkpoints reset`), from their newly stored checkpoints,
   * checked like an assignment. Not retried: it throws when Kafka does not answer, and the reset is
   * picked up again next time.
   */
  async planResets(reset: ReadonlyMap<number, StoredCheckpoint>): Promise<PartitionPlan[]> {
    const { topic, admin } = this.deps;
    const [marks, topicId] = await Promise.all([admin.watermarks(topic), admin.topicId(topic)]);
    const { topicId: bound, partitions: boundPartitions } = this.deps.binding();
    return [...reset].map(([p, c]) => {
      const w = marks.find((m) => m.partition === p);
      return { partition: p, checkpoint: c.next, epoch: c.epoch, marks: w, stop: startError(p, c.next, w, { name: topic, bound, now: topicId, boundPartitions, partitions: marks.length }) };
    });
  }
}
