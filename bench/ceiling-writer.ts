/**
 * The ceiling, run as its own process by bench/ceiling.ts: the rows the consumers store, written to
 * Cassandra from a tight loop with the same driver and session settings (src/cassandra/session.ts) and
 * the same statement shape and encoding as EventJob (unlogged batches of INSERTs, one Kafka partition
 * per batch, LOCAL_QUORUM, rows pre-encoded: insertRows), with no Kafka and no decoding in the timed
 * part: the batches are built first.
 *
 * It first sweeps the number of batches in flight on a slice of the rows (into a scratch keyspace),
 * then writes all the rows into the case's keyspace at the fastest level. Argument: one JSON object
 * (CeilingArgs). Prints JSON lines: {"sweep": …} per level, {"stored": n} while writing, {"result": …}.
 */
import { insertRouting, insertRows, insertStatement } from '../src/jobs/events/event-job.js';
import type { Event } from '../src/jobs/events/event.js';
import { ORIGINAL_LAYOUT } from '../src/jobs/events/events-layout.js';
import { BatchRows } from '../src/cassandra/batch-rows.js';
import { PreparedBatch, type PreparedInfo } from '../src/cassandra/prepared-batch.js';
import { consistencies, connect, type Client } from '../src/cassandra/session.js';
import type { DecodedRecord } from '../src/engine/job.js';
import type { ConnectionConfig } from '../src/config.js';
import { workloadRows, type Workload } from './workload.js';

export interface CeilingArgs {
  config: ConnectionConfig;
  /** Keyspace of the sweep's writes (the measured run writes into config.keyspace). */
  sweepKeyspace: string;
  workload: Workload;
  concurrency: number[];
  sweepEvents: number;
  batchRows: number;
}

/** One batch of the ceiling: its statement, its rows already encoded, and its routing values. */
type Batch = { insert: PreparedBatch; info: PreparedInfo; rows: BatchRows; routing: unknown[] };

// Set by startScript (bench/processes.ts): the arguments hold the connection's secrets, so not on argv.
const args = JSON.parse(process.env['EXACTLYONCE_BENCH_ARGS'] ?? '{}') as CeilingArgs;
const emit = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);

/**
 * The workload's rows as batches of `batchRows` consecutive offsets of one partition, partitions
 * interleaved, each encoded as EventJob encodes its batches (insertRows, src/cassandra/prepared-batch.ts).
 */
async function buildBatches(session: Client, keyspace: string): Promise<Batch[]> {
  const { query, values } = insertStatement(keyspace, ORIGINAL_LAYOUT);
  const insert = new PreparedBatch(session, query, consistencies.localQuorum);
  const info = await insert.prepared();
  const perPartition: Array<Array<Array<DecodedRecord<Event>>>> = Array.from({ length: args.workload.partitions }, () => [[]]);
  for (const { partition, offset, event } of workloadRows(args.workload)) {
    const chunks = perPartition[partition]!;
    let last = chunks[chunks.length - 1]!;
    if (last.length === args.batchRows) chunks.push((last = []));
    last.push({ record: { topic: '', partition, offset, key: null, value: null, timestampMs: 0 }, value: event });
  }
  const batches: Batch[] = [];
  for (let i = 0; perPartition.some((c) => i < c.length); i++) {
    perPartition.forEach((chunks, partition) => {
      const chunk = chunks[i];
      if (chunk === undefined || chunk.length === 0) return;
      const rows = new BatchRows(info.queryId, values, 80, chunk.length);
      insertRows(rows, partition, chunk, 0, chunk.length);
      batches.push({ insert, info, rows, routing: insertRouting(partition) });
    });
  }
  return batches;
}

/** Writes the batches with `concurrency` in flight; returns rows per second. */
async function write(batches: Batch[], concurrency: number, onProgress?: (rows: number) => void): Promise<number> {
  let next = 0;
  let rows = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < batches.length) {
      const b = batches[next++]!;
      await b.insert.send(b.info, b.rows, b.routing);
      rows += b.rows.count;
      onProgress?.(rows);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, batches.length) }, lane));
  return rows / Math.max(1e-6, (performance.now() - started) / 1000);
}

function sliceRows(batches: Batch[], rows: number): Batch[] {
  const out: Batch[] = [];
  for (let n = 0, i = 0; n < rows && i < batches.length; i++) {
    out.push(batches[i]!);
    n += batches[i]!.rows.count;
  }
  return out;
}

const session = await connect(args.config);
try {
  const scratch = await buildBatches(session, args.sweepKeyspace);
  const final = await buildBatches(session, args.config.keyspace);
  // Warm up: prepare the statement, open the connections, let V8 compile the hot path.
  await write(sliceRows(scratch, Math.min(5000, args.workload.events)), 16);
  let best = { concurrency: args.concurrency[0]!, eventsPerSec: 0 };
  const sweepSlice = sliceRows(scratch, args.sweepEvents);
  if (args.concurrency.length > 1) {
    for (const concurrency of args.concurrency) {
      // A level the server cannot keep up with (its writes time out) is a level not to use, not the end.
      const eventsPerSec = await write(sweepSlice, concurrency).catch((e: unknown) => {
        emit({ sweep: { concurrency, eventsPerSec: 0, error: String((e as Error).message).split('\n')[0] } });
        return 0;
      });
      if (eventsPerSec > 0) emit({ sweep: { concurrency, eventsPerSec } });
      if (eventsPerSec > best.eventsPerSec) best = { concurrency, eventsPerSec };
    }
  }
  let lastReport = 0;
  const cpu = process.cpuUsage();
  const eventsPerSec = await write(final, best.concurrency, (rows) => {
    if (Date.now() - lastReport >= 100) {
      lastReport = Date.now();
      emit({ stored: rows });
    }
  });
  const used = process.cpuUsage(cpu);
  emit({ result: { concurrency: best.concurrency, eventsPerSec, cpuSeconds: (used.user + used.system) / 1e6 } });
} finally {
  await session.shutdown();
}
