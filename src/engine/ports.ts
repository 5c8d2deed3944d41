/**
 * The contracts the engine's roles hold each other to, apart from the roles themselves: each role
 * depends on what it needs of another (a narrow interface here), never on the other's module, so that
 * no two of them import each other. Types only.
 */
import type { ExactlyOnceError } from '../errors.js';
import type { Watermarks } from '../kafka/admin.js';
import type { Logger } from '../log.js';
import type { CheckpointStore, StoredCheckpoint } from './checkpoint-store.js';
import type { Job } from './job.js';
import type { LagWatcher } from './lag-watcher.js';
import type { EngineMetrics } from './metrics.js';
import type { Quarantine } from './quarantine.js';

/** What the planner and the watchers ask Kafka (KafkaAdmin). */
export interface LogAdmin {
  watermarks(topic: string): Promise<Watermarks[]>;
  /** The topic's ID, or null when it does not exist. */
  topicId(topic: string): Promise<string | null>;
}

/** What the job is bound to now (read at each plan: a rebind or a settings change moves it). */
export interface Binding {
  /** The input topic's ID the checkpoints describe (undefined before the job is bound). */
  topicId: string | undefined;
  /** Set once the job's stored settings no longer match this worker's: every partition stops with it. */
  settingsChanged: ExactlyOnceError | undefined;
  /**
   * The partition count the job is bound to, for a job whose keys must stay on their partition
   * (Job.keysStayOnPartition); undefined for any other job. More partitions now stop every partition.
   */
  partitions?: number | undefined;
}

/** One partition's verdict (AssignmentPlanner). */
export interface PartitionPlan {
  partition: number;
  /** The stored checkpoint: the next offset to read (null: never checkpointed, start at the log start). */
  checkpoint: bigint | null;
  /** The checkpoint's reset epoch (0 when never checkpointed). */
  epoch: number;
  /** The partition's log start and end, when Kafka reported them. */
  marks: Watermarks | undefined;
  /** Why the partition must not be read (null: resume at the checkpoint). */
  stop: ExactlyOnceError | null;
  /** What the checkpoint's writer acknowledged within the lost-writes window (StoredCheckpoint.replay). */
  replay?: StoredCheckpoint['replay'];
}

/** What the watchers may do to the consumer's fetching (GroupConsumer). */
export interface PartitionControl {
  pause(partitions: number[]): void;
  /** Fetches the partition from `offset` on (resumed if it was paused). */
  restartAt(partition: number, offset: bigint): void;
}

export type TaskState = 'running' | 'revoked' | 'stopped';

/** What LostWrites needs of a task (PartitionTask) to read its partition again from an earlier offset. */
export interface RewindableTask {
  readonly partition: number;
  /** The reset epoch of the checkpoint it was planned from (undefined: it never writes a checkpoint). */
  readonly epoch?: number | undefined;
  /** The highest checkpoint it knows was stored (null: none yet). */
  readonly acknowledged: bigint | null;
  readonly status: { state: TaskState };
  /** Writes no rows and no checkpoint any more: its partition is read again by a new task. */
  abandon(): void;
  stop(error: ExactlyOnceError): void;
  /** The first offset of the first batch acknowledged since `since` (performance.now()), or null. */
  replayFrom(since: number): bigint | null;
  /** Writes nothing until `decision` settles. */
  holdFor(decision: Promise<void>): void;
}

/** What LostWrites needs of the AssignmentPlanner: plans for partitions moved back to a stored checkpoint. */
export interface ResetPlanner {
  planResets(reset: ReadonlyMap<number, StoredCheckpoint>): Promise<PartitionPlan[]>;
}

/** What LostWrites needs of the TaskManager: the tasks owned now, and replacing one by a task planned afresh. */
export interface TaskOwner {
  readonly tasks: ReadonlyMap<number, RewindableTask>;
  /** `readAt`: the Cassandra outages counted before the plan's checkpoint was read. */
  replace(plan: PartitionPlan, readAt?: number): unknown;
}

/** What a task needs of LostWrites (src/engine/lost-writes.ts). */
export interface LostWritesGuard {
  /** The Cassandra outages counted so far. */
  readonly generation: number;
  /** How long before its crash a node may have acknowledged writes it then forgets (0: never replay). */
  readonly windowMs: number;
  /** The oldest time (performance.now()) at which an acknowledged write may still be taken back. */
  readonly horizon: number;
  /** Reads `task`'s partition again from `stored`: the store lost the checkpoint `acked` it had acknowledged. */
  rewind(task: RewindableTask, stored: StoredCheckpoint | null, acked: bigint): Promise<void>;
}

/** What every PartitionTask of a worker shares. */
export interface TaskContext {
  job: Job<unknown>;
  checkpoints: CheckpointStore;
  quarantine: Quarantine;
  metrics: EngineMetrics;
  /** The per-partition checkpoint and lag gauges (told when the task stops and when it checkpoints). */
  lag: LagWatcher;
  log: Logger;
  /** Aborted when the worker stops (handed to the job's writes). */
  signal?: AbortSignal;
  /** Runs an operation against `server` (default Cassandra) with retries until it succeeds or the worker shuts down. */
  withRetry: <T>(fn: () => Promise<T>, server?: string) => Promise<T>;
  /** The partition's current log start offset, to tell a deleted range from an ordinary offset gap. */
  logStart: (partition: number) => Promise<bigint>;
  /** The checkpoint writes in flight of every task (the Runner awaits them before closing the session). */
  checkpointsInFlight?: Set<Promise<void>>;
  /** Counts Cassandra outages and rewinds a partition whose acknowledged checkpoint was lost (src/engine/lost-writes.ts). */
  lostWrites?: LostWritesGuard;
  /** Told when a task stops (to record why, for `exactlyonce checkpoints list`); must not throw. */
  onStop?: (partition: number, epoch: number | null, error: ExactlyOnceError) => void;
}
