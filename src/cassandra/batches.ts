/**
 * How the jobs cut their rows into unlogged batches. Every batch holds one Cassandra partition (the
 * rows of one Kafka partition), so it is one mutation, applied atomically, which Cassandra's batch size
 * thresholds do not limit (they apply to batches of several partitions, CASSANDRA-10876).
 */

/**
 * Rows per batch. Fewer, larger batches cost less per row: for the events job 1,000 rows per batch
 * take about a third less of Cassandra's CPU per row than 100, and ~10 % less of the worker's; 500 and
 * 2,000 are as good within the noise (bench/README.md, "Rows per batch"). 1,000 keeps a mutation near
 * 80 KB, and the sink's log mode gains from it too (bench/sink-throughput.ts).
 */
export const ROWS_PER_BATCH = 1000;

/**
 * Bytes of rows after which a batch is cut even before ROWS_PER_BATCH: long rows would otherwise make
 * mutations of many MiB, beyond what a Cassandra with a small commit log segment accepts (a mutation
 * may take at most half a segment).
 */
export const BATCH_BYTES = 1 << 20;

/**
 * Consecutive runs of `items`, each of at most `maxRows` items and at most `maxBytes` by `bytesOf`
 * (an item larger than that alone makes a run of one).
 */
export function cutBatches<T>(items: readonly T[], maxRows: number, maxBytes: number, bytesOf: (item: T) => number): T[][] {
  const batches: T[][] = [];
  let batch: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = bytesOf(item);
    if (batch.length > 0 && (batch.length >= maxRows || bytes + size > maxBytes)) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}
