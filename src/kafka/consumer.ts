/**
 * A consumer-group member with an awaited assignment hook. On every assignment, before anything is
 * fetched, it asks the caller where each new partition starts and assigns it at exactly that offset;
 * Kafka-side committed offsets are never read or written. Partitions are shared with the other members
 * by the cooperative-sticky assignor, so a rebalance moves only the partitions that must move.
 *
 * Built on @confluentinc/kafka-javascript's lower-level KafkaConsumer (librdkafka's consumer, pulled
 * with `consume(n)`, src/kafka/native-consumer.ts), not its KafkaJS-style layer, whose message cache,
 * worker barriers and payload objects cost CPU per record that this path does not spend
 * (bench/kafka-consume.ts measures both). What such a layer would do is done here, in one fetch loop
 * (the records waiting for their batch: src/kafka/fetch-queues.ts):
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
import type { ConnectionConfig } from '../config.js';
import { kafkaErrorCode, kafkaErrorKind, kafkaJS, noteClientError, quietLogger, tapClientErrors } from './client.js';
import type { AssignmentHandler, ConsumerOptions, EachBatch, StartOffset } from './consumer-contract.js';
import { FetchQueues, MAX_BATCH_BYTES } from './fetch-queues.js';
import { createNativeConsumer, type LowLevelConsumer, type RawMessage, type TopicPartition } from './native-consumer.js';

/** After a failed fetch, the next one waits this long (the client reconnects by itself). */
const FETCH_ERROR_PAUSE_MS = 100;

const ERR_ASSIGN_PARTITIONS = -175;
const OFFSET_BEGINNING = -2;

export class GroupConsumer {
  private readonly consumer: LowLevelConsumer;
  private readonly log: ReturnType<typeof quietLogger>;
  private handler: AssignmentHandler | undefined;
  private eachBatch: EachBatch | undefined;
  /** Records fetched and not yet handed over, per assigned partition (in offset order). */
  private readonly queues: FetchQueues;
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
  /** The connect under way: stop() waits for it (a client cannot be disconnected while connecting). */
  private connecting: Promise<void> | undefined;

  constructor(
    config: ConnectionConfig,
    private readonly options: ConsumerOptions,
  ) {
    kafkaJS(); // fails with EO_KAFKA_CLIENT_MISSING, and a clear message, when the native client is not built
    this.log = quietLogger((level, message) => options.onClientLog?.(level, message));
    this.queues = new FetchQueues(options.topic, options.maxBatchSize);
    this.consumer = createNativeConsumer(config, options, this.log, (err, assignment) => this.onRebalance(err, assignment));
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
      this.queues.drop(p);
      const start = starts.get(p) ?? 'beginning';
      this.queues.open(p, start === 'stopped' ? null : start === 'beginning' ? 'log-start' : start);
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
      this.queues.drop(p);
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
    this.connecting = new Promise<void>((resolve, reject) =>
      this.consumer.connect(null, (err) => {
        if (err === null || err === undefined) {
          this.connected = true;
          resolve();
        } else reject(this.connectError ?? err);
      }),
    );
    await this.connecting;
    // Stopped while connecting: stop() disconnects it; nothing is subscribed.
    if (this.stopping) return;
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
      if (this.queues.queued >= bound || this.queues.queuedBytes >= bytesBound) {
        await this.sleep(1_000); // woken when a batch finishes
        continue;
      }
      const { err, messages } = await new Promise<{ err: (Error & { code?: number }) | null; messages: RawMessage[] }>((resolve) =>
        this.consumer.consume(bound - this.queues.queued, (err, messages) => resolve({ err: err ?? null, messages: messages ?? [] })),
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
        this.queues.push(queue, m, fetchedAt);
      }
      if (messages.length > 0) this.options.onFetched?.(fetchedAt);
      this.dispatch();
    }
  }

  /** Starts a batch on each partition that has records and none in flight, up to the concurrency. */
  private dispatch(): void {
    if (this.stopping) return;
    for (const [p, queue] of this.queues.entries()) {
      if (this.inFlight.size >= this.options.concurrency) return;
      if (queue.messages.length === 0 || this.inFlight.has(p) || this.held.has(p)) continue;
      const { records, fetchedAt } = this.queues.take(p, queue);
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
      this.queues.drop(p);
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
    this.queues.drop(partition);
    this.held.add(partition);
    this.betweenFetches.push(() => {
      const queue = this.queues.get(partition);
      if (queue === undefined) return; // revoked meanwhile
      this.queues.drop(partition);
      let unassigned = false;
      try {
        this.consumer.incrementalUnassign([tp]);
        unassigned = true;
        this.consumer.incrementalAssign([{ ...tp, offset: Number(offset) }]);
      } catch (e) {
        // Never a throw out of the fetch loop (nothing would handle it, and the process would end):
        // the partition stays held (nothing of it is handed over) and its task stops, visibly. One
        // the client still holds is paused there; one it let go of is assigned again by a later
        // restart, and left out of the unassign on revocation (unassigning what the client does not
        // hold fails the whole call).
        let holds = !unassigned;
        this.native(() => (holds = this.consumer.assignments().some((a) => a.topic === tp.topic && a.partition === partition)));
        if (holds) this.native(() => this.consumer.pause([tp]));
        else this.unassigned.add(`${tp.topic}:${partition}`);
        this.handler!.onAssignFailed([partition], e instanceof Error ? e : new Error(String(e)));
        return;
      }
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
    this.queues.open(partition, offset);
    this.held.delete(partition);
    this.native(() => this.consumer.resume([tp]));
  }

  /** What stop() waits for now (for a stop that overruns its deadline to say why). */
  get stopStep(): string {
    return this.stopStepNow();
  }

  private stopStepNow: () => string = () => 'nothing';

  /** Leaves the group after the batches in flight finish. Idempotent. */
  stop(): Promise<void> {
    this.stopped ??= (async () => {
      this.stopping = true;
      this.wake?.();
      this.stopStepNow = () => 'the fetch loop to end';
      await this.loop?.catch(() => undefined);
      this.stopStepNow = () => `the batches in flight of partitions ${[...this.inFlight.keys()].sort((a, b) => a - b).join(',')}`;
      await Promise.all(this.inFlight.values());
      this.stopStepNow = () => 'the rebalance being handled';
      while (this.rebalancing !== undefined) await this.rebalancing;
      this.closing = true;
      // A client still connecting is disconnected once connected (an exit meanwhile would tear the
      // process down under its threads: src/kafka/client.ts, kafkaClientsClosed); a client whose
      // connect failed was disconnected by the client itself.
      this.stopStepNow = () => 'the Kafka client to connect';
      await this.connecting?.catch(() => undefined);
      this.stopStepNow = () => "the Kafka client's close (leaving the group)";
      if (this.connected) await new Promise<void>((resolve) => this.consumer.disconnect(() => resolve()));
      this.stopStepNow = () => 'nothing';
    })().catch(() => undefined);
    return this.stopped;
  }
}
