/**
 * How both auditors read the topic: `lanes` Kafka readers, each taking the next partition when done
 * with its last one. The audit waits on Kafka and Cassandra more than it computes, so several
 * partitions in flight keep the process busy (`verify --lanes`).
 */
import type { ConnectionConfig } from '../config.js';
import { LogReader } from '../kafka/log-reader.js';

/**
 * Opens `lanes` readers (at least one, at most one per item with work: an incremental run with new
 * records on few partitions opens few), at once, runs `use`, and closes them whatever happens.
 */
export async function withReaders<R>(config: ConnectionConfig, lanes: number, items: number, use: (readers: readonly LogReader[]) => Promise<R>): Promise<R> {
  const opened = await Promise.allSettled(Array.from({ length: Math.max(1, Math.min(lanes, items)) }, () => LogReader.open(config)));
  const readers = opened.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  try {
    const failed = opened.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    return await use(readers);
  } finally {
    await Promise.all(readers.map((r) => r.close()));
  }
}

/** Runs `fn` for every item, one lane per reader, each lane taking the next item when its last is done. */
export async function inLanes<T>(readers: readonly LogReader[], items: readonly T[], fn: (reader: LogReader, item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    readers.map(async (reader) => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await fn(reader, item);
    }),
  );
}
