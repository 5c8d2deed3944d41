/**
 * The topic-identity check every batch waits for before its task writes it (the TaskManager asks;
 * the consumer starts one as soon as records are fetched). The PositionWatcher checks the same
 * periodically; this gate closes the window between its checks.
 */
import type { ExactlyOnceError } from '../errors.js';
import { partitionsAdded, topicRecreated } from './job-binding.js';
import type { Binding, LogAdmin } from './ports.js';

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
