/**
 * The events every throughput case reads: the original generator's records (3 clients, source
 * "My Router"; the health mix is an option), seeded, with a deterministic event time, sent round-robin over the
 * partitions so that every partition gets the same share (keyed by client alone, 3 clients would fill
 * only 3 of 6 partitions; the throughput cases' topic keys them by number instead, for the upsert sink).
 * Record i lands in partition i mod P at offset ⌊i / P⌋ of a fresh topic, so
 * the ceiling can rebuild exactly the rows the consumers store without reading Kafka.
 */
import { decodeEvent, type Event } from '../src/jobs/events/event.js';
import { generate, type GeneratorOptions } from '../src/jobs/events/generator.js';
import type { ConnectionConfig } from '../src/config.js';
import { producePaced } from '../src/harness/paced-producer.js';
import { Producer, type OutgoingRecord } from '../src/kafka/producer.js';
import { BenchAborted, bounded, type BenchContext } from './context.js';

export interface Workload {
  events: number;
  partitions: number;
  seed: number;
  /** Event time of the first record, epoch ms. */
  baseTs: number;
  /** Records per second of event time: record i has ts = baseTs + ⌊i · 1000 / eventTimeRate⌋. */
  eventTimeRate: number;
  /** Relative weights of health 0, 1, 2 (the original generator: all Critical). */
  healthMix: readonly [number, number, number];
  /**
   * Record keys: record i is keyed by the number i mod K, K the smallest multiple of the partitions at
   * or above this, so that a key's records all land on one partition (i mod P = (i mod K) mod P); the
   * upsert sink's rows. Absent: keyed by client, as the generator keys them.
   */
  keys?: number;
}

/** Records per send, and sends in flight, while pre-producing. */
const CHUNK = 2000;
const IN_FLIGHT = 8;

function generatorOptions(w: Workload): GeneratorOptions {
  let i = 0;
  return {
    eventsPerKey: 0,
    count: w.events,
    clients: 3,
    sources: 1,
    healthMix: w.healthMix,
    badRatio: 0,
    seed: w.seed,
    now: () => w.baseTs + Math.floor((i++ * 1000) / w.eventTimeRate),
  };
}

/** The workload's records in send order, with their partition. */
export function* workloadRecords(w: Workload): Generator<OutgoingRecord & { partition: number }> {
  let i = 0;
  const keys = w.keys === undefined ? undefined : Math.ceil(w.keys / w.partitions) * w.partitions;
  for (const r of generate(generatorOptions(w))) {
    yield { key: keys === undefined ? r.key : String(i % keys), value: r.value, partition: i % w.partitions };
    i++;
  }
}

/** The rows the consumers store for the workload: (partition, offset, event), as EventJob writes them. */
export function* workloadRows(w: Workload): Generator<{ partition: number; offset: bigint; event: Event }> {
  let i = 0;
  for (const r of workloadRecords(w)) {
    const d = decodeEvent(r.value as Buffer);
    if (!d.ok) throw new Error(`generated record ${i} does not decode: ${d.reason}`);
    yield { partition: r.partition, offset: BigInt(Math.floor(i / w.partitions)), event: d.value };
    i++;
  }
}

/** Sends the workload to the config's topic (idempotent producer, the project's own). Returns events/s. */
export async function produceWorkload(ctx: BenchContext, config: ConnectionConfig, w: Workload, label: string): Promise<number> {
  const producer = new Producer(config, { 'linger.ms': 20 });
  await producer.connect();
  const started = Date.now();
  try {
    await producePaced(producer, workloadRecords(w), {
      topic: config.topic,
      chunk: CHUNK,
      inFlight: IN_FLIGHT,
      signal: ctx.signal,
      onAcked: (sent) => ctx.status(`${label}: produced ${sent}/${w.events} (${Math.round(sent / Math.max(0.001, (Date.now() - started) / 1000))}/s)`),
    });
    if (ctx.signal.aborted) throw new BenchAborted();
  } finally {
    // Closing flushes; it must not hang the run when Kafka went away.
    await bounded(producer.close(), 30_000, 'closing the producer', new AbortController().signal).catch(() => undefined);
  }
  return w.events / Math.max(0.001, (Date.now() - started) / 1000);
}
