/**
 * A consumer-group member with an awaited assignment hook. On every assignment, before anything is
 * fetched, it asks the caller where each new partition starts and assigns it at exactly that offset;
 * Kafka-side committed offsets are never read or written. Partitions are shared with the other members
 * by the cooperative-sticky assignor, so a rebalance moves only the partitions that must move.
 *
 * Built on @confluentinc/kafka-javascript's promisified API, whose `rebalance_cb` is awaited before
 * the assignment is applied (its lib/kafkajs/_consumer.js #rebalanceCallback).
 */
import type { ConnectionConfig } from '../config.js';
import type { SourceRecord } from './record.js';
import { baseProperties, kafkaErrorCode, kafkaErrorKind, kafkaJS, noteClientError, quietLogger, tapClientErrors, type KafkaJSNamespace } from './client.js';

/**
 * Where an assigned partition starts: an offset, the log start when it was never checkpointed, or
 * 'stopped' for a partition that must not be read (it is assigned, then paused at once).
 */
export type StartOffset = bigint | 'beginning' | 'stopped';

/** A fetched message as a SourceRecord (the bench's at-least-once baseline converts the same way). */
export function sourceRecord(
  topic: string,
  partition: number,
  m: { offset: string; key?: Buffer | null; value: Buffer | null; timestamp: string },
): SourceRecord {
  return { topic, partition, offset: BigInt(m.offset), key: m.key ?? null, value: m.value ?? null, timestampMs: Number(m.timestamp) };
}

export interface AssignmentHandler {
  /** Awaited before the partitions are assigned; must resolve with a start for each of them. */
  onAssign(partitions: number[]): Promise<Map<number, StartOffset>>;
  /** Partitions taken away (`lost` when the session expired, e.g. after a pause). */
  onRevoke(partitions: number[], lost: boolean): void;
}

export interface ConsumerOptions {
  groupId: string;
  topic: string;
  /** Most records handed over in one batch. */
  maxBatchSize: number;
  /** Partitions processed at the same time (one batch each). */
  concurrency: number;
  /** Bound on prefetched data held by the client, in KiB: the backpressure bound. */
  maxBufferKb: number;
  sessionTimeoutMs: number;
  /** How often new partitions of the topic are discovered, in ms. */
  metadataRefreshMs: number;
  onClientLog?: (level: 'warn' | 'error', message: string) => void;
  /**
   * The client could not fetch a partition because its position is outside the log (librdkafka
   * ERR__AUTO_OFFSET_RESET with auto.offset.reset=error: it stops fetching that partition instead of
   * jumping to the log start or end). The client does not say which partition: the caller finds out.
   */
  onPositionOutOfRange?: (message: string) => void;
  /**
   * An error the client reported with its librdkafka code (an `event.error`: a broker unreachable, a
   * refused login or handshake; or a failed fetch: a missing group or topic ACL, a position outside
   * the log). Judge it by kafkaErrorKind(kafkaErrorCode(e)), never by its message.
   */
  onClientError?: (e: Error & { code?: number }) => void;
}


/** See the consumer's properties: how long a partition whose prefetch queue is full waits to fetch again. */
export const FETCH_QUEUE_BACKOFF_MS = 20;

/** See the consumer's properties: how much consumption the client's JavaScript cache holds ahead. */
export const JS_CACHE_MS = 1;

const ERR_ASSIGN_PARTITIONS = -175;
const OFFSET_BEGINNING = -2;

export class GroupConsumer {
  private readonly consumer: KafkaJSNamespace.Consumer;
  private stopped: Promise<void> | undefined;
  private handler: AssignmentHandler | undefined;

  constructor(
    config: ConnectionConfig,
    private readonly options: ConsumerOptions,
  ) {
    const { Kafka } = kafkaJS();
    this.consumer = new Kafka({}).consumer({
      kafkaJS: {
        logger: quietLogger((level, message) => options.onClientLog?.(level, message)),
      },
      // When the prefetch queue is over its bound (queued.max.messages.kbytes: --max-buffer-mb),
      // librdkafka postpones the partition's next fetch by this much (its default: 1 s). See
      // bench/README.md, "Latency". Before the user's properties: --kafka-config can set it.
      'fetch.queue.backoff.ms': FETCH_QUEUE_BACKOFF_MS,
      ...baseProperties(config, `exactlyonce-${process.pid}`),
      // Set after the user's properties (--kafka-config), so that none of them can be weakened:
      'group.id': options.groupId,
      // Only committed records of transactional producers; aborted ones are never stored.
      'isolation.level': 'read_committed',
      'partition.assignment.strategy': 'cooperative-sticky',
      // The checkpoint table is the only resume point; committing to Kafka would only mislead.
      'enable.auto.commit': false,
      // The consumer never moves its position by itself: every partition is assigned at an explicit
      // offset (its checkpoint, or OFFSET_BEGINNING when never checkpointed), and a position that falls
      // outside the log while running (truncated, deleted, re-created) is an error that stops the
      // partition (onPositionOutOfRange), never a silent jump to the log start or end.
      'auto.offset.reset': 'error',
      'session.timeout.ms': options.sessionTimeoutMs,
      'heartbeat.interval.ms': Math.max(500, Math.floor(options.sessionTimeoutMs / 5)),
      'topic.metadata.refresh.interval.ms': options.metadataRefreshMs,
      'queued.max.messages.kbytes': options.maxBufferKb,
      'fetch.max.bytes': Math.min(52428800, Math.max(1048576, options.maxBufferKb * 1024)),
      'js.consumer.max.batch.size': options.maxBatchSize,
      // The client's JavaScript message cache holds this many ms of consumption per partition worker at
      // the rate it measures, times the concurrency, rounded up to a multiple of max batch ×
      // concurrency (lib/kafkajs/_consumer.js #updateMaxMessageCacheSize). With its default, 1,500 ms,
      // a fast worker fetched ~240,000 records into the heap in one call and ran out of it under the
      // 160 MiB cap. At 1 ms the rounding is the bound: --max-batch × --concurrency records (unless
      // a worker took over 1,000 × --max-batch records per ms), measured in bench/README.md, "Memory".
      'js.consumer.max.cache.size.per.worker.ms': JS_CACHE_MS,
      rebalance_cb: (err: { code: number }, assignment: KafkaJSNamespace.TopicPartition[], fns: AssignmentFns) =>
        this.onRebalance(err, assignment, fns),
    } as unknown as KafkaJSNamespace.ConsumerConstructorConfig);
  }

  private async onRebalance(err: { code: number }, assignment: KafkaJSNamespace.TopicPartition[], fns: AssignmentFns): Promise<void> {
    const handler = this.handler!;
    const partitions = assignment.filter((tp) => tp.topic === this.options.topic).map((tp) => tp.partition);
    if (err.code !== ERR_ASSIGN_PARTITIONS) {
      handler.onRevoke(partitions, fns.assignmentLost());
      return; // the client unassigns them
    }
    let starts: Map<number, StartOffset>;
    try {
      starts = await handler.onAssign(partitions);
    } catch {
      // The handler plans every failure itself; this is the last resort. Throwing here would make
      // the client fall back to its default assignment (committed offsets, auto.offset.reset) in
      // silence, so every partition is assigned and paused instead.
      starts = new Map(partitions.map((p) => [p, 'stopped' as const]));
    }
    // Offsets handed to assign must be JS numbers (the client rejects strings); offsets stay far
    // below 2^53 in practice, and we refuse silently wrong ones.
    fns.assign(
      assignment.map((tp) => {
        const start = starts.get(tp.partition) ?? 'beginning';
        // The planner stops a partition whose checkpoint exceeds 2^53; a stopped one is paused below.
        return { topic: tp.topic, partition: tp.partition, offset: typeof start === 'bigint' ? Number(start) : OFFSET_BEGINNING };
      }),
    );
    const stopped = [...starts].filter(([, s]) => s === 'stopped').map(([p]) => p);
    try {
      this.pause(stopped);
    } catch {
      // Not fatal: a stopped PartitionTask also ignores (and never checkpoints) what it is given.
    }
  }

  async start(handler: AssignmentHandler, eachBatch: (partition: number, records: SourceRecord[]) => Promise<void>): Promise<void> {
    this.handler = handler;
    // connect() creates the client's librdkafka consumer before it first waits: tapped at once, so
    // errors reported while connecting are seen too.
    const connecting = this.consumer.connect();
    this.tapErrors();
    await connecting;
    await this.consumer.subscribe({ topics: [this.options.topic] });
    const topic = this.options.topic;
    await this.consumer.run({
      partitionsConsumedConcurrently: this.options.concurrency,
      eachBatch: async ({ batch }) => {
        await eachBatch(batch.partition, batch.messages.map((m) => sourceRecord(topic, batch.partition, m)));
      },
    });
  }

  /**
   * Hands each error of the client's librdkafka consumer, with its code, to onClientError: its
   * `event.error` events, and the errors of its fetches (a group or topic ACL missing, a position
   * outside the log), which the KafkaJS layer only logs as text and retries (lib/kafkajs/_consumer.js
   * `#worker`, `#consumeN`). The fetch is wrapped on the instance: the layer looks `consume` up at
   * every call.
   */
  private tapErrors(): void {
    const internal = (this.consumer as unknown as { _getInternalClient(): InternalClient | null })._getInternalClient();
    if (internal === null || internal === undefined) return;
    const onError = (e: Error & { code?: number }) => {
      if (kafkaErrorKind(kafkaErrorCode(e))?.kind === 'out-of-range') this.options.onPositionOutOfRange?.(e.message.split('\n')[0]!);
      this.options.onClientError?.(e);
    };
    tapClientErrors(internal, onError);
    const consume = internal.consume.bind(internal);
    internal.consume = (n: number, cb: (err: (Error & { code?: number }) | null, messages: unknown) => void) =>
      consume(n, (err, messages) => {
        try {
          if (err !== null && err !== undefined) {
            noteClientError(err);
            onError(err);
          }
        } finally {
          // Whatever the listener does, the fetch completes: the client's poll loop waits for it.
          cb(err, messages);
        }
      });
  }

  pause(partitions: number[]): void {
    if (partitions.length > 0) this.consumer.pause([{ topic: this.options.topic, partitions }]);
  }

  /**
   * Restarts an assigned partition at `offset` (after `exactlyonce checkpoints reset`), whatever state
   * its fetcher is in. A plain seek is not enough: a partition whose position fell outside the log is
   * left stopped by librdkafka (auto.offset.reset=error: fetch state NONE), and then refuses a seek
   * (ERR__STATE) and a resume. So the partition is taken out of this member's assignment and put back
   * at `offset` (incremental unassign/assign outside a rebalance, which librdkafka allows; the group is
   * not involved), and then sought there through the KafkaJS layer, which drops what it prefetched and
   * forgets the last consumed offset (lib/kafkajs/_consumer.js `seek`: the partition's batch payloads
   * and cached messages are marked stale; applied once the batches in flight finish), and resumed. No
   * record of the old position is handed over after this call returns.
   */
  restartAt(partition: number, offset: bigint): void {
    if (offset < 0n || offset > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`cannot restart at offset ${offset}`);
    const tp = { topic: this.options.topic, partition };
    // The client's own librdkafka consumer (kafka-javascript marks this accessor internal).
    const internal = (this.consumer as unknown as { _getInternalClient(): InternalClient })._getInternalClient();
    internal.incrementalUnassign([tp]);
    internal.incrementalAssign([{ ...tp, offset: Number(offset) }]);
    this.consumer.seek({ ...tp, offset: String(offset) });
    this.consumer.resume([{ topic: tp.topic, partitions: [partition] }]);
  }

  /** Fetches paused partitions again (a stopped partition that was reset). */
  resume(partitions: number[]): void {
    if (partitions.length > 0) this.consumer.resume([{ topic: this.options.topic, partitions }]);
  }

  /** Leaves the group after the batches in flight finish. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= this.consumer.disconnect().catch(() => undefined);
    return this.stopped;
  }
}

interface InternalClient {
  on(event: 'event.error', listener: (e: Error & { code?: number }) => void): void;
  consume(n: number, cb: (err: (Error & { code?: number }) | null, messages: unknown) => void): void;
  incrementalAssign(assignments: Array<{ topic: string; partition: number; offset?: number }>): void;
  incrementalUnassign(assignments: Array<{ topic: string; partition: number }>): void;
}

interface AssignmentFns {
  assign: (assignment: Array<{ topic: string; partition: number; offset: number }>) => void;
  unassign: (assignment: KafkaJSNamespace.TopicPartition[]) => void;
  assignmentLost: () => boolean;
}
