/**
 * The records a GroupConsumer (src/kafka/consumer.ts) fetched and has not handed over yet, one queue
 * per assigned partition: what they weigh against the fetch-ahead bounds, where the next batch of a
 * partition is cut, and where the reading of each record started (SourceRecord.fetchedFrom). A file
 * of its own so that the consumer's fetch loop and rebalance handling do not carry the bookkeeping.
 */
import { recordHeaders, type SourceRecord } from './record.js';
import type { RawMessage } from './native-consumer.js';

/**
 * Most bytes (keys and values) in one batch: long records are handed over in fewer per batch than
 * maxBatchSize. A job holds a batch decoded several times over (its text, its values, its rows), so
 * `--max-batch` records of 30 KB each would not fit the worker's heap (`--max-heap-mb`).
 */
export const MAX_BATCH_BYTES = 2 * 2 ** 20;

/** A fetched message as a SourceRecord (the bench's at-least-once baseline converts the same way). */
export function sourceRecord(
  topic: string,
  partition: number,
  m: { offset: string | number; key?: Buffer | null; value: Buffer | null; timestamp: string | number; headers?: Array<Record<string, Buffer>> },
  fetchedFrom?: bigint | 'log-start',
): SourceRecord {
  const headers = recordHeaders(m.headers);
  return { topic, partition, offset: BigInt(m.offset), key: m.key ?? null, value: m.value ?? null, timestampMs: Number(m.timestamp), fetchedFrom, ...(headers === undefined ? {} : { headers }) };
}

/** A partition's records not yet handed over, with when each was fetched. */
export interface Queue {
  messages: RawMessage[];
  fetchedAt: number[];
  /**
   * Where the reading of messages[0] (or, with none queued, of the next message) started: the offset
   * after the record handed over before it, or the offset assigned or restarted at; null while the
   * partition is held (what is fetched then is dropped).
   */
  from: bigint | 'log-start' | null;
}

/** What a fetched record weighs, for the byte bounds: its key and value. */
function bytesOf(m: RawMessage): number {
  return (m.value?.length ?? 0) + (m.key?.length ?? 0);
}

/** The queues of the assigned partitions of one topic, in round-robin order. */
export class FetchQueues {
  private readonly queues = new Map<number, Queue>();
  /** Records, and their bytes, held in the queues. */
  queued = 0;
  queuedBytes = 0;

  constructor(
    private readonly topic: string,
    private readonly maxBatchSize: number,
  ) {}

  get(partition: number): Queue | undefined {
    return this.queues.get(partition);
  }

  has(partition: number): boolean {
    return this.queues.has(partition);
  }

  /** A new, empty queue for the partition, its reading starting at `from`. */
  open(partition: number, from: bigint | 'log-start' | null): void {
    this.queues.set(partition, { messages: [], fetchedAt: [], from });
  }

  delete(partition: number): void {
    this.queues.delete(partition);
  }

  /** The partitions and their queues, live: a partition moved to the back of the line comes again. */
  entries(): IterableIterator<[number, Queue]> {
    return this.queues.entries();
  }

  /** Queues a fetched message of the partition `queue` is for. */
  push(queue: Queue, m: RawMessage, fetchedAt: number): void {
    queue.messages.push(m);
    queue.fetchedAt.push(fetchedAt);
    this.queued++;
    this.queuedBytes += bytesOf(m);
  }

  /**
   * Takes the next batch of a partition's queue (at most maxBatchSize records and MAX_BATCH_BYTES,
   * one record at least; the queue must hold one) and moves the partition to the back of the line.
   * `fetchedAt`: when the batch's last record was fetched.
   */
  take(partition: number, queue: Queue): { records: SourceRecord[]; fetchedAt: number } {
    let n = 0;
    let bytes = 0;
    for (const limit = Math.min(queue.messages.length, this.maxBatchSize); n < limit; n++) {
      const b = bytesOf(queue.messages[n]!);
      if (n > 0 && bytes + b > MAX_BATCH_BYTES) break;
      bytes += b;
    }
    const batch = queue.messages.splice(0, n);
    const fetchedAt = queue.fetchedAt.splice(0, n)[n - 1]!;
    this.queued -= batch.length;
    this.queuedBytes -= bytes;
    // Round robin: the partition goes to the back of the line.
    this.queues.delete(partition);
    this.queues.set(partition, queue);
    // Each record's reading started after the one before it; the first's where the queue's did.
    const records = batch.map((m, i) => sourceRecord(this.topic, partition, m, i === 0 ? (queue.from ?? undefined) : BigInt(batch[i - 1]!.offset) + 1n));
    queue.from = BigInt(batch[n - 1]!.offset) + 1n;
    return { records, fetchedAt };
  }

  /** Drops what the partition's queue holds: what is fetched next waits for a new start. */
  drop(partition: number): void {
    const queue = this.queues.get(partition);
    if (queue === undefined) return;
    this.queued -= queue.messages.length;
    for (const m of queue.messages) this.queuedBytes -= bytesOf(m);
    queue.messages.length = 0;
    queue.fetchedAt.length = 0;
    // What is fetched next does not follow what was handed over: only a new start says where it begins.
    queue.from = null;
  }
}
