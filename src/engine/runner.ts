/**
 * The Runner owns a worker's poll loop (Kafka Streams' StreamThread): it connects, binds the job,
 * joins the consumer group, and wires the roles that do the work — the TaskManager (which task owns
 * which partition, planned from its checkpoint by the AssignmentPlanner before anything is fetched),
 * the PartitionTasks it hands each batch to, the Publisher, the PositionWatcher and ResetWatcher (is
 * the log still the one the checkpoints describe; was a partition reset) and the LagWatcher — then
 * shuts them down cleanly. It knows partitions, offsets and checkpoints, nothing about what the
 * records mean: that is the Job's.
 */
import { requireSchema } from '../cassandra/migrate.js';
import { connect, ringState, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { kafkaErrorCode, kafkaErrorKind, kafkaSecurityError, kafkaUnavailable } from '../kafka/client.js';
import { GroupConsumer } from '../kafka/consumer.js';
import { LogReader } from '../kafka/log-reader.js';
import type { Logger } from '../log.js';
import type { Job } from './job.js';
import { JobBinding, partitionsAdded, topicRecreated } from './job-binding.js';
import { missingTopic } from './missing-topic.js';
import { LagWatcher } from './lag-watcher.js';
import { LostWrites } from './lost-writes.js';
import { EngineMetrics } from './metrics.js';
import type { PartitionTask } from './partition-task.js';
import type { Binding } from './ports.js';
import { PositionWatcher } from './position-watcher.js';
import { Publisher } from './publisher.js';
import { DEFAULT_MAX_RAW_BYTES } from './quarantine.js';
import { failingServers, isRetriable, retry } from './retry.js';
import { ResetWatcher } from './reset-watcher.js';
import { wireTasks } from './runner-wiring.js';
import { TailSkipper } from './tail-skipper.js';
import type { TaskManager } from './task-manager.js';
import { settleWithin } from '../deadline.js';

export interface RunnerOptions {
  /** Most records per batch (default 2000). */
  maxBatchSize: number;
  /** Partitions processed concurrently (default 8). */
  concurrency: number;
  /**
   * Prefetch bound in KiB: memory stays bounded however far behind the worker is (default 2048). It
   * also sizes the client's fetch requests and their receive buffers, so a larger bound costs more than
   * the records it holds: for a worker far behind, 8 MiB raises the peak RSS well above 2 MiB's and
   * reads no faster (bench/README.md, "Memory", has the figures).
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
  /**
   * How far back, in ms, a Cassandra node that goes down may have forgotten writes it acknowledged: its
   * commit log's sync period (`commitlog_sync_period`, 10 s by default) plus a margin (default 15000;
   * 0: never read a partition again on a node's crash). See src/engine/lost-writes.ts.
   */
  lostWritesWindowMs: number;
  /**
   * How long, in ms, a stop may wait for the batches in flight and the group leave before it gives
   * up with EO_STOP_TIMEOUT (default 30000: within the pods' 60 s grace period). A stop that gives up
   * is a crash's equal: nothing is lost.
   */
  stopTimeoutMs: number;
}

/**
 * How long a stopping worker waits for its admin client's requests in flight (metadata and offsets,
 * which with the brokers down each wait out their 15 s timeout, one after the other) before it
 * leaves them to the process's exit.
 */
const ADMIN_CLOSE_GRACE_MS = 2_000;

/** Times a missing topic is asked for again, a second apart, before start-up fails (EO_TOPIC_MISMATCH). */
const TOPIC_SETTLE_TRIES = 10;

export const defaultRunnerOptions: RunnerOptions = {
  maxBatchSize: 2000,
  concurrency: 8,
  maxBufferKb: 2 * 1024,
  sessionTimeoutMs: 10_000,
  metadataRefreshMs: 10_000,
  maxQuarantineBytes: DEFAULT_MAX_RAW_BYTES,
  startupTimeoutMs: 60_000,
  lostWritesWindowMs: 15_000,
  stopTimeoutMs: 30_000,
};

export class Runner {
  readonly metrics: EngineMetrics;
  /** The per-partition checkpoint, log end and lag gauges, and the stall warnings. */
  private readonly lag: LagWatcher;
  /** Which task owns which partition (set once started). */
  private taskManager: TaskManager | undefined;
  private readonly abort = new AbortController();
  /** Checkpoint writes still in flight (src/engine/partition-task.ts): finished before the session closes. */
  private readonly checkpointsInFlight = new Set<Promise<void>>();
  private session: Client | undefined;
  private admin: KafkaAdmin | undefined;
  private consumer: GroupConsumer | undefined;
  private publisher: Publisher | undefined;
  private closing: Promise<void> | undefined;
  /** closing, bounded by the stop deadline. */
  private stopped: Promise<void> | undefined;
  /** When the Kafka client last reported all brokers unreachable (cleared by the next batch). */
  private kafkaDownSince: number | undefined;
  /** The input topic's ID the job is bound to (its checkpoints describe that topic, no other), and whether its settings changed. */
  private readonly binding: Binding = { topicId: undefined, settingsChanged: undefined };
  /** Checks the topic's identity and each owned partition's position (set once running). */
  private positions: PositionWatcher | undefined;
  /** Picks up `checkpoints reset` and says which partitions this worker owns (set once running). */
  private resets: ResetWatcher | undefined;
  /** Steps idle checkpoints over aborted records and transaction markers (set once running). */
  private tails: TailSkipper | undefined;
  /** The Kafka client's last error log line, and when (named by stall warnings while recent). */
  private lastClientError: { message: string; at: number } | undefined;
  /** Finds checkpoints Cassandra lost after acknowledging them, and rewinds their partitions. */
  private readonly lostWrites: LostWrites;
  /** Settles with the refusal that stops this worker for good (a missing ACL, a revoked login). */
  private refused: ((e: ExactlyOnceError) => void) | undefined;
  /** Warned that no node's start can be read (once: every replay decision would say it again). */
  private unknownStartWarned = false;
  private readonly unknownStartOnce = (cause: unknown): void => {
    if (this.unknownStartWarned) return;
    this.unknownStartWarned = true;
    this.log.warn(
      { err: cause instanceof Error ? cause.message : String(cause) },
      'system_views.gossip_info cannot be read (Cassandra before 4.1, or no permission on it): a node that restarted is not seen, so rows it lost are read again only while a node is seen down (docs/guarantees.md)',
    );
  };
  /**
   * Resolves with the error when the brokers refuse this worker something no retry can change (the
   * client itself retries such refusals forever, logging them): the caller stops the worker and
   * reports it. Never resolves otherwise.
   */
  readonly refusal: Promise<ExactlyOnceError> = new Promise((resolve) => (this.refused = resolve));

  constructor(
    private readonly config: ConnectionConfig,
    private readonly job: Job<unknown>,
    private readonly log: Logger,
    private readonly options: RunnerOptions = defaultRunnerOptions,
    metrics?: EngineMetrics,
  ) {
    this.metrics = metrics ?? new EngineMetrics();
    this.lag = new LagWatcher(this.metrics);
    this.lostWrites = new LostWrites(options.lostWritesWindowMs ?? defaultRunnerOptions.lostWritesWindowMs);
  }

  /** Partitions owned now, with their state and next offset (for status output and tests). */
  partitions(): Array<{ partition: number; state: string; next: bigint | null }> {
    return [...this.tasks.values()].map((t) => ({ partition: t.partition, ...t.status }));
  }

  private get tasks(): ReadonlyMap<number, PartitionTask> {
    return this.taskManager?.tasks ?? new Map();
  }

  private retrying<T>(server: string, fn: () => Promise<T>, deadlineMs?: number): Promise<T> {
    // Cassandra answered: what it acknowledged so far is the start of the window a crash may take back.
    const call = server === 'Cassandra' ? () => fn().then((r) => (this.lostWrites.answered(), r)) : fn;
    return retry(call, {
      server,
      signal: this.abort.signal,
      log: this.log,
      deadlineMs,
      isRetriable,
      // A Kafka call writes nothing the next owner does not do again; with the brokers down it waits
      // out the client's timeouts (a minute and more), which must not hold a stopping worker.
      abandonOnAbort: server === 'Kafka',
      onRetry: (e) => {
        if (server === 'Cassandra') this.lostWrites.outage();
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
    const countAll = () => this.retrying('Kafka', () => Promise.all(topics.map((t) => admin.partitionCount(t))), options.startupTimeoutMs);
    let counts = await countAll();
    // A topic created a moment ago may not be known yet to the broker asked (metadata spreads over a
    // cluster's brokers in a few seconds): asked again before the worker gives up.
    for (let tries = 0; counts.includes(null) && tries < TOPIC_SETTLE_TRIES && !this.abort.signal.aborted; tries++) {
      await new Promise((r) => setTimeout(r, 1000));
      counts = await countAll();
    }
    const missing = counts.indexOf(null);
    if (missing >= 0) throw missingTopic(config, topics[missing]!, this.job.outputTopics ?? []);
    const partitions = counts[0]!;
    this.session = await this.retrying('Cassandra', () => connect(config, { keyspace: config.keyspace }), options.startupTimeoutMs);
    const session = this.session;
    await this.retrying('Cassandra', () => requireSchema(session, config.keyspace, this.job.legacyTables === true ? 'checkpoints' : 'job_checkpoints'), options.startupTimeoutMs);
    // A node the driver lost every connection to may have crashed and forgotten acknowledged writes,
    // even when none of ours failed (none was in flight): what was acknowledged within the window before
    // is read again (src/engine/lost-writes.ts).
    session.on('hostDown', () => this.lostWrites.nodeDown());
    const publisher = new Publisher(
      config,
      (fn) => this.retrying('Kafka', fn),
      async (topic, cause) => ((await admin.partitionCount(topic)) === null ? missingTopic(config, topic, this.job.outputTopics ?? [], { cause }) : undefined),
    );
    this.publisher = publisher;
    // Retried like every start-up call: a job's open may query Cassandra (a sink checks its table).
    await this.retrying(
      'Cassandra',
      () => this.job.open({ session, keyspace: config.keyspace, publish: (topic, records) => publisher.publish(topic, records), metrics: this.metrics.registry }),
      options.startupTimeoutMs,
    );
    // What this keyspace serves: bound on the first run, checked on every later one (one input topic,
    // its identity, the output topics, the job's settings).
    const topicId = await this.retrying('Kafka', () => admin.topicId(config.topic), options.startupTimeoutMs);
    if (topicId === null) throw missingTopic(config, config.topic, this.job.outputTopics ?? []);
    const bound = await this.retrying(
      'Cassandra',
      () => new JobBinding(session, config.keyspace).bind(
        { name: this.job.name, inputTopic: config.topic, outputTopics: this.job.outputTopics ?? [], settings: this.job.settings ?? {}, tables: this.job.tables ?? [] },
        topicId,
        partitions,
      ),
      options.startupTimeoutMs,
    );
    this.binding.topicId = bound.inputTopicId;
    if (this.job.keysStayOnPartition === true) {
      this.binding.partitions = bound.inputPartitions ?? partitions;
      if (partitions > this.binding.partitions) this.log.error({ code: 'EO_PARTITIONS_ADDED' }, partitionsAdded(config.topic, this.binding.partitions, partitions).message);
    }
    if (bound.inputTopicId !== topicId) this.log.error({ code: 'EO_TOPIC_RECREATED' }, topicRecreated(config.topic, bound.inputTopicId, topicId).message);
    const { checkpoints, planner, identity, consumer, tasks } = wireTasks({
      config,
      job: this.job,
      session,
      admin,
      maxQuarantineBytes: options.maxQuarantineBytes,
      signal: this.abort.signal,
      metrics: this.metrics,
      lag: this.lag,
      log: this.log,
      checkpointsInFlight: this.checkpointsInFlight,
      lostWrites: this.lostWrites,
      binding: this.binding,
      retrying: (server, fn) => this.retrying(server, fn),
      consumer: () => this.consumer,
      ring: () => ringState(session, this.unknownStartOnce),
      onRewind: (p, from) => this.rewound(p, from),
    });
    this.taskManager = tasks;
    const newConsumer = () => new GroupConsumer(config, {
      groupId: config.group,
      topic: config.topic,
      maxBatchSize: options.maxBatchSize,
      concurrency: options.concurrency,
      maxBufferKb: options.maxBufferKb,
      sessionTimeoutMs: options.sessionTimeoutMs,
      metadataRefreshMs: options.metadataRefreshMs,
      // The identity check that vouches for these records starts now, while the partitions' batches
      // in flight write their rows, rather than when each of them is handed over.
      onFetched: (at) => void identity.confirm(at).catch(() => undefined),
      onPositionOutOfRange: (message) => {
        this.lastClientError = { message, at: Date.now() };
        void this.positions?.check(message);
      },
      onClientLog: (level, message) => {
        if (level === 'error') {
          this.metrics.errors.inc({ server: 'Kafka', error: 'client' });
          this.lastClientError = { message: message.split('\n')[0]!.slice(0, 300), at: Date.now() };
        }
        this.log.debug({ kafka: level }, message);
      },
      // Judged by the librdkafka code the client's error carries, never by its wording.
      onClientError: (e) => {
        const refusal = kafkaSecurityError(config, e);
        if (refusal !== undefined) this.refused?.(refusal);
        // The client reconnects by itself; we only say, once, that the brokers stopped answering.
        if (kafkaErrorKind(kafkaErrorCode(e))?.kind === 'unreachable' && this.kafkaDownSince === undefined) {
          this.kafkaDownSince = Date.now();
          this.log.warn({ server: 'Kafka', err: e.message, code: e.code }, `Kafka at ${config.brokers.join(',')} is not answering; reconnecting, no record is skipped`);
        }
      },
    });
    const startConsumer = (consumer: GroupConsumer) => consumer.start(
      {
        onAssign: async (assigned) => {
          const starts = await tasks.assign(assigned);
          if (assigned.length > 0) await this.jobHook('onAssign', () => this.job.onAssign?.(assigned));
          return starts;
        },
        onRevoke: (revoked, lost) => {
          tasks.revoke(revoked, lost);
          if (revoked.length > 0) void this.jobHook('onRevoke', () => this.job.onRevoke?.(revoked, lost));
        },
        onAssignFailed: (failed, e) => tasks.assignFailed(failed, e),
      },
      async (partition, records, fetchedAt) => {
        if (this.kafkaDownSince !== undefined) {
          this.log.info({ server: 'Kafka', downMs: Date.now() - this.kafkaDownSince }, 'Kafka answers again');
          this.kafkaDownSince = undefined;
        }
        if (await tasks.process(partition, records, fetchedAt)) this.consumer?.pause([partition]);
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
    this.tails = new TailSkipper({
      topic: config.topic,
      tasks: () => tasks.tasks,
      openReader: () => LogReader.open(config, 'exactlyonce-tail'),
      logStarts: () => admin.logStarts(config.topic),
      log: this.log,
    });
    this.lag.onRefresh = (marks) => void this.tails?.check(marks);
    this.lag.watch(() => admin.watermarks(config.topic), this.log);
    this.positions = new PositionWatcher({ topic: config.topic, admin, tasks: () => tasks.tasks, binding: this.binding, consumer });
    this.positions.start();
    this.resets = new ResetWatcher({
      topic: config.topic,
      keyspace: config.keyspace,
      settings: this.job.settings ?? {},
      readJob: () => new JobBinding(session, config.keyspace).read(this.job.name),
      checkpoints,
      planner,
      tasks,
      binding: this.binding,
      consumer,
      log: this.log,
      workerId: this.metrics.workerId,
      lostWrites: this.lostWrites,
      onRewind: (p, from) => this.rewound(p, from),
    });
    this.resets.start();
    this.lag.stallCause = (p) => this.stallCause(p);
    this.log.info({ topic: config.topic, group: config.group, partitions }, 'worker started');
  }

  /** A partition is read again from `from` (a reset, lost writes): the job forgets what it remembers past it. */
  private rewound(partition: number, from: bigint): void {
    try {
      this.job.onRewind?.(partition, from);
    } catch (e) {
      this.log.error({ err: e, hook: 'onRewind' }, "the job's onRewind hook failed");
    }
  }

  /** Runs one of the job's lifecycle hooks: a failure is logged, never stops the worker. */
  private async jobHook(name: string, fn: () => Promise<void> | void): Promise<void> {
    try {
      await fn();
    } catch (e) {
      this.log.error({ err: e, hook: name }, `the job's ${name} hook failed`);
    }
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
    const tailError = this.tails?.lastFailure;
    if (tailError !== undefined && Date.now() - tailError.at < 120_000) return `the end of the log could not be read to step over transaction markers (${tailError.message})`;
    return 'no batch arrived from the Kafka client and no server error was seen; see the debug log (EXACTLYONCE_LOG_LEVEL=debug)';
  }

  /**
   * Stops fetching, abandons batches still retrying (their checkpoints are not written, so they are
   * simply read again by the next owner), leaves the group and closes the sessions. Idempotent.
   */
  stop(): Promise<void> {
    let step = 'nothing';
    this.closing ??= (async () => {
      this.abort.abort();
      this.lag.close();
      this.positions?.close();
      this.resets?.close();
      this.tails?.close();
      step = 'consumer';
      await this.consumer?.stop();
      // The last batches' checkpoints (their rows are stored): written, or abandoned if still retrying.
      step = 'the checkpoint writes in flight';
      await Promise.all(this.checkpointsInFlight);
      step = "the job's close";
      await this.jobHook('close', () => this.job.close?.());
      // (Both Kafka clients at once: each may wait out its requests to brokers that are down.)
      step = "the publisher's flush and the admin client's requests in flight";
      await Promise.all([this.publisher?.close(), this.admin?.close(ADMIN_CLOSE_GRACE_MS)]);
      step = "the Cassandra session's shutdown";
      await this.session?.shutdown().catch(() => undefined);
      this.log.info('worker stopped');
    })();
    const deadlineMs = this.options.stopTimeoutMs ?? defaultRunnerOptions.stopTimeoutMs;
    this.stopped ??= settleWithin(this.closing, deadlineMs, () => {
      const waiting = step === 'consumer' ? (this.consumer?.stopStep ?? 'the consumer') : step;
      const error = new ExactlyOnceError(
        'EO_STOP_TIMEOUT',
        `the worker did not stop within ${deadlineMs} ms: still waiting for ${waiting}; it exits all the same, as after a crash (nothing is lost: every batch not checkpointed is read again by the partition's next owner, once the group's session timeout has passed)`,
      );
      this.log.error({ code: error.code }, error.message);
      throw error;
    });
    return this.stopped;
  }
}
