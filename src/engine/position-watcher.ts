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
import { partitionsAdded, topicRecreated } from './job-binding.js';
import type { PartitionTask } from './partition-task.js';
import type { Binding, LogAdmin, PartitionControl } from './ports.js';
import { failingServers } from './retry.js';

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
