/**
 * A consumer-group member with an awaited assignment hook. On every assignment, before anything is
 * fetched, it asks the caller where each new partition starts and assigns it at exactly that offset;
 * Kafka-side committed offsets are never read or written. Partitions are shared with the other members
 * by the cooperative-sticky assignor, so a rebalance moves only the partitions that must move.
 *
 * Built on @confluentinc/kafka-javascript's lower-level KafkaConsumer (librdkafka's consumer, pulled
 * with `consume(n)`), not its KafkaJS-style layer: the layer's message cache, worker barriers and
 * payload objects cost the worker about 4-5 ms of CPU per 1,000 records (bench/kafka-consume.ts,
 * bench/README.md). What the layer did for us is done here, in one fetch loop:
 * - the rebalance is awaited: librdkafka hands an assignment to `rebalance_cb` during a `consume`
 *   call and waits until the partitions are assigned; the loop fetches nothing more until the
 *   handler has planned the starts and they are assigned. Revoked partitions are unassigned only after
 *   their batches in flight finish;
 * - at most `concurrency` partitions are processed at once, one batch at a time each, in offset order;
 *   a batch holds at most maxBatchSize records and MAX_BATCH_BYTES (one record at least); what is
 *   fetched ahead is bounded (maxBatchSize x concurrency records and MAX_BATCH_BYTES x concurrency
 *   bytes here, plus librdkafka's own prefetch queue, queued.max.messages.kbytes);
 * - a paused partition hands over nothing more, and one restarted at an offset (restartAt) nothing of
 *   its old position: its records still held here are dropped at once, and the client's assignment is
 *   changed only between two `consume` calls, so no call in flight can bring old records after it;
 * - each batch carries when its last record was fetched (`onFetched` announces each fetch as it
 *   returns), so a check that must follow the fetch (the engine's topic identity check) can run while
 *   the batch waits for its turn;
 * - each record carries where the reading that brought it started (SourceRecord.fetchedFrom): the
 *   offset after the record handed over before it, or the offset the partition was assigned or
 *   restarted at. Offsets are not contiguous (transaction markers, aborted records, compaction), so a
 *   jump from one batch to the next proves nothing by itself; a reading that started at the offset the
 *   engine expects proves the jump holds nothing a read_committed consumer receives;
 * - a restart (restartAt) is never dropped: one asked for while the partition's assignment is being
 *   planned replaces the planned start, and one of a partition the client refused to assign assigns it
 *   there (or reports the refusal again, onAssignFailed).
 */
import { createRequire } from 'node:module';
import type { ConnectionConfig } from '../config.js';
import { recordHeaders, type SourceRecord } from './record.js';
import { baseProperties, kafkaErrorCode, kafkaErrorKind, kafkaJS, noteClientError, quietLogger, tapClientErrors } from './client.js';

/**
 * Where an assigned partition starts: an offset, the log start when it was never checkpointed, or
 * 'stopped' for a partition that must not be read (it is assigned, then paused at once).
 */
export type StartOffset = bigint | 'beginning' | 'stopped';

/** A fetched message as a SourceRecord (the bench's at-least-once baseline converts the same way). */
export function sourceRecord(
  topic: string,
  partition: number,
  m: { offset: string | number; key?: Buffer | null; value: Buffer | null; timestamp: string | number; headers?: Array<Record<string, Buffer>> },
  fetchedFrom?: bigint | 'log-start',
): SourceRecord {
  const headers = recordHeaders(m.headers);
  return { topic, partition, offset: BigInt(m.offset), key: m.key ?? null, value: m.value ?? null, timestampMs: Number(m.timestamp), fetchedFrom, ...(headers === undefined ? {} : { headers }) };
}

export interface AssignmentHandler {
  /** Awaited before the partitions are assigned; must resolve with a start for each of them. */
  onAssign(partitions: number[]): Promise<Map<number, StartOffset>>;
  /** Partitions taken away (`lost` when the session expired, e.g. after a pause). */
  onRevoke(partitions: number[], lost: boolean): void;
  /**
   * The client refused to assign partitions that onAssign planned (its incrementalAssign threw): they
   * are not read until the next rebalance gives them again. Not called for a rebalance that succeeded.
   */
  onAssignFailed(partitions: number[], error: Error): void;
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
  /** A `consume` call returned records at `at` (performance.now()), before they are queued for their batches. */
  onFetched?: (at: number) => void;
}


/** See the consumer's properties: how long a partition whose prefetch queue is full waits to fetch again. */
export const FETCH_QUEUE_BACKOFF_MS = 20;

/** How long one `consume` call waits for a first record (it returns at once with what is there). */
const CONSUME_WAIT_MS = 100;
/**
 * Most bytes (keys and values) in one batch: long records are handed over in fewer per batch than
 * maxBatchSize. A job holds a batch decoded several times over (its text, its values, its rows), so
 * `--max-batch` records of 30 KB each would not fit the worker's heap (`--max-heap-mb`).
 */
export const MAX_BATCH_BYTES = 2 * 2 ** 20;

/** After a failed fetch, the next one waits this long (the client reconnects by itself). */
const FETCH_ERROR_PAUSE_MS = 100;

const ERR_ASSIGN_PARTITIONS = -175;
const OFFSET_BEGINNING = -2;

/**
 * Called with each batch, one at a time per partition; `fetchedAt` is when (performance.now()) the
 * `consume` call that brought the batch's last record returned: every record of it was fetched from
 * the brokers before then.
 */
export type EachBatch = (partition: number, records: SourceRecord[], fetchedAt: number) => Promise<void>;

/** A partition's records not yet handed over, with when each was fetched. */
interface Queue {
  messages: RawMessage[];
  fetchedAt: number[];
  /**
   * Where the reading of messages[0] (or, with none queued, of the next message) started: the offset
   * after the record handed over before it, or the offset assigned or restarted at; null while the
   * partition is held (what is fetched then is dropped).
   */
  from: bigint | 'log-start' | null;
}

function newQueue(from: bigint | 'log-start' | null): Queue {
  return { messages: [], fetchedAt: [], from };
}

export class GroupConsumer {
  private readonly consumer: LowLevelConsumer;
  private readonly log: ReturnType<typeof quietLogger>;
  private handler: AssignmentHandler | undefined;
  private eachBatch: EachBatch | undefined;
  /** Records fetched and not yet handed over, per assigned partition (in offset order). */
  private readonly queues = new Map<number, Queue>();
  /** Records, and their bytes, held in `queues`. */
  private queued = 0;
  private queuedBytes = 0;
  /** The batch each partition has in flight. */
  private readonly inFlight = new Map<number, Promise<void>>();
  /** Assigned partitions that hand over nothing: paused, or waiting for their restart. */
  private readonly held = new Set<number>();
  /** Partitions (`topic:partition`) the group gave this member but the client refused to assign. */
  private readonly unassigned = new Set<string>();
  /** Changes to the client's assignment made between two `consume` calls (restartAt). */
  private readonly betweenFetches: Array<() => void> = [];
  /** Partitions whose starts the handler is planning (onAssign in flight), and the restarts or pauses asked for meanwhile. */
  private readonly planning = new Map<number, StartOffset | undefined>();
  /** The rebalance being handled: no fetch until it is done. */
  private rebalancing: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  private stopping = false;
  private closing = false;
  private stopped: Promise<void> | undefined;
  private connectError: Error | undefined;
  private connected = false;

  constructor(
    config: ConnectionConfig,
    private readonly options: ConsumerOptions,
  ) {
    kafkaJS(); // fails with EO_KAFKA_CLIENT_MISSING, and a clear message, when the native client is not built
    this.log = quietLogger((level, message) => options.onClientLog?.(level, message));
    const { KafkaConsumer } = createRequire(import.meta.url)('@confluentinc/kafka-javascript') as { KafkaConsumer: new (conf: object, topicConf: object) => LowLevelConsumer };
    this.consumer = new KafkaConsumer(
      {
        // When the prefetch queue is over its bound (queued.max.messages.kbytes: --max-buffer-mb),
        // librdkafka postpones the partition's next fetch by this much (its default: 1 s). See
        // bench/README.md, "Latency". Before the user's properties: --kafka-config can set it.
        'fetch.queue.backoff.ms': FETCH_QUEUE_BACKOFF_MS,
        // A fetch loop held back by batches still writing (a Cassandra outage retried) does not call
        // `consume`; librdkafka leaves the group when that lasts longer than this (its default: 5 min).
        'max.poll.interval.ms': 600_000,
        ...baseProperties(config, `exactlyonce-${process.pid}`),
        // Set after the user's properties (--kafka-config), so that none of them can be weakened:
        'group.id': options.groupId,
        // Only committed records of transactional producers; aborted ones are never stored.
        'isolation.level': 'read_committed',
        'partition.assignment.strategy': 'cooperative-sticky',
        // The checkpoint table is the only resume point; committing to Kafka would only mislead.
        'enable.auto.commit': false,
        'enable.auto.offset.store': false,
        'session.timeout.ms': options.sessionTimeoutMs,
        'heartbeat.interval.ms': Math.max(500, Math.floor(options.sessionTimeoutMs / 5)),
        'topic.metadata.refresh.interval.ms': options.metadataRefreshMs,
        'queued.max.messages.kbytes': options.maxBufferKb,
        'fetch.max.bytes': Math.min(52428800, Math.max(1048576, options.maxBufferKb * 1024)),
        rebalance_cb: (err: { code: number }, assignment: TopicPartition[]) => this.onRebalance(err, assignment),
      },
      // The consumer never moves its position by itself: every partition is assigned at an explicit
      // offset (its checkpoint, or OFFSET_BEGINNING when never checkpointed), and a position that falls
      // outside the log while running (truncated, deleted, re-created) is an error that stops the
      // partition (onPositionOutOfRange), never a silent jump to the log start or end.
      { 'auto.offset.reset': 'error' },
    );
    // librdkafka's own log lines (log_level 3: errors), shown at reduced volume like every client's.
    this.consumer.on('event.log', (m) => {
      if (m.severity <= 3) this.log.error(m.message);
      else if (m.severity <= 5) this.log.warn(m.message);
    });
    this.consumer.setDefaultConsumeTimeout(CONSUME_WAIT_MS);
    this.consumer.setDefaultIsTimeoutOnlyForFirstMessage(true);
  }

  /**
   * librdkafka's rebalance callback, called during a `consume` call (and on disconnect). The work is
   * chained and awaited by the fetch loop before it fetches again.
   */
  private onRebalance(err: { code: number }, assignment: TopicPartition[]): void {
    const lost = err.code !== ERR_ASSIGN_PARTITIONS && this.consumer.assignmentLost();
    const handle = err.code === ERR_ASSIGN_PARTITIONS ? () => this.assign(assignment) : () => this.unassign(assignment, lost);
    const done: Promise<void> = (this.rebalancing ?? Promise.resolve())
      .then(handle)
      .catch((e: unknown) => this.log.error(`Error: the rebalance failed: ${String((e as Error)?.message ?? e)}`))
      .finally(() => {
        if (this.rebalancing === done) this.rebalancing = undefined;
        this.wake?.();
      });
    this.rebalancing = done;
  }

  private async assign(assignment: TopicPartition[]): Promise<void> {
    const partitions = assignment.filter((tp) => tp.topic === this.options.topic).map((tp) => tp.partition);
    let starts: Map<number, StartOffset>;
    for (const p of partitions) this.planning.set(p, undefined);
    try {
      starts = new Map(await this.handler!.onAssign(partitions));
    } catch {
      // The handler plans every failure itself; this is the last resort: every partition is assigned
      // and paused, never read from a default position.
      starts = new Map(partitions.map((p) => [p, 'stopped' as const]));
    }
    // A restart (or pause) asked for while the starts were planned is newer than the plan: the
    // partition's task was replaced meanwhile (a reset, a rewind), and it expects that offset. From
    // here on synchronous: no restart can slip in between.
    for (const p of partitions) {
      const asked = this.planning.get(p);
      if (asked !== undefined) starts.set(p, asked);
      this.planning.delete(p);
    }
    // Offsets handed to assign must be JS numbers (the client rejects strings); offsets stay far
    // below 2^53 in practice, and the planner stops a partition whose checkpoint exceeds it.
    try {
      this.consumer.incrementalAssign(
        assignment.map((tp) => {
          const start = starts.get(tp.partition) ?? 'beginning';
          return { topic: tp.topic, partition: tp.partition, offset: typeof start === 'bigint' ? Number(start) : OFFSET_BEGINNING };
        }),
      );
    } catch (e) {
      // librdkafka stays in its rebalance (join state wait-assign-call: no more rebalances, and a
      // close that never ends) until an incremental assign succeeds: an empty one ends it without
      // taking these partitions. Nothing of them is read; the handler stops them, visibly, rather than
      // leave them owned in the group and silently idle. Their later revocation unassigns nothing in
      // the client (unassigning what it never took would fail the whole call, and stall it likewise).
      this.native(() => this.consumer.incrementalAssign([]));
      for (const tp of assignment) this.unassigned.add(`${tp.topic}:${tp.partition}`);
      this.handler!.onAssignFailed(partitions, e instanceof Error ? e : new Error(String(e)));
      return;
    }
    for (const tp of assignment) this.unassigned.delete(`${tp.topic}:${tp.partition}`);
    const stopped: number[] = [];
    for (const p of partitions) {
      this.dropQueued(p);
      const start = starts.get(p) ?? 'beginning';
      this.queues.set(p, newQueue(start === 'stopped' ? null : start === 'beginning' ? 'log-start' : start));
      if (start === 'stopped') {
        this.held.add(p);
        stopped.push(p);
      } else this.held.delete(p);
    }
    // A partition this member paused before it lost it is paused again: resumed explicitly.
    this.native(() => this.consumer.resume(partitions.filter((p) => !this.held.has(p)).map((partition) => ({ topic: this.options.topic, partition }))));
    this.native(() => this.consumer.pause(stopped.map((partition) => ({ topic: this.options.topic, partition }))));
  }

  private async unassign(assignment: TopicPartition[], lost: boolean): Promise<void> {
    const partitions = assignment.filter((tp) => tp.topic === this.options.topic).map((tp) => tp.partition);
    this.handler!.onRevoke(partitions, lost);
    for (const p of partitions) {
      this.dropQueued(p);
      this.queues.delete(p);
      this.held.delete(p);
    }
    // Their batches in flight finish (or give up: the handler revoked their tasks) before the
    // partitions go to another member.
    if (!this.closing) await Promise.all(partitions.map((p) => this.inFlight.get(p)));
    // Called even when empty: librdkafka waits for the call (join state wait-unassign-call).
    this.consumer.incrementalUnassign(assignment.filter((tp) => !this.unassigned.delete(`${tp.topic}:${tp.partition}`)));
  }

  async start(handler: AssignmentHandler, eachBatch: EachBatch): Promise<void> {
    this.handler = handler;
    this.eachBatch = eachBatch;
    // Errors reported while connecting are seen too; the first one is what connect fails with.
    tapClientErrors(this.consumer, (e) => {
      this.connectError ??= e;
      this.onClientError(e);
    });
    await new Promise<void>((resolve, reject) =>
      this.consumer.connect(null, (err) => {
        if (err === null || err === undefined) resolve();
        else reject(this.connectError ?? err);
      }),
    );
    this.connected = true;
    this.consumer.subscribe([this.options.topic]);
    this.loop = this.fetchLoop();
  }

  private onClientError(e: Error & { code?: number }): void {
    this.log.error(`Error: ${e.message}`);
    if (kafkaErrorKind(kafkaErrorCode(e))?.kind === 'out-of-range') this.options.onPositionOutOfRange?.(e.message.split('\n')[0]!);
    this.options.onClientError?.(e);
  }

  /** Fetches while running: never while a rebalance is handled, never more than the bound ahead. */
  private async fetchLoop(): Promise<void> {
    const bound = this.options.maxBatchSize * this.options.concurrency;
    // In bytes too: a batch for each partition processed at once, and as much again ready.
    const bytesBound = MAX_BATCH_BYTES * this.options.concurrency;
    while (!this.stopping) {
      while (this.rebalancing !== undefined) await this.rebalancing;
      for (const change of this.betweenFetches.splice(0)) change();
      if (this.queued >= bound || this.queuedBytes >= bytesBound) {
        await this.sleep(1_000); // woken when a batch finishes
        continue;
      }
      const { err, messages } = await new Promise<{ err: (Error & { code?: number }) | null; messages: RawMessage[] }>((resolve) =>
        this.consumer.consume(bound - this.queued, (err, messages) => resolve({ err: err ?? null, messages: messages ?? [] })),
      );
      if (err !== null) {
        noteClientError(err);
        this.onClientError(err);
        await this.sleep(FETCH_ERROR_PAUSE_MS);
        continue;
      }
      const fetchedAt = performance.now();
      for (const m of messages) {
        const queue = this.queues.get(m.partition);
        // Not ours any more, paused, or waiting for its restart: dropped (a paused partition is
        // read again only from an explicit offset: reassigned, or restartAt).
        if (queue === undefined || this.held.has(m.partition) || m.topic !== this.options.topic) continue;
        queue.messages.push(m);
        queue.fetchedAt.push(fetchedAt);
        this.queued++;
        this.queuedBytes += bytesOf(m);
      }
      if (messages.length > 0) this.options.onFetched?.(fetchedAt);
      this.dispatch();
    }
  }

  /** Starts a batch on each partition that has records and none in flight, up to the concurrency. */
  private dispatch(): void {
    if (this.stopping) return;
    for (const [p, queue] of this.queues) {
      if (this.inFlight.size >= this.options.concurrency) return;
      if (queue.messages.length === 0 || this.inFlight.has(p) || this.held.has(p)) continue;
      let n = 0;
      let bytes = 0;
      for (const limit = Math.min(queue.messages.length, this.options.maxBatchSize); n < limit; n++) {
        const b = bytesOf(queue.messages[n]!);
        if (n > 0 && bytes + b > MAX_BATCH_BYTES) break;
        bytes += b;
      }
      const batch = queue.messages.splice(0, n);
      const fetchedAt = queue.fetchedAt.splice(0, n)[n - 1]!;
      this.queued -= batch.length;
      this.queuedBytes -= bytes;
      // Round robin: the partition goes to the back of the line.
      this.queues.delete(p);
      this.queues.set(p, queue);
      const topic = this.options.topic;
      // Each record's reading started after the one before it; the first's where the queue's did.
      const records = batch.map((m, i) => sourceRecord(topic, p, m, i === 0 ? (queue.from ?? undefined) : BigInt(batch[i - 1]!.offset) + 1n));
      queue.from = BigInt(batch[n - 1]!.offset) + 1n;
      const done = this.eachBatch!(p, records, fetchedAt)
        .catch((e: unknown) => {
          // The runner's batches do not throw (every failure stops the partition there); should one,
          // its partition hands over nothing more, visibly, instead of being redelivered in a loop.
          this.log.error(`Error: a batch of partition ${p} failed: ${String((e as Error)?.message ?? e)}; the partition is paused`);
          this.pause([p]);
        })
        .finally(() => {
          this.inFlight.delete(p);
          this.dispatch();
          this.wake?.();
        });
      this.inFlight.set(p, done);
    }
  }

  private dropQueued(partition: number): void {
    const queue = this.queues.get(partition);
    if (queue === undefined) return;
    this.queued -= queue.messages.length;
    for (const m of queue.messages) this.queuedBytes -= bytesOf(m);
    queue.messages.length = 0;
    queue.fetchedAt.length = 0;
    // What is fetched next does not follow what was handed over: only a new start says where it begins.
    queue.from = null;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => done(), ms);
      const done = () => {
        clearTimeout(timer);
        if (this.wake === done) this.wake = undefined;
        resolve();
      };
      this.wake = done;
    });
  }

  /** A call into librdkafka that fails when the partitions are no longer assigned: not fatal. */
  private native(call: () => void): void {
    try {
      call();
    } catch {
      // Not fatal: a stopped PartitionTask also ignores (and never checkpoints) what it is given.
    }
  }

  /** Hands nothing more of these partitions over (what was fetched is dropped) and stops fetching them. */
  pause(partitions: number[]): void {
    if (partitions.length === 0) return;
    for (const p of partitions) {
      if (this.planning.has(p)) this.planning.set(p, 'stopped');
      this.dropQueued(p);
      if (this.queues.has(p)) this.held.add(p);
    }
    this.native(() => this.consumer.pause(partitions.map((partition) => ({ topic: this.options.topic, partition }))));
  }

  /**
   * Restarts an assigned partition at `offset` (after `exactlyonce checkpoints reset`), whatever state
   * its fetcher is in. A plain seek is not enough: a partition whose position fell outside the log is
   * left stopped by librdkafka (auto.offset.reset=error: fetch state NONE), and then refuses a seek
   * (ERR__STATE) and a resume. So the partition is taken out of this member's assignment and put back
   * at `offset` (incremental unassign/assign outside a rebalance, which librdkafka allows; the group is
   * not involved), and resumed. That change is made between two `consume` calls, and until then the
   * partition hands over nothing: no record of the old position is handed over after this call
   * returns. Its batch in flight, if any, finishes first.
   *
   * A partition that has no fetch queue here yet is not forgotten: while its assignment is being
   * planned (onAssign in flight) the restart replaces the planned start; one the client refused to
   * assign (onAssignFailed) is assigned at `offset` now, or the refusal is reported again. Only a
   * partition this member does not own is left alone.
   */
  restartAt(partition: number, offset: bigint): void {
    if (offset < 0n || offset > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error(`cannot restart at offset ${offset}`);
    const tp = { topic: this.options.topic, partition };
    if (this.planning.has(partition)) {
      this.planning.set(partition, offset);
      return;
    }
    if (this.unassigned.has(`${tp.topic}:${partition}`)) {
      this.betweenFetches.push(() => this.assignRefused(partition, offset));
      this.wake?.();
      return;
    }
    if (!this.queues.has(partition)) return; // not ours (any more)
    this.dropQueued(partition);
    this.held.add(partition);
    this.betweenFetches.push(() => {
      const queue = this.queues.get(partition);
      if (queue === undefined) return; // revoked meanwhile
      this.dropQueued(partition);
      this.consumer.incrementalUnassign([tp]);
      this.consumer.incrementalAssign([{ ...tp, offset: Number(offset) }]);
      queue.from = offset;
      this.native(() => this.consumer.resume([tp]));
      this.held.delete(partition);
    });
    this.wake?.();
  }

  /** Assigns, at `offset`, a partition the group gave this member and the client refused to take; tells the handler when it refuses again. */
  private assignRefused(partition: number, offset: bigint): void {
    const tp = { topic: this.options.topic, partition };
    if (!this.unassigned.has(`${tp.topic}:${partition}`)) return; // revoked meanwhile
    try {
      this.consumer.incrementalAssign([{ ...tp, offset: Number(offset) }]);
    } catch (e) {
      this.handler!.onAssignFailed([partition], e instanceof Error ? e : new Error(String(e)));
      return;
    }
    this.unassigned.delete(`${tp.topic}:${partition}`);
    this.queues.set(partition, newQueue(offset));
    this.held.delete(partition);
    this.native(() => this.consumer.resume([tp]));
  }

  /** Leaves the group after the batches in flight finish. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.stopping = true;
      this.wake?.();
      await this.loop?.catch(() => undefined);
      await Promise.all(this.inFlight.values());
      while (this.rebalancing !== undefined) await this.rebalancing;
      this.closing = true;
      // A client whose connect failed was disconnected by the client itself.
      if (this.connected) await new Promise<void>((resolve) => this.consumer.disconnect(() => resolve()));
    })().catch(() => undefined);
    return this.stopped;
  }
}

interface TopicPartition {
  topic: string;
  partition: number;
}

/** What a fetched record weighs, for the byte bounds: its key and value. */
function bytesOf(m: RawMessage): number {
  return (m.value?.length ?? 0) + (m.key?.length ?? 0);
}

interface RawMessage {
  value: Buffer | null;
  key?: Buffer | null;
  offset: number;
  partition: number;
  topic: string;
  timestamp: number;
  headers?: Array<Record<string, Buffer>>;
}

/** The client's lower-level KafkaConsumer, as used here (lib/kafka-consumer.js). */
interface LowLevelConsumer {
  connect(options: object | null, cb: (err: unknown) => void): void;
  disconnect(cb: (err: unknown) => void): void;
  subscribe(topics: string[]): void;
  consume(n: number, cb: (err: (Error & { code?: number }) | null | undefined, messages: RawMessage[] | undefined) => void): void;
  setDefaultConsumeTimeout(ms: number): void;
  setDefaultIsTimeoutOnlyForFirstMessage(only: boolean): void;
  incrementalAssign(assignments: Array<TopicPartition & { offset: number }>): void;
  incrementalUnassign(assignments: TopicPartition[]): void;
  assignmentLost(): boolean;
  pause(partitions: TopicPartition[]): void;
  resume(partitions: TopicPartition[]): void;
  on(event: 'event.error', listener: (e: Error & { code?: number }) => void): void;
  on(event: 'event.log', listener: (m: { severity: number; message: string }) => void): void;
}
