/**
 * The ceiling, run as its own process by bench/ceiling.ts: the rows the consumers store, written to
 * Cassandra from a tight loop with the same driver and session settings (src/cassandra/session.ts) and
 * the same statement shape as EventJob (unlogged batches of INSERTs, one Kafka partition per batch,
 * LOCAL_QUORUM), with no Kafka and no decoding in the timed part: the statements are built first.
 *
 * It first sweeps the number of batches in flight on a slice of the rows (into a scratch keyspace),
 * then writes all the rows into the case's keyspace at the fastest level. Argument: one JSON object
 * (CeilingArgs). Prints JSON lines: {"sweep": …} per level, {"stored": n} while writing, {"result": …}.
 */
import { consistencies, connect, toLong, type Client } from '../src/cassandra/session.js';
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

type Query = { query: string; params: unknown[] };

// Set by startScript (bench/processes.ts): the arguments hold the connection's secrets, so not on argv.
const args = JSON.parse(process.env['EXACTLYONCE_BENCH_ARGS'] ?? '{}') as CeilingArgs;
const emit = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);

/** The workload's rows as batches of `batchRows` consecutive offsets of one partition, partitions interleaved. */
function buildBatches(keyspace: string): Query[][] {
  const insert = `INSERT INTO ${keyspace}.events (id, ts, partition, offset, source, client, health) VALUES (?, ?, ?, ?, ?, ?, ?)`;
  const perPartition: Query[][][] = Array.from({ length: args.workload.partitions }, () => [[]]);
  for (const { partition, offset, event: e } of workloadRows(args.workload)) {
    const chunks = perPartition[partition]!;
    let last = chunks[chunks.length - 1]!;
    if (last.length === args.batchRows) chunks.push((last = []));
    last.push({ query: insert, params: [toLong(e.id), new Date(e.ts), partition, toLong(offset), e.source, e.client, e.health] });
  }
  const batches: Query[][] = [];
  for (let i = 0; perPartition.some((c) => i < c.length); i++) {
    for (const chunks of perPartition) if (i < chunks.length && chunks[i]!.length > 0) batches.push(chunks[i]!);
  }
  return batches;
}

/** Writes the batches with `concurrency` in flight; returns rows per second. */
async function write(session: Client, batches: Query[][], concurrency: number, onProgress?: (rows: number) => void): Promise<number> {
  let next = 0;
  let rows = 0;
  const started = performance.now();
  const lane = async () => {
    while (next < batches.length) {
      const batch = batches[next++]!;
      await session.batch(batch, { prepare: true, logged: false, consistency: consistencies.localQuorum });
      rows += batch.length;
      onProgress?.(rows);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, batches.length) }, lane));
  return rows / Math.max(1e-6, (performance.now() - started) / 1000);
}

function sliceRows(batches: Query[][], rows: number): Query[][] {
  const out: Query[][] = [];
  for (let n = 0, i = 0; n < rows && i < batches.length; i++) {
    out.push(batches[i]!);
    n += batches[i]!.length;
  }
  return out;
}

const session = await connect(args.config);
try {
  const scratch = buildBatches(args.sweepKeyspace);
  const final = buildBatches(args.config.keyspace);
  // Warm up: prepare the statement, open the connections, let V8 compile the hot path.
  await write(session, sliceRows(scratch, Math.min(5000, args.workload.events)), 16);
  let best = { concurrency: args.concurrency[0]!, eventsPerSec: 0 };
  const sweepSlice = sliceRows(scratch, args.sweepEvents);
  if (args.concurrency.length > 1) {
    for (const concurrency of args.concurrency) {
      const eventsPerSec = await write(session, sweepSlice, concurrency);
      emit({ sweep: { concurrency, eventsPerSec } });
      if (eventsPerSec > best.eventsPerSec) best = { concurrency, eventsPerSec };
    }
  }
  let lastReport = 0;
  const cpu = process.cpuUsage();
  const eventsPerSec = await write(session, final, best.concurrency, (rows) => {
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
