/**
 * The Kafka part of the end-to-end latency alone: records produced at a fixed rate (the latency case's
 * producer, each stamped with the wall clock when handed to it) and received through the worker's own
 * consumer (src/kafka/consumer.ts GroupConsumer, its properties), with nothing written anywhere.
 * Latency = the time the batch holding a record is handed over − its stamp; p50/p95/p99/max over the
 * records after the warm-up. The difference with the latency case is what the worker and Cassandra
 * add (bench/README.md, "Latency").
 *
 *   bin/exactlyonce topic create --topic T --partitions 6
 *   node --import tsx bench/kafka-latency.ts --topic T --rate 6000 [--seconds 30] [--warmup 5]
 */
import { encodeEvent } from '../src/jobs/events/event.js';
import { loadConnectionConfig } from '../src/config.js';
import { producePaced } from '../src/harness/paced-producer.js';
import { GroupConsumer } from '../src/kafka/consumer.js';
import { Producer, type OutgoingRecord } from '../src/kafka/producer.js';
import { defaultRunnerOptions } from '../src/engine/runner.js';

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : d;
};
const topic = arg('topic', '');
if (topic === '') throw new Error('--topic is required (an empty topic)');
const rate = Number(arg('rate', '6000'));
const seconds = Number(arg('seconds', '30'));
const warmup = Number(arg('warmup', '5'));
const partitions = Number(arg('partitions', '6'));
const config = loadConnectionConfig({ brokers: arg('brokers', 'localhost:9092'), topic, group: `kafka-latency-${process.pid}` });

const latencies: number[] = [];
let measureFrom = Number.POSITIVE_INFINITY;
const o = defaultRunnerOptions;
const consumer = new GroupConsumer(config, {
  groupId: config.group,
  topic,
  maxBatchSize: o.maxBatchSize,
  concurrency: o.concurrency,
  maxBufferKb: o.maxBufferKb,
  sessionTimeoutMs: o.sessionTimeoutMs,
  metadataRefreshMs: o.metadataRefreshMs,
});
let assigned: () => void = () => undefined;
const ready = new Promise<void>((resolve) => (assigned = resolve));
await consumer.start(
  {
    onAssign: async (ps) => {
      assigned();
      return new Map(ps.map((p) => [p, 'beginning' as const]));
    },
    onRevoke: () => undefined,
    // A bench process cannot go on without its partitions: it ends, and the bench says so.
    onAssignFailed: (ps, e) => {
      process.stderr.write(`the client could not assign partitions ${ps.join(',')}: ${e.message}\n`);
      process.exit(1);
    },
  },
  async (_partition, records) => {
    const now = Date.now();
    for (const r of records) {
      const ts = Number(/"ts":(\d+)/.exec(r.value!.toString())![1]);
      if (ts >= measureFrom) latencies.push(now - ts);
    }
  },
);
await ready;
const producer = new Producer(config);
await producer.connect();
const started = Date.now();
measureFrom = started + warmup * 1000;
const end = measureFrom + seconds * 1000;
let sent = 0;
const records = function* (): Generator<OutgoingRecord> {
  for (let now = Date.now(); now < end; now = Date.now(), sent++) {
    yield { key: 'c', value: encodeEvent({ id: BigInt(sent), ts: now, source: 'My Router', client: 'c', health: 1 }), partition: sent % partitions };
  }
};
await producePaced(producer, records(), { topic, rate, chunk: 1000, inFlight: 64 });
await new Promise((r) => setTimeout(r, 3000));
await producer.close();
await consumer.stop();
latencies.sort((a, b) => a - b);
const q = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((latencies.length * p) / 100))];
process.stdout.write(
  `Kafka only, ${rate}/s for ${seconds} s (after ${warmup} s): ${latencies.length} records, p50 ${q(50)} ms, p95 ${q(95)} ms, p99 ${q(99)} ms, max ${latencies[latencies.length - 1]} ms\n`,
);
process.exit(0);
