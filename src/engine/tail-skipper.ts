/**
 * Steps an idle partition's checkpoint over the end of its log that a read_committed consumer never
 * receives: the records of aborted transactions and the transaction markers (one after every commit
 * and every abort). The Kafka client steps over them without a word, so no batch ever ends after
 * them: a topic written by a transactional producer (Kafka Streams, Flink with exactly-once on) would
 * otherwise keep its checkpoint short of the last stable offset for ever, lag that never drains.
 *
 * The proof reads the log, not the client's position: a second, short-lived read_committed reader
 * (src/kafka/log-reader.ts) asks for the first record in [checkpoint, last stable offset). None means
 * the range holds nothing any consumer of ours will ever be given, so the checkpoint may move to its
 * end (PartitionTask.skipTo): every record before the checkpoint is stored, and no record can be
 * delivered-but-not-stored inside a range that holds none. The group consumer's own position would
 * be cheaper, but librdkafka moves it in a background thread ahead of the records the KafkaJS layer
 * still holds in its cache, and resets it asynchronously on a seek: racing batches in flight.
 *
 * It runs on the LagWatcher's refresh (every few seconds, with its stable offsets), for the running
 * partitions whose checkpoint has not moved since the refresh before (a busy partition ends its
 * batches past the markers by itself), below the stable offset, and not already found to hold a
 * record from there (it will arrive as a batch).
 */
import type { Watermarks } from '../kafka/admin.js';
import type { Logger } from '../log.js';
import type { PartitionTask } from './partition-task.js';
import { failingServers } from './retry.js';

/** How long one proof may go without a record or the end of the range (a long aborted range takes a while to read), in ms. */
const PROOF_TIMEOUT_MS = 60_000;

/** The log-reading side (LogReader): the first record a read_committed consumer gets in [from, until), or null. */
export interface RangeReader {
  firstOffset(topic: string, partition: number, from: bigint, until: bigint, idleTimeoutMs: number): Promise<bigint | null>;
  close(): Promise<void>;
}

export interface TailSkipperDeps {
  topic: string;
  /** The tasks of the partitions owned now. */
  tasks: () => ReadonlyMap<number, PartitionTask>;
  /** A fresh reader for one round of proofs (closed after it). */
  openReader: () => Promise<RangeReader>;
  /** Each partition's log start now (a range whose start was deleted meanwhile was not read from there). */
  logStarts: () => Promise<ReadonlyMap<number, bigint>>;
  log: Logger;
}

interface Candidate {
  task: PartitionTask;
  from: bigint;
  until: bigint;
}

export class TailSkipper {
  /** Each running partition's next offset at the previous refresh (unchanged since: idle). */
  private readonly previous = new Map<number, bigint | null>();
  /** Partitions found to hold a record from this offset on: not read again until the checkpoint moves. */
  private readonly holding = new Map<number, bigint>();
  private running: Promise<void> | undefined;
  /** The reader of the round in flight. */
  private reader: RangeReader | undefined;
  private closed = false;
  /** The last round that failed, and why (named by stall warnings while recent). */
  lastFailure: { message: string; at: number } | undefined;

  constructor(private readonly deps: TailSkipperDeps) {}

  /**
   * Called with each refresh of the watermarks; starts a round of proofs when some partition needs one.
   * Resolves once that round is done (at once without one); never rejects.
   */
  check(marks: readonly Watermarks[]): Promise<void> {
    const tasks = this.deps.tasks();
    const candidates: Candidate[] = [];
    const seen = new Map<number, bigint | null>();
    for (const w of marks) {
      const task = tasks.get(w.partition);
      if (task === undefined || task.status.state !== 'running') continue;
      const next = task.status.next;
      seen.set(w.partition, next);
      // Never checkpointed: the task reads from the log start.
      const from = next ?? w.low;
      const idle = this.previous.has(w.partition) && this.previous.get(w.partition) === next;
      if (idle && from >= w.low && from < w.stable && this.holding.get(w.partition) !== from) candidates.push({ task, from, until: w.stable });
    }
    this.previous.clear();
    for (const [p, next] of seen) this.previous.set(p, next);
    for (const p of this.holding.keys()) if (!seen.has(p)) this.holding.delete(p);
    // One round at a time; none while a server fails (the checkpoints wait for it anyway).
    if (candidates.length === 0 || this.running !== undefined || this.closed || failingServers().length > 0) return Promise.resolve();
    this.running = this.prove(candidates).finally(() => (this.running = undefined));
    return this.running;
  }

  /**
   * Starts no more rounds and moves no more checkpoints; the read in flight (if any) is cut short by
   * closing its reader, not waited for (it can wait up to PROOF_TIMEOUT_MS on a broker that is away).
   * Idempotent.
   */
  close(): void {
    this.closed = true;
    void this.reader?.close().catch(() => undefined);
  }

  private async prove(candidates: readonly Candidate[]): Promise<void> {
    const { topic, log } = this.deps;
    let reader: RangeReader | undefined;
    try {
      reader = await this.deps.openReader();
      this.reader = reader;
      if (this.closed) return;
      const unreadable: Candidate[] = [];
      for (const c of candidates) {
        if (this.closed) return;
        const first = await reader.firstOffset(topic, c.task.partition, c.from, c.until, PROOF_TIMEOUT_MS);
        if (first === null) unreadable.push(c);
        else this.holding.set(c.task.partition, c.from);
      }
      if (unreadable.length === 0) return;
      // A reader whose start offset was deleted meanwhile starts at the log start: only a log start
      // still at or below `from` proves that the range was read from `from`.
      const starts = await this.deps.logStarts();
      for (const c of unreadable) {
        const p = c.task.partition;
        if (this.closed || (starts.get(p) ?? c.from + 1n) > c.from || this.deps.tasks().get(p) !== c.task) continue;
        if (await c.task.skipTo(c.from, c.until)) {
          log.debug(
            { partition: p, from: String(c.from), to: String(c.until) },
            `partition ${p}: checkpoint stepped from ${c.from} to ${c.until}, over aborted records and transaction markers (nothing there is ever delivered)`,
          );
        }
      }
      this.lastFailure = undefined;
    } catch (e) {
      const message = e instanceof Error ? e.message.split('\n')[0]! : String(e);
      this.lastFailure = { message, at: Date.now() };
      log.debug({ err: message }, 'cannot read the end of the log to step checkpoints over transaction markers; trying again at the next refresh');
    } finally {
      this.reader = undefined;
      await reader?.close().catch(() => undefined);
    }
  }
}
