/**
 * The Runner owns a worker's loop: it joins the consumer group, reads each newly assigned partition's
 * checkpoint back from Cassandra before anything is fetched, hands each batch to that partition's
 * PartitionTask, and shuts down cleanly. It knows partitions, offsets and checkpoints, nothing about
 * what the records mean: that is the Job's.
 */
import { connect, isRetriableCassandraError, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { kafkaUnavailable } from '../kafka/client.js';
import { GroupConsumer, type StartOffset } from '../kafka/consumer.js';
import { Producer } from '../kafka/producer.js';
import type { Logger } from '../log.js';
import { CheckpointStore } from './checkpoint-store.js';
import type { Job } from './job.js';
import { EngineMetrics } from './metrics.js';
import { outOfRange, PartitionTask, type TaskContext } from './partition-task.js';
import { DEFAULT_MAX_RAW_BYTES, Quarantine } from './quarantine.js';
import { retry } from './retry.js';

/** librdkafka's wording when it cannot reach the brokers (ERR__ALL_BROKERS_DOWN, ERR__TRANSPORT). */
const KAFKA_DOWN = /all broker connections are down|connection refused|broker transport failure/i;

export interface RunnerOptions {
  /** Most records per batch (default 2000). */
  maxBatchSize: number;
  /** Partitions processed concurrently (default 8). */
  concurrency: number;
  /**
   * Prefetch bound in KiB: memory stays bounded however far behind the worker is (default 8192; the
   * prefetched records are held as JavaScript objects several times this size).
   */
  maxBufferKb: number;
  /** Group session timeout in ms: how long a silent worker keeps its partitions (default 10000). */
  sessionTimeoutMs: number;
  /** New partitions of the topic are discovered within this many ms (default 10000). */
  metadataRefreshMs: number;
  /** Raw bytes kept per quarantined record (default 16 KiB). */
  maxQuarantineBytes: number;
  /** How long start-up waits for Kafka and Cassandra before giving up, in ms (default 60000). */
  startupTimeoutMs: number;
}

export const defaultRunnerOptions: RunnerOptions = {
  maxBatchSize: 2000,
  concurrency: 8,
  maxBufferKb: 8 * 1024,
  sessionTimeoutMs: 10_000,
  metadataRefreshMs: 10_000,
  maxQuarantineBytes: DEFAULT_MAX_RAW_BYTES,
  startupTimeoutMs: 60_000,
};

export class Runner {
  readonly metrics: EngineMetrics;
  private readonly tasks = new Map<number, PartitionTask>();
  private readonly abort = new AbortController();
  private session: Client | undefined;
  private admin: KafkaAdmin | undefined;
  private consumer: GroupConsumer | undefined;
  private producer: Producer | undefined;
  private closing: Promise<void> | undefined;
  /** When the Kafka client last reported all brokers unreachable (cleared by the next batch). */
  private kafkaDownSince: number | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly job: Job<unknown>,
    private readonly log: Logger,
    private readonly options: RunnerOptions = defaultRunnerOptions,
    metrics?: EngineMetrics,
  ) {
    this.metrics = metrics ?? new EngineMetrics();
  }

  /** Partitions owned now, with their state and next offset (for status output and tests). */
  partitions(): Array<{ partition: number; state: string; next: bigint | null }> {
    return [...this.tasks.values()].map((t) => ({ partition: t.partition, ...t.status }));
  }

  private retrying<T>(server: 'Cassandra' | 'Kafka', fn: () => Promise<T>, deadlineMs?: number): Promise<T> {
    return retry(fn, {
      server,
      signal: this.abort.signal,
      log: this.log,
      deadlineMs,
      isRetriable: (e) =>
        server === 'Cassandra'
          ? isRetriableCassandraError(e) || isExactlyOnceError(e, 'EO_CASSANDRA_UNAVAILABLE')
          : isExactlyOnceError(e, 'EO_KAFKA_UNAVAILABLE') || isExactlyOnceError(e, 'EO_PRODUCE_FAILED'),
      onRetry: (e) => this.metrics.retried(server, e),
    });
  }

  /** Connects, joins the group and starts consuming; resolves once running. */
  async start(): Promise<void> {
    const { config, options } = this;
    const admin = new KafkaAdmin(config);
    this.admin = admin;
    // The input topic and every topic the job publishes to must exist: the stack does not create
    // topics on first use, and a publish to a missing topic would stall every batch.
    const topics = [config.topic, ...(this.job.outputTopics ?? [])];
    const counts = await this.retrying('Kafka', () => Promise.all(topics.map((t) => admin.partitionCount(t))), options.startupTimeoutMs);
    const missing = counts.indexOf(null);
    if (missing >= 0) {
      const what = missing === 0 ? 'topic' : 'output topic';
      throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `${what} ${topics[missing]} does not exist at ${config.brokers.join(',')}; run \`exactlyonce topic create\``);
    }
    const partitions = counts[0]!;
    this.session = await this.retrying('Cassandra', () => connect(config, { keyspace: config.keyspace }), options.startupTimeoutMs);
    const session = this.session;
    await this.job.open({
      session,
      keyspace: config.keyspace,
      publish: (topic, records) => {
        this.producer ??= new Producer(config);
        const producer = this.producer;
        return this.retrying('Kafka', () => producer.send(topic, records));
      },
    });
    const checkpoints = new CheckpointStore(session, config.keyspace, config.topic);
    const ctx: TaskContext = {
      job: this.job,
      checkpoints,
      quarantine: new Quarantine(session, config.keyspace, options.maxQuarantineBytes),
      metrics: this.metrics,
      log: this.log,
      withRetry: (fn) => this.retrying('Cassandra', fn),
      logStart: async (p) => (await admin.watermarks(config.topic)).find((w) => w.partition === p)?.low ?? 0n,
    };

    const newConsumer = () => new GroupConsumer(config, {
      groupId: config.group,
      topic: config.topic,
      maxBatchSize: options.maxBatchSize,
      concurrency: options.concurrency,
      maxBufferKb: options.maxBufferKb,
      sessionTimeoutMs: options.sessionTimeoutMs,
      metadataRefreshMs: options.metadataRefreshMs,
      onClientLog: (level, message) => {
        if (level === 'error') this.metrics.errors.inc({ server: 'Kafka', error: 'client' });
        this.log.debug({ kafka: level }, message);
        // The client reconnects by itself; we only say, once, that the brokers stopped answering.
        if (level === 'error' && KAFKA_DOWN.test(message) && this.kafkaDownSince === undefined) {
          this.kafkaDownSince = Date.now();
          this.log.warn({ server: 'Kafka', err: message }, `Kafka at ${config.brokers.join(',')} is not answering; reconnecting, no record is skipped`);
        }
      },
    });
    const startConsumer = (consumer: GroupConsumer) => consumer.start(
      {
        onAssign: async (assigned) => {
          this.metrics.rebalanced('assign');
          const starts = new Map<number, StartOffset>();
          if (assigned.length === 0) return starts;
          // Read back where each partition stands; retried until Cassandra answers, because
          // proceeding without the checkpoint could only replay from the start or skip.
          const stored = await this.retrying('Cassandra', () => checkpoints.readAll());
          const marks = await this.retrying('Kafka', () => admin.watermarks(config.topic));
          for (const p of assigned) {
            const checkpoint = stored.get(p) ?? null;
            const w = marks.find((m) => m.partition === p);
            const task = new PartitionTask(p, checkpoint, ctx);
            this.tasks.set(p, task);
            if (checkpoint !== null && w !== undefined && checkpoint > w.high) {
              task.stop(outOfRange(p, checkpoint, 'beyond', w.high));
            } else if (checkpoint !== null && w !== undefined && checkpoint < w.low) {
              task.stop(outOfRange(p, checkpoint, 'below', w.low));
            }
            starts.set(p, task.status.state === 'stopped' ? 'stopped' : (checkpoint ?? 'beginning'));
            this.metrics.partitionAssigned(p, checkpoint, w);
          }
          this.metrics.assignments.inc(assigned.length);
          this.metrics.assigned.set(this.tasks.size);
          this.log.info(
            { assigned: Object.fromEntries([...starts].map(([p, s]) => [p, String(s)])) },
            `assigned partitions ${assigned.join(',')}; resuming from the stored checkpoints`,
          );
          return starts;
        },
        onRevoke: (revoked, lost) => {
          this.metrics.rebalanced(lost ? 'lost' : 'revoke');
          for (const p of revoked) {
            this.tasks.get(p)?.revoke();
            this.tasks.delete(p);
            this.metrics.partitionRevoked(p);
          }
          this.metrics.revocations.inc(revoked.length);
          this.metrics.assigned.set(this.tasks.size);
          this.log.info({ revoked, lost }, `${lost ? 'lost' : 'revoked'} partitions ${revoked.join(',')}`);
        },
      },
      async (partition, records) => {
        if (this.kafkaDownSince !== undefined) {
          this.log.info({ server: 'Kafka', downMs: Date.now() - this.kafkaDownSince }, 'Kafka answers again');
          this.kafkaDownSince = undefined;
        }
        const task = this.tasks.get(partition);
        if (task === undefined) return; // not ours any more; nothing is checkpointed
        // On shutdown a batch still retrying rejects with AbortedError: it is abandoned before its
        // checkpoint, so the next owner reads it again.
        await task.process(records);
        if (task.status.state === 'stopped') this.consumer?.pause([partition]);
      },
    );
    // Joining needs the brokers: retried like every other Kafka call, each attempt with a new client
    // (a client whose connect failed cannot connect again).
    await this.retrying(
      'Kafka',
      async () => {
        const consumer = newConsumer();
        this.consumer = consumer;
        try {
          await startConsumer(consumer);
        } catch (e) {
          await consumer.stop();
          throw isExactlyOnceError(e) ? e : kafkaUnavailable(config, e);
        }
      },
      options.startupTimeoutMs,
    );
    this.metrics.watchLogEnds(() => admin.watermarks(config.topic), this.log);
    this.log.info({ topic: config.topic, group: config.group, partitions }, 'worker started');
  }

  /**
   * Stops fetching, abandons batches still retrying (their checkpoints are not written, so they are
   * simply read again by the next owner), leaves the group and closes the sessions. Idempotent.
   */
  stop(): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort();
      this.metrics.close();
      await this.consumer?.stop();
      await this.producer?.close();
      await this.admin?.close();
      await this.session?.shutdown().catch(() => undefined);
      this.log.info('worker stopped');
    })();
    return this.closing;
  }
}
