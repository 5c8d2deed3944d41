/**
 * The Runner owns a worker's poll loop (Kafka Streams' StreamThread): it joins the consumer group,
 * lets the TaskManager plan each newly assigned partition from its checkpoint before anything is
 * fetched, hands each batch to it, watches that the log still is the one the checkpoints describe, and
 * shuts down cleanly. It knows partitions, offsets and checkpoints, nothing about what the records
 * mean: that is the Job's.
 */
import { connect, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { kafkaUnavailable } from '../kafka/client.js';
import { GroupConsumer } from '../kafka/consumer.js';
import { Producer } from '../kafka/producer.js';
import type { Logger } from '../log.js';
import { AssignmentPlanner } from './assignment-planner.js';
import { CheckpointStore } from './checkpoint-store.js';
import type { Job } from './job.js';
import { JobBinding, settingDifferences, topicRecreated } from './job-binding.js';
import { LagWatcher } from './lag-watcher.js';
import { EngineMetrics } from './metrics.js';
import type { PartitionTask, TaskContext } from './partition-task.js';
import { DEFAULT_MAX_RAW_BYTES, Quarantine } from './quarantine.js';
import { failingServers, isRetriable, retry } from './retry.js';
import { TaskManager } from './task-manager.js';

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
  /** The per-partition checkpoint, log end and lag gauges, and the stall warnings. */
  private readonly lag: LagWatcher;
  /** Which task owns which partition (set once started). */
  private taskManager: TaskManager | undefined;
  private readonly abort = new AbortController();
  private session: Client | undefined;
  private admin: KafkaAdmin | undefined;
  private consumer: GroupConsumer | undefined;
  private producer: Producer | undefined;
  private closing: Promise<void> | undefined;
  /** When the Kafka client last reported all brokers unreachable (cleared by the next batch). */
  private kafkaDownSince: number | undefined;
  /** The input topic's ID the job is bound to (its checkpoints describe that topic, no other). */
  private boundTopicId: string | undefined;
  /** Set once the job's stored settings no longer match this worker's: every partition stops with it. */
  private settingsChanged: ExactlyOnceError | undefined;
  private identityTimer: NodeJS.Timeout | undefined;
  /** Picks up `checkpoints reset` and says which partitions this worker owns (see watchResets). */
  private resetTimer: NodeJS.Timeout | undefined;
  /** Checks the topic's identity and each owned partition's position now (see watchTopicIdentity). */
  private checkPositions: ((clientSaid?: string) => Promise<void>) | undefined;
  /** The Kafka client's last error log line, and when (named by stall warnings while recent). */
  private lastClientError: { message: string; at: number } | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly job: Job<unknown>,
    private readonly log: Logger,
    private readonly options: RunnerOptions = defaultRunnerOptions,
    metrics?: EngineMetrics,
  ) {
    this.metrics = metrics ?? new EngineMetrics();
    this.lag = new LagWatcher(this.metrics);
  }

  /** Partitions owned now, with their state and next offset (for status output and tests). */
  partitions(): Array<{ partition: number; state: string; next: bigint | null }> {
    return [...this.tasks.values()].map((t) => ({ partition: t.partition, ...t.status }));
  }

  private get tasks(): ReadonlyMap<number, PartitionTask> {
    return this.taskManager?.tasks ?? new Map();
  }

  private retrying<T>(server: 'Cassandra' | 'Kafka', fn: () => Promise<T>, deadlineMs?: number): Promise<T> {
    return retry(fn, {
      server,
      signal: this.abort.signal,
      log: this.log,
      deadlineMs,
      isRetriable,
      onRetry: (e) => {
        this.metrics.retries.inc({ server });
        this.metrics.health.failed(server, e);
      },
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
    // What this keyspace serves: bound on the first run, checked on every later one (one input topic,
    // its identity, the output topics, the job's settings).
    const topicId = await this.retrying('Kafka', () => admin.topicId(config.topic), options.startupTimeoutMs);
    if (topicId === null) throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${config.topic} does not exist at ${config.brokers.join(',')}; run \`exactlyonce topic create\``);
    const bound = await this.retrying(
      'Cassandra',
      () => new JobBinding(session, config.keyspace).bind(
        { name: this.job.name, inputTopic: config.topic, outputTopics: this.job.outputTopics ?? [], settings: this.job.settings ?? {} },
        topicId,
      ),
      options.startupTimeoutMs,
    );
    this.boundTopicId = bound.inputTopicId;
    if (bound.inputTopicId !== topicId) this.log.error({ code: 'EO_TOPIC_RECREATED' }, topicRecreated(config.topic, bound.inputTopicId, topicId).message);
    const checkpoints = new CheckpointStore(session, config.keyspace, config.topic);
    const ctx: TaskContext = {
      job: this.job,
      checkpoints,
      quarantine: new Quarantine(session, config.keyspace, options.maxQuarantineBytes),
      metrics: this.metrics,
      lag: this.lag,
      log: this.log,
      withRetry: (fn) => this.retrying('Cassandra', fn),
      logStart: async (p) => (await admin.watermarks(config.topic)).find((w) => w.partition === p)?.low ?? 0n,
      // Why a partition stopped, for `exactlyonce checkpoints list` (informational: a failure is ignored).
      onStop: (p, epoch, error) =>
        void checkpoints.recordStop(p, { code: error.code, message: error.message, epoch, by: this.metrics.workerId }).catch(() => undefined),
    };

    const newConsumer = () => new GroupConsumer(config, {
      groupId: config.group,
      topic: config.topic,
      maxBatchSize: options.maxBatchSize,
      concurrency: options.concurrency,
      maxBufferKb: options.maxBufferKb,
      sessionTimeoutMs: options.sessionTimeoutMs,
      metadataRefreshMs: options.metadataRefreshMs,
      onPositionOutOfRange: (message) => {
        this.lastClientError = { message, at: Date.now() };
        void this.checkPositions?.(message);
      },
      onClientLog: (level, message) => {
        if (level === 'error') {
          this.metrics.errors.inc({ server: 'Kafka', error: 'client' });
          this.lastClientError = { message: message.split('\n')[0]!.slice(0, 300), at: Date.now() };
        }
        this.log.debug({ kafka: level }, message);
        // The client reconnects by itself; we only say, once, that the brokers stopped answering.
        if (level === 'error' && KAFKA_DOWN.test(message) && this.kafkaDownSince === undefined) {
          this.kafkaDownSince = Date.now();
          this.log.warn({ server: 'Kafka', err: message }, `Kafka at ${config.brokers.join(',')} is not answering; reconnecting, no record is skipped`);
        }
      },
    });
    const planner = new AssignmentPlanner({
      topic: config.topic,
      checkpoints,
      admin,
      binding: () => ({ topicId: this.boundTopicId, settingsChanged: this.settingsChanged }),
      retrying: (server, fn) => this.retrying(server, fn),
    });
    const tasks = new TaskManager(ctx, planner, checkpoints, this.metrics, this.log);
    this.taskManager = tasks;
    const startConsumer = (consumer: GroupConsumer) => consumer.start(
      { onAssign: (assigned) => tasks.assign(assigned), onRevoke: (revoked, lost) => tasks.revoke(revoked, lost) },
      async (partition, records) => {
        if (this.kafkaDownSince !== undefined) {
          this.log.info({ server: 'Kafka', downMs: Date.now() - this.kafkaDownSince }, 'Kafka answers again');
          this.kafkaDownSince = undefined;
        }
        if (await tasks.process(partition, records)) this.consumer?.pause([partition]);
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
    this.lag.watch(() => admin.watermarks(config.topic), this.log);
    this.watchTopicIdentity(admin);
    this.watchResets(planner, tasks, checkpoints);
    this.lag.stallCause = (p) => this.stallCause(p);
    this.log.info({ topic: config.topic, group: config.group, partitions }, 'worker started');
  }

  /** Why a partition's checkpoint may not be moving, in words, for the stall warning. */
  private stallCause(partition: number): string {
    const failing = failingServers().map((f) => `${f.server} failing for ${Math.round((Date.now() - f.since) / 1000)} s (${f.error}), retried with backoff`);
    if (this.kafkaDownSince !== undefined) failing.push(`the Kafka client cannot reach ${this.config.brokers.join(',')} for ${Math.round((Date.now() - this.kafkaDownSince) / 1000)} s`);
    if (failing.length > 0) return failing.join('; ');
    const task = this.tasks.get(partition);
    if (task === undefined) return 'the partition is not owned by this worker any more';
    const clientError = this.lastClientError;
    if (clientError !== undefined && Date.now() - clientError.at < 120_000) return `the Kafka client reported ${Math.round((Date.now() - clientError.at) / 1000)} s ago: ${clientError.message}`;
    return 'no batch arrived from the Kafka client and no server error was seen; see the debug log (EXACTLYONCE_LOG_LEVEL=debug)';
  }

  /**
   * Checks every few seconds, while running, that what the worker reads is still the log its
   * checkpoints describe; the Kafka client's out-of-range error triggers a check at once.
   * - The topic's identity: a topic deleted and re-created under the worker stops every owned
   *   partition (its offsets restarted). A topic that is gone for now is left to the group, which
   *   revokes its partitions.
   * - Each owned partition's position: a next offset beyond the log end (the log was truncated), or
   *   below the log start while the partition stands still (records deleted before they were read;
   *   with auto.offset.reset=error the client stops fetching there) stops the partition. Offsets are
   *   read before the watermarks, so a batch stored meanwhile can never look beyond the end.
   */
  private watchTopicIdentity(admin: KafkaAdmin, intervalMs = 2000): void {
    let busy = false;
    const previous = new Map<number, bigint | null>();
    this.checkPositions = async (clientSaid?: string) => {
      if (busy || this.boundTopicId === undefined || this.tasks.size === 0) return;
      busy = true;
      try {
        const before = new Map([...this.tasks.values()].filter((t) => t.status.state === 'running').map((t) => [t.partition, t.status.next]));
        const [now, marks] = await Promise.all([admin.topicId(this.config.topic), admin.watermarks(this.config.topic)]);
        const stopped: number[] = [];
        for (const [p, next] of before) {
          const task = this.tasks.get(p);
          if (task === undefined || task.status.state !== 'running') continue;
          const w = marks.find((m) => m.partition === p);
          let error: ExactlyOnceError | undefined;
          if (now !== null && now !== this.boundTopicId) {
            error = topicRecreated(this.config.topic, this.boundTopicId!, now);
          } else if (w !== undefined && next !== null && next > w.high) {
            error = positionOutOfRange(p, next, w.low, w.high, clientSaid);
          } else if (w !== undefined && next !== null && next < w.low && previous.get(p) === next && task.status.next === next && failingServers().length === 0) {
            // (Standing still while a server is failing is the retry's doing: the records may wait
            // in the client's prefetch; PartitionTask's own gap check then judges the next batch.)
            error = positionOutOfRange(p, next, w.low, w.high, clientSaid);
          }
          if (error !== undefined) {
            task.stop(error);
            stopped.push(p);
          }
        }
        previous.clear();
        for (const [p, next] of before) previous.set(p, next);
        this.consumer?.pause(stopped);
      } catch {
        // Kafka down: the Runner already says so; checked again next time.
      } finally {
        busy = false;
      }
    };
    this.identityTimer = setInterval(() => void this.checkPositions?.(), intervalMs);
    this.identityTimer.unref();
  }

  /**
   * Picks up `exactlyonce checkpoints reset` while running. Every few seconds it reads the checkpoints
   * (one Cassandra partition) and the job's binding. An owned partition whose stored reset epoch is
   * above its task's was reset: its task is dropped (what it has in flight finishes, and its checkpoint
   * write loses to the reset's, src/engine/checkpoint-store.ts), a new task starts at the stored offset
   * and epoch after the same checks as an assignment, and the consumer is moved there (resumed if the
   * partition was stopped). A job bound to a re-created topic's new ID (`reset --all --rebind`) is
   * followed too: the partitions it had stopped are planned again. Each tick also says which
   * partitions this worker owns (for `checkpoints list`).
   */
  private watchResets(planner: AssignmentPlanner, tasks: TaskManager, checkpoints: CheckpointStore, intervalMs = 2000): void {
    let busy = false;
    // Tasks created without an epoch (their checkpoint could not be read): the epoch first seen.
    const seen = new Map<number, number>();
    const tick = async () => {
      const owned = [...this.tasks.keys()];
      if (owned.length === 0 || this.session === undefined) return;
      void checkpoints.recordOwner(owned, this.metrics.workerId).catch(() => undefined);
      const [stored, bound] = await Promise.all([checkpoints.readStored(), new JobBinding(this.session, this.config.keyspace).read(this.job.name)]);
      if (bound !== null && this.settingsChanged === undefined) {
        // The job's settings changed under this worker (`alerts rule` run while it was not
        // registered): what it computes would no longer be the job's. Every partition stops, once.
        const diffs = settingDifferences(bound.settings, this.job.settings ?? {});
        if (diffs.length > 0) {
          this.settingsChanged = new ExactlyOnceError(
            'EO_JOB_CONFIG_MISMATCH',
            `the job's settings stored in keyspace ${this.config.keyspace} changed under this worker: ${diffs.join('; ')}. ` +
              'Its partitions are stopped at their checkpoints; restart the worker (without the flags, it runs with the stored settings)',
          );
          this.consumer?.pause(tasks.stopAll(this.settingsChanged));
          return;
        }
      }
      if (this.settingsChanged !== undefined) return;
      let rebound = false;
      if (bound !== null && this.boundTopicId !== undefined && bound.inputTopicId !== this.boundTopicId) {
        this.log.info({ topic: this.config.topic, was: this.boundTopicId, now: bound.inputTopicId }, `the job was bound to topic ID ${bound.inputTopicId} of ${this.config.topic} (\`checkpoints reset --rebind\`)`);
        this.boundTopicId = bound.inputTopicId;
        rebound = true;
      }
      const reset = new Map<number, PartitionTask>();
      for (const [p, task] of this.tasks) {
        const c = stored.get(p);
        if (c === undefined) continue;
        const known = task.epoch ?? seen.get(p);
        if (known === undefined) seen.set(p, c.epoch);
        if ((known !== undefined && c.epoch > known) || (rebound && task.status.state === 'stopped')) reset.set(p, task);
      }
      if (reset.size === 0) return;
      const plans = await planner.planResets(new Map([...reset.keys()].map((p) => [p, stored.get(p)!])));
      // From here on synchronous: a rebalance cannot slip in between the checks and the seek, and the
      // seek is queued before the client hands over another batch of these partitions.
      for (const plan of plans) {
        const p = plan.partition;
        if (this.tasks.get(p) !== reset.get(p)) continue; // revoked or re-assigned meanwhile (that read the checkpoint afresh)
        tasks.replace(plan);
        seen.delete(p);
        if (plan.stop !== null) {
          this.consumer?.pause([p]);
          continue;
        }
        this.consumer?.restartAt(p, plan.checkpoint!);
        void checkpoints.clearStop([p]).catch(() => undefined);
        this.log.warn(
          { partition: p, checkpoint: String(plan.checkpoint), epoch: plan.epoch },
          `partition ${p} was reset to ${plan.checkpoint} (epoch ${plan.epoch}, \`checkpoints reset\`); resuming there`,
        );
      }
    };
    this.resetTimer = setInterval(() => {
      if (busy) return;
      busy = true;
      tick()
        .catch((e: unknown) => this.log.debug({ err: e instanceof Error ? e.message : String(e) }, 'reset check failed; checked again next time'))
        .finally(() => (busy = false));
    }, intervalMs);
    this.resetTimer.unref();
  }

  /**
   * Stops fetching, abandons batches still retrying (their checkpoints are not written, so they are
   * simply read again by the next owner), leaves the group and closes the sessions. Idempotent.
   */
  stop(): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort();
      this.lag.close();
      clearInterval(this.identityTimer);
      clearInterval(this.resetTimer);
      await this.consumer?.stop();
      await this.producer?.close();
      await this.admin?.close();
      await this.session?.shutdown().catch(() => undefined);
      this.log.info('worker stopped');
    })();
    return this.closing;
  }
}

function positionOutOfRange(partition: number, next: bigint, low: bigint, high: bigint, clientSaid: string | undefined): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_POSITION_OUT_OF_RANGE',
    `partition ${partition}: offset ${next} is outside the log [${low}, ${high}]${clientSaid === undefined ? '' : ` (the Kafka client: ${clientSaid})`}: ` +
      `the log was ${next > high ? 'truncated or re-created' : 'deleted (retention, delete-records) before these records were read'} under the worker. ` +
      `The partition is stopped at its checkpoint and nothing is skipped; see \`exactlyonce checkpoints list\`, then \`exactlyonce checkpoints reset --partition ${partition} --to …\``,
  );
}
