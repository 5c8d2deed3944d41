/**
 * Checks every few seconds, while running, that what the worker reads is still the log its
 * checkpoints describe; the Kafka client's out-of-range error triggers a check at once.
 * - The topic's identity: a topic deleted and re-created under the worker stops every owned
 *   partition (its offsets restarted). A topic that is gone for now is left to the group, which
 *   revokes its partitions.
 * - Each owned partition's position: a next offset beyond the log end (the log was truncated), or
 *   below the log start while the partition stands still (records deleted before they were read;
 *   with auto.offset.reset=error the client stops fetching there) stops the partition. Offsets are
 *   read before the watermarks, so a batch stored meanwhile can never look beyond the end.
 */
import { ExactlyOnceError } from '../errors.js';
import type { Binding, LogAdmin } from './assignment-planner.js';
import { partitionsAdded, topicRecreated } from './job-binding.js';
import type { PartitionTask } from './partition-task.js';
import { failingServers } from './retry.js';

/** What the watchers may do to the consumer's fetching (GroupConsumer). */
export interface PartitionControl {
  pause(partitions: number[]): void;
  /** Fetches the partition from `offset` on (resumed if it was paused). */
  restartAt(partition: number, offset: bigint): void;
}

export interface PositionWatcherDeps {
  topic: string;
  admin: LogAdmin;
  /** The tasks of the partitions owned now. */
  tasks: () => ReadonlyMap<number, PartitionTask>;
  /** What the job is bound to (read at each check). */
  binding: Binding;
  consumer: PartitionControl;
}

export class PositionWatcher {
  private busy = false;
  /** Each running partition's next offset at the previous check (to tell one standing still). */
  private readonly previous = new Map<number, bigint | null>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: PositionWatcherDeps) {}

  /** Checks now; `clientSaid` is the Kafka client's out-of-range message, quoted in the stop. Never throws. */
  async check(clientSaid?: string): Promise<void> {
    const { topic, admin, binding } = this.deps;
    const tasks = this.deps.tasks();
    if (this.busy || binding.topicId === undefined || tasks.size === 0) return;
    this.busy = true;
    try {
      const before = new Map([...tasks.values()].filter((t) => t.status.state === 'running').map((t) => [t.partition, t.status.next]));
      const [now, marks] = await Promise.all([admin.topicId(topic), admin.watermarks(topic)]);
      const stopped: number[] = [];
      for (const [p, next] of before) {
        const task = this.deps.tasks().get(p);
        if (task === undefined || task.status.state !== 'running') continue;
        const w = marks.find((m) => m.partition === p);
        let error: ExactlyOnceError | undefined;
        if (now !== null && now !== binding.topicId) {
          error = topicRecreated(topic, binding.topicId!, now);
        } else if (binding.partitions !== undefined && marks.length > binding.partitions) {
          error = partitionsAdded(topic, binding.partitions, marks.length);
        } else if (w !== undefined && next !== null && next > w.high) {
          error = positionOutOfRange(p, next, w.low, w.high, clientSaid);
        } else if (w !== undefined && next !== null && next < w.low && this.previous.get(p) === next && task.status.next === next && failingServers().length === 0) {
          // (Standing still while a server is failing is the retry's doing: the records may wait
          // in the client's prefetch; PartitionTask's own gap check then judges the next batch.)
          error = positionOutOfRange(p, next, w.low, w.high, clientSaid);
        }
        if (error !== undefined) {
          task.stop(error);
          stopped.push(p);
        }
      }
      this.previous.clear();
      for (const [p, next] of before) this.previous.set(p, next);
      this.deps.consumer.pause(stopped);
    } catch {
      // Kafka down: the Runner already says so; checked again next time.
    } finally {
      this.busy = false;
    }
  }

  /** Checks every `intervalMs`; the timer does not keep the process alive. */
  start(intervalMs = 2000): void {
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  /** Idempotent. */
  close(): void {
    clearInterval(this.timer);
  }
}

function positionOutOfRange(partition: number, next: bigint, low: bigint, high: bigint, clientSaid: string | undefined): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_POSITION_OUT_OF_RANGE',
    `partition ${partition}: offset ${next} is outside the log [${low}, ${high}]${clientSaid === undefined ? '' : ` (the Kafka client: ${clientSaid})`}: ` +
      `the log was ${next > high ? 'truncated or re-created' : 'deleted (retention, delete-records) before these records were read'} under the worker. ` +
      `The partition is stopped at its checkpoint and nothing is skipped; see \`exactlyonce checkpoints list\`, then \`exactlyonce checkpoints reset --partition ${partition} --to …\``,
  );
}

export interface IdentityGateDeps {
  topic: string;
  admin: Pick<LogAdmin, 'topicId'> & { partitionCount?: (topic: string) => Promise<number | null> };
  binding: Binding;
  /** The topic was re-created (or gained partitions under a job whose keys must stay on theirs): stop every partition with `error` (and stop fetching them). */
  onRecreated: (error: ExactlyOnceError) => void;
  /** Runs a check until Kafka answers (rejects with AbortedError on shutdown). */
  retrying: (fn: () => Promise<void>) => Promise<void>;
  /** A check started (exactlyonce_identity_checks_total). */
  onCheck?: () => void;
}

/**
 * Closes the window between the watcher's periodic checks: a batch is handed to its task only after
 * a check of the topic's identity (and, for a job whose keys must stay on their partition, its
 * partition count) that *started after the batch's records were fetched*, so records of a topic
 * deleted and re-created under the worker (whose offsets the client simply goes on reading) are never
 * written as the old topic's. Checks are shared: the one in flight serves every batch fetched before
 * it started, so a busy worker asks for the topic's metadata about once per round trip, not once per
 * batch. A check can start as soon as records are fetched (`confirm` from the consumer's fetch), so
 * that a batch waiting behind its partition's batch in flight finds its check done when its turn comes.
 */
export class IdentityGate {
  /** When (performance.now()) the last check that completed had started. */
  private confirmedFrom = -Infinity;
  private inflight: Promise<void> | undefined;

  constructor(private readonly deps: IdentityGateDeps) {}

  /** For records that arrive now: a check started after this has seen what the topic was by then. */
  ticket(): number {
    return performance.now();
  }

  /**
   * Resolves once a check that started after `since` (performance.now(): when the batch's records were
   * fetched, or a ticket) has completed (and acted); starts one if none is in flight.
   */
  confirm(since: number): Promise<void> {
    if (this.confirmedFrom > since) return Promise.resolve();
    return this.deps.retrying(async () => {
      while (this.confirmedFrom <= since) {
        if (this.inflight === undefined) {
          const from = performance.now();
          this.deps.onCheck?.();
          this.inflight = this.check()
            .then(() => void (this.confirmedFrom = Math.max(this.confirmedFrom, from)))
            .finally(() => (this.inflight = undefined));
        }
        await this.inflight;
      }
    });
  }

  private async check(): Promise<void> {
    const { topic, admin, binding } = this.deps;
    const bound = binding.topicId;
    if (bound === undefined) return;
    const boundPartitions = binding.partitions;
    const [now, partitions] = await Promise.all([admin.topicId(topic), boundPartitions === undefined ? null : (admin.partitionCount?.(topic) ?? null)]);
    // (A topic gone for now is no proof of anything: batches read before it was deleted are its own.)
    if (now !== null && now !== bound) this.deps.onRecreated(topicRecreated(topic, bound, now));
    // A producer that placed a record by the new partition count learned it from the brokers before
    // the record was written, so before the record was fetched, so before this check began:
    // the check sees the new count, and the batch is not written.
    else if (boundPartitions !== undefined && partitions !== null && partitions > boundPartitions) this.deps.onRecreated(partitionsAdded(topic, boundPartitions, partitions));
  }
}
