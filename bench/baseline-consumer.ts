/**
 * The baseline, run as its own process by bench/baseline.ts: an at-least-once consumer written as a
 * good engineer would, so that the exactly-once machinery is the only difference from `exactlyonce run`:
 *
 * - the same Kafka client and properties (src/kafka/client.ts; cooperative-sticky, the same batch size,
 *   partitions processed concurrently, prefetch bound and session timeout as src/kafka/consumer.ts);
 * - the same record conversion, codec and writes: EventJob itself, i.e. its decode, its unlogged,
 *   single-partition batches of INSERTs into the same `events` table at the same write concurrency,
 *   and the alerts it derives (index rows, recounts, alert rows and messages);
 * - but Kafka's auto-commit (offsets committed in the background every 5 s, so a crash replays up to
 *   5 s of records: at-least-once), and no checkpoint, no checkpoint read on assignment, no fencing,
 *   no quarantine (undecodable records are skipped), no metrics.
 *
 * Argument: one JSON object { config, maxBatch, concurrency, maxBufferKb, sessionTimeoutMs }. Prints
 * `{"t": epochMs, "stored": n}` every 100 ms on stdout; stops cleanly on SIGTERM.
 */
import { EventJob } from '../src/app/event-job.js';
import type { Event } from '../src/app/event.js';
import { connect } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import type { DecodedRecord } from '../src/engine/job.js';
import { baseProperties, kafkaJS, quietLogger, type KafkaJSNamespace } from '../src/kafka/client.js';
import { FETCH_QUEUE_BACKOFF_MS, JS_CACHE_MS, sourceRecord } from '../src/kafka/consumer.js';
import { Producer } from '../src/kafka/producer.js';

export interface BaselineArgs {
  config: ConnectionConfig;
  maxBatch: number;
  concurrency: number;
  maxBufferKb: number;
  sessionTimeoutMs: number;
}

// Set by startScript (bench/processes.ts): the arguments hold the connection's secrets, so not on argv.
const args = JSON.parse(process.env['EXACTLYONCE_BENCH_ARGS'] ?? '{}') as BaselineArgs;
const { config } = args;
const topic = config.topic;

const session = await connect(config, { keyspace: config.keyspace });
// The same job as `exactlyonce run` (events rows and the alerts it derives), publishing its alerts with
// the project's producer like the Runner does, but without retries: a failure fails the batch.
const job = new EventJob({ alertsTopic: config.alertsTopic });
const producer = new Producer(config);
await producer.connect();
await job.open({ session, keyspace: config.keyspace, publish: (t, records) => producer.send(t, records) });

const { Kafka } = kafkaJS();
const consumer = new Kafka({}).consumer({
  kafkaJS: { logger: quietLogger(() => undefined) },
  'fetch.queue.backoff.ms': FETCH_QUEUE_BACKOFF_MS,
  ...baseProperties(config, `exactlyonce-baseline-${process.pid}`),
  'group.id': config.group,
  'partition.assignment.strategy': 'cooperative-sticky',
  'enable.auto.commit': true,
  'auto.offset.reset': 'earliest',
  'session.timeout.ms': args.sessionTimeoutMs,
  'heartbeat.interval.ms': Math.max(500, Math.floor(args.sessionTimeoutMs / 5)),
  'queued.max.messages.kbytes': args.maxBufferKb,
  'fetch.max.bytes': Math.min(52428800, Math.max(1048576, args.maxBufferKb * 1024)),
  'js.consumer.max.batch.size': args.maxBatch,
  'js.consumer.max.cache.size.per.worker.ms': JS_CACHE_MS,
} as unknown as KafkaJSNamespace.ConsumerConstructorConfig);

let stored = 0;
const report = () => process.stdout.write(`${JSON.stringify({ t: Date.now(), stored })}\n`);
const timer = setInterval(report, 100);

await consumer.connect();
await consumer.subscribe({ topics: [topic] });
await consumer.run({
  partitionsConsumedConcurrently: args.concurrency,
  eachBatch: async ({ batch }) => {
    const decoded: DecodedRecord<Event>[] = [];
    for (const m of batch.messages) {
      const record = sourceRecord(topic, batch.partition, m);
      const d = job.decode(record);
      if (d.ok) decoded.push({ record, value: d.value });
    }
    // A failed write throws: the client seeks back and delivers the batch again (at-least-once).
    if (decoded.length > 0) await job.write(batch.partition, decoded);
    stored += batch.messages.length;
  },
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

process.once('SIGTERM', () => {
  clearInterval(timer);
  report();
  void consumer
    .disconnect()
    .catch(() => undefined)
    .then(() => producer.close())
    .then(() => session.shutdown())
    .finally(() => process.exit(0));
});
