/**
 * The baseline, run as its own process by bench/baseline.ts: an at-least-once consumer written as a
 * good engineer would, so that the exactly-once machinery is the only difference from `exactlyonce run`:
 *
 * - the same Kafka consumer: src/kafka/consumer.ts's GroupConsumer itself (its client, properties,
 *   fetch loop, batch size, partitions processed concurrently, prefetch bound and session timeout);
 * - the same record conversion, codec and writes: EventJob itself, i.e. its decode, its unlogged,
 *   single-partition batches of INSERTs into the same `events` table at the same write concurrency,
 *   and the alerts it derives (index rows, recounts, alert rows and messages);
 * - but no resume point at all: every partition starts at the log start, as a fresh group would with
 *   Kafka's committed offsets (the bench's topic is read once, so committing would change nothing
 *   measured; a restart reads everything again: at-least-once), and no checkpoint, no checkpoint read
 *   on assignment, no fencing, no quarantine (undecodable records are skipped), no metrics.
 *
 * Argument: one JSON object { config, maxBatch, concurrency, maxBufferKb, sessionTimeoutMs }. Prints
 * `{"t": epochMs, "stored": n}` every 100 ms on stdout; stops cleanly on SIGTERM.
 */
import { EventJob } from '../src/jobs/events/event-job.js';
import type { Event } from '../src/jobs/events/event.js';
import { connect } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import type { DecodedRecord } from '../src/engine/job.js';
import { GroupConsumer } from '../src/kafka/consumer.js';
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

// The worker's own consumer (its client, properties, fetch loop and batching), told to start every
// partition at the log start: the bench's topic is read once by a fresh group, which is what Kafka's
// committed offsets would give it too.
const consumer = new GroupConsumer(config, {
  groupId: config.group,
  topic,
  maxBatchSize: args.maxBatch,
  concurrency: args.concurrency,
  maxBufferKb: args.maxBufferKb,
  sessionTimeoutMs: args.sessionTimeoutMs,
  metadataRefreshMs: 300_000,
});

let stored = 0;
const report = () => process.stdout.write(`${JSON.stringify({ t: Date.now(), stored })}\n`);
const timer = setInterval(report, 100);

await consumer.start(
  {
    onAssign: async (partitions) => new Map(partitions.map((p) => [p, 'beginning' as const])),
    onRevoke: () => undefined,
    // A bench process cannot go on without its partitions: it ends, and the bench says so.
    onAssignFailed: (ps, e) => {
      process.stderr.write(`the client could not assign partitions ${ps.join(',')}: ${e.message}\n`);
      process.exit(1);
    },
  },
  async (partition, records) => {
    const decoded: DecodedRecord<Event>[] = [];
    for (const record of records) {
      const d = job.decode(record);
      if (d.ok) decoded.push({ record, value: d.value });
    }
    // A failed write is logged and the batch is lost to this run (at-least-once needs a restart).
    if (decoded.length > 0) await job.write(partition, decoded);
    stored += records.length;
  },
);
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

process.once('SIGTERM', () => {
  clearInterval(timer);
  report();
  void consumer
    .stop()
    .then(() => producer.close())
    .then(() => session.shutdown())
    .finally(() => process.exit(0));
});
