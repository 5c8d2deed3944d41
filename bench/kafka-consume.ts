/**
 * What the Kafka client alone costs per record: a topic read from its start and thrown away, through
 * the client's KafkaJS-compatible layer (`eachBatch`, the worker's path until 2acee8e) and through its
 * lower-level API (`KafkaConsumer.consume(n)` in a loop: librdkafka's messages converted to JavaScript
 * objects, nothing more; what the worker's fetch loop in src/kafka/consumer.ts calls). CPU ms per 1,000 records of this process, and the
 * rate; the floor under the worker's own figure (bench/README.md, "Where the worker's CPU goes").
 *
 *   node --import tsx bench/kafka-consume.ts --topic T [--brokers localhost:9092] [--records N]
 */
import { createRequire } from 'node:module';
import type { ConnectionConfig } from '../src/config.js';
import { FETCH_QUEUE_BACKOFF_MS } from '../src/kafka/native-consumer.js';
import { baseProperties, kafkaJS, quietLogger } from '../src/kafka/client.js';

/** Started by the bench (bench/client.ts): its arguments as JSON in EXACTLYONCE_BENCH_ARGS, one JSON line per mode on stdout. */
export interface ClientArgs {
  config: ConnectionConfig;
  records: number;
  mode: 'kafkajs' | 'consume' | 'both';
  /** The workers' batching: records per batch, partitions at once, prefetch bound in KiB. */
  maxBatch: number;
  concurrency: number;
  maxBufferKb: number;
}
const benchArgs = process.env['EXACTLYONCE_BENCH_ARGS'] === undefined ? undefined : (JSON.parse(process.env['EXACTLYONCE_BENCH_ARGS']) as ClientArgs);

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : d;
};
const topic = benchArgs?.config.topic ?? arg('topic', '');
const records = benchArgs?.records ?? Number(arg('records', '300000'));
const mode = benchArgs?.mode ?? arg('mode', 'both');
if (topic === '') throw new Error('--topic is required');

/**
 * The KafkaJS-style layer's JavaScript message cache: this many ms of consumption per partition worker
 * at the rate it measures, times the concurrency, rounded up to a multiple of max batch x concurrency
 * (lib/kafkajs/_consumer.js #updateMaxMessageCacheSize). With its default, 1,500 ms, a fast consumer
 * fetched ~240,000 records into the heap in one call; at 1 ms the rounding is the bound, as the
 * worker's own fetch loop bounds it (src/kafka/consumer.ts).
 */
const JS_CACHE_MS = 1;

const common = {
  ...(benchArgs === undefined ? { 'bootstrap.servers': arg('brokers', 'localhost:9092') } : baseProperties(benchArgs.config, `kafka-consume-${process.pid}`)),
  'fetch.queue.backoff.ms': FETCH_QUEUE_BACKOFF_MS,
  'queued.max.messages.kbytes': benchArgs?.maxBufferKb ?? 8192,
  'fetch.max.bytes': 8 * 1024 * 1024,
  'enable.auto.commit': false,
  'auto.offset.reset': 'earliest',
};

/** CPU ms per 1,000 records and records/s, from the first record to the `records`-th. */
function measure(label: string) {
  let start: { t: number; cpu: NodeJS.CpuUsage } | undefined;
  let n = 0;
  return {
    add(k: number): boolean {
      if (start === undefined) start = { t: performance.now(), cpu: process.cpuUsage() };
      n += k;
      if (n < records) return false;
      const cpu = process.cpuUsage(start.cpu);
      const s = (performance.now() - start.t) / 1000;
      const cpuMs = (cpu.user + cpu.system) / 1000;
      if (benchArgs !== undefined) process.stdout.write(`${JSON.stringify({ label, records: n, cpuMs, seconds: s })}\n`);
      else process.stdout.write(`${label.padEnd(34)} ${n} records  ${((cpuMs / n) * 1000).toFixed(1).padStart(6)} CPU ms/1k  ${Math.round(n / s)} records/s\n`);
      return true;
    },
  };
}

async function viaKafkaJS(): Promise<void> {
  const { Kafka } = kafkaJS();
  const consumer = new Kafka({}).consumer({
    kafkaJS: { logger: quietLogger(() => undefined) },
    ...common,
    'group.id': `kafka-consume-${process.pid}-kjs`,
    'js.consumer.max.batch.size': benchArgs?.maxBatch ?? 2000,
    'js.consumer.max.cache.size.per.worker.ms': JS_CACHE_MS,
  } as never);
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  const m = measure('KafkaJS layer, eachBatch');
  await new Promise<void>((resolve) => {
    void consumer.run({
      partitionsConsumedConcurrently: benchArgs?.concurrency ?? 8,
      eachBatch: async ({ batch }) => {
        if (m.add(batch.messages.length)) resolve();
      },
    });
  });
  await consumer.disconnect();
}

async function viaConsume(): Promise<void> {
  const require = createRequire(import.meta.url);
  const { KafkaConsumer } = require('@confluentinc/kafka-javascript') as { KafkaConsumer: new (c: object, t: object) => any };
  const { 'auto.offset.reset': reset, ...global } = common;
  const consumer = new KafkaConsumer({ ...global, 'group.id': `kafka-consume-${process.pid}-low` }, { 'auto.offset.reset': reset });
  const m = measure(`lower-level consume(${benchArgs?.maxBatch ?? 2000})`);
  await new Promise<void>((resolve, reject) => {
    consumer.on('ready', () => {
      consumer.subscribe([topic]);
      const next = () =>
        consumer.consume(benchArgs?.maxBatch ?? 2000, (e: unknown, messages: unknown[]) => {
          if (e) return reject(e);
          if (messages.length > 0 && m.add(messages.length)) return resolve();
          next();
        });
      next();
    });
    consumer.connect();
  });
  await new Promise<void>((resolve) => consumer.disconnect(() => resolve()));
}

if (mode === 'both' || mode === 'kafkajs') await viaKafkaJS();
if (mode === 'both' || mode === 'consume') await viaConsume();
process.exit(0);
