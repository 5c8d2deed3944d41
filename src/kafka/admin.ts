/**
 * The Admin API: topics and their partitions and watermarks. One short-lived admin client per call
 * site; every call has a deadline and turns "no answer" into EO_KAFKA_UNAVAILABLE naming the brokers.
 */
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { baseProperties, closeInBackground, kafkaJS, kafkaSecurityError, kafkaUnavailable, quietLogger, recentRefusal, type KafkaJSNamespace } from './client.js';
import { probeRefusal } from './producer.js';
import { settleWithin } from '../deadline.js';

export interface TopicSpec {
  topic: string;
  partitions: number;
  replicationFactor: number;
  /** Topic configs, e.g. `{ 'cleanup.policy': 'compact' }`. */
  configs?: Record<string, string>;
}

export interface Watermarks {
  partition: number;
  /** The log start offset: the first offset still stored. */
  low: bigint;
  /** The log end offset: the offset the next record will get. */
  high: bigint;
  /**
   * The last stable offset: the end of what a read_committed consumer can read now. Below `high` while
   * a transaction is open (its records, and any after them, wait for its commit or abort); equal to it
   * otherwise. A checkpoint here has nothing left to read, whatever aborted records and transaction
   * markers lie before it.
   */
  stable: bigint;
}

/** ListOffsets' isolation level for the last stable offset (the client's IsolationLevel.READ_COMMITTED). */
const READ_COMMITTED = 1;

export class KafkaAdmin {
  private readonly admin: KafkaJSNamespace.Admin;
  /** The one connection attempt (concurrent calls share it: a second connect() would be refused). */
  private connecting: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly timeoutMs = 15_000,
  ) {
    const { Kafka } = kafkaJS();
    this.admin = new Kafka({}).admin({
      kafkaJS: { logger: quietLogger(() => undefined) },
      ...baseProperties(config, 'exactlyonce-admin'),
    } as KafkaJSNamespace.AdminConstructorConfig);
  }

  /**
   * The calls, one after another. The client runs its requests one at a time anyway (each holds the
   * connection's write lock while it waits for its answer, in a thread of libuv's pool), and its
   * disconnect is synchronous and takes that lock too: with requests still waiting on brokers that are
   * down, it blocked the whole process — timers, signals, the stop deadline — until their 15 s
   * timeouts had passed one after the other, and so did the process's exit, which joins that pool.
   * Queued here instead, a call not started when close() comes is never sent, and close() waits, without
   * blocking anything, for the one call under way.
   */
  private queue: Promise<unknown> = Promise.resolve();

  private call<T>(fn: () => Promise<T>): Promise<T> {
    let request: Promise<unknown> = Promise.resolve();
    const run = this.queue.then(() => {
      if (this.closed) throw kafkaUnavailable(this.config, new Error('the admin client was closed before the request was sent'));
      return this.attempt(() => (request = fn()) as Promise<T>);
    });
    // The next call waits for this one's request too (a refusal found ends the call before its request).
    this.queue = run.then(
      () => request,
      () => request,
    ).catch(() => undefined);
    return run;
  }

  private async attempt<T>(fn: () => Promise<T>): Promise<T> {
    try {
      this.connecting ??= this.admin.connect().catch((e: unknown) => {
        this.connecting = undefined;
        throw e;
      });
      await this.connecting;
      return await this.refusalWatched(fn());
    } catch (e) {
      if (e instanceof ExactlyOnceError) throw e;
      const code = (e as { code?: number; type?: string }).type;
      if (code === 'UNKNOWN_TOPIC_OR_PARTITION' || code === 'ERR_UNKNOWN_TOPIC_OR_PART') {
        throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic does not exist; run \`exactlyonce topic create\``, { cause: e });
      }
      // The admin client reports a refused login or handshake only as log text: a tapped probe
      // connection finds it by its code (src/kafka/producer.ts).
      if (kafkaSecurityError(this.config, e) === undefined) await probeRefusal(this.config);
      throw kafkaUnavailable(this.config, e);
    }
  }

  /**
   * A call that has not answered within 2 s may be waiting on a broker that refuses this client, which
   * the admin client would only say when its own deadline (timeoutMs) passes, and then as a transport
   * failure: the shared refusal probe (src/kafka/producer.ts) tells by its code, and the call ends
   * with that refusal at once.
   */
  private refusalWatched<T>(call: Promise<T>): Promise<T> {
    const watch = new Promise<never>((_, reject) => {
      const timer = setTimeout(() => {
        void probeRefusal(this.config).then(() => {
          const refusal = recentRefusal();
          if (refusal !== undefined) reject(refusal);
        });
      }, 2000);
      void call.finally(() => clearTimeout(timer)).catch(() => undefined);
    });
    watch.catch(() => undefined); // (a refusal found after the call settled changes nothing)
    return Promise.race([call, watch]);
  }

  async listTopics(): Promise<string[]> {
    return this.call(() => this.admin.listTopics({ timeout: this.timeoutMs }));
  }

  /** Partition count of a topic, or null when it does not exist. */
  async partitionCount(topic: string): Promise<number | null> {
    return (await this.describeTopic(topic))?.partitions ?? null;
  }

  /**
   * Partition count and replication factor (the most replicas of any partition) of a topic, or null
   * when it does not exist. Its configs (e.g. cleanup.policy) are not readable: the client has no
   * DescribeConfigs.
   */
  async describeTopic(topic: string): Promise<{ partitions: number; replicationFactor: number } | null> {
    const topics = await this.listTopics();
    if (!topics.includes(topic)) return null;
    const [meta] = await this.call(() => this.admin.fetchTopicMetadata({ topics: [topic], timeout: this.timeoutMs }));
    if (meta === undefined) return null;
    return { partitions: meta.partitions.length, replicationFactor: Math.max(0, ...meta.partitions.map((p) => p.replicas.length)) };
  }

  /** The broker id leading each partition of a topic (partition → leader). */
  async leaders(topic: string): Promise<Map<number, number>> {
    const [meta] = await this.call(() => this.admin.fetchTopicMetadata({ topics: [topic], timeout: this.timeoutMs }));
    return new Map((meta?.partitions ?? []).map((p) => [p.partitionId, p.leader]));
  }

  /**
   * Creates the topic unless it exists. Idempotent; returns what it found (or made) so the caller can
   * say so and warn about a different partition count or replication factor.
   */
  async ensureTopic(spec: TopicSpec): Promise<{ created: boolean; partitions: number; replicationFactor: number }> {
    const existing = await this.describeTopic(spec.topic);
    if (existing !== null) return { created: false, ...existing };
    const created = await this.call(async () => {
      try {
        await this.admin.createTopics({
          timeout: this.timeoutMs,
          topics: [
            {
              topic: spec.topic,
              numPartitions: spec.partitions,
              replicationFactor: spec.replicationFactor,
              configEntries: Object.entries(spec.configs ?? {}).map(([name, value]) => ({ name, value })),
            },
          ],
        });
        return true;
      } catch (e) {
        // The broker's answer for this topic (the client wraps it in an aggregate error).
        const refusal = (e as { errors?: Array<{ type?: string; message?: string }> }).errors?.[0];
        if (refusal === undefined) throw e;
        // Another process created it between our check and our create: that is success.
        if (/ALREADY_EXISTS/.test(refusal.type ?? '')) return false;
        throw new ExactlyOnceError('EO_CONFIG_INVALID', `Kafka refused to create topic ${spec.topic}: ${(refusal.message ?? '').split('\n')[0]} (${refusal.type ?? 'unknown error'})`, { cause: e });
      }
    });
    if (!created) {
      const existing = await this.describeTopic(spec.topic);
      if (existing !== null) return { created: false, ...existing };
    }
    return { created: true, partitions: spec.partitions, replicationFactor: spec.replicationFactor };
  }

  /**
   * The topic's identity, its Kafka topic ID (a UUID, base64 in the protocol), or null when the topic
   * does not exist. A topic deleted and re-created under the same name gets a new ID.
   */
  async topicId(topic: string): Promise<string | null> {
    const metas = await this.call(() => this.admin.fetchTopicMetadata({ topics: [topic], timeout: this.timeoutMs })).catch((e: unknown) => {
      if (e instanceof ExactlyOnceError && e.code === 'EO_TOPIC_MISMATCH') return [];
      throw e;
    });
    // The client's types name the field base64str; at run time (1.10) it is base64.
    const uuid = (metas[0] as { topicId?: { base64?: string; base64str?: string } } | undefined)?.topicId;
    const id = uuid?.base64 ?? uuid?.base64str;
    return id === undefined || id === '' ? null : id;
  }

  /** Deletes the records of a partition below `before` (its log start becomes `before`). */
  async deleteRecords(topic: string, partition: number, before: bigint): Promise<void> {
    await this.call(() => this.admin.deleteTopicRecords({ topic, partitions: [{ partition, offset: String(before) }], timeout: this.timeoutMs } as never));
  }

  async deleteTopic(topic: string): Promise<void> {
    await this.call(() => this.admin.deleteTopics({ topics: [topic], timeout: this.timeoutMs }));
  }

  /**
   * Each partition's log start, end and last stable offset (ListOffsets read_uncommitted and
   * read_committed). A partition the broker could not answer for (the client then reports -1, e.g.
   * while its leader moves or the broker is overloaded) makes the call fail with the retriable
   * EO_KAFKA_UNAVAILABLE: -1 is not a log end, and a caller comparing a position with it would wrongly
   * see the position outside the log.
   */
  async watermarks(topic: string): Promise<Watermarks[]> {
    // Two calls (the client would run their requests one after the other anyway): a close between them sends only the first.
    const all = await this.call(() => this.admin.fetchTopicOffsets(topic, { timeout: this.timeoutMs } as never));
    const committed = await this.call(() => this.admin.fetchTopicOffsets(topic, { timeout: this.timeoutMs, isolationLevel: READ_COMMITTED } as never));
    const stable = new Map(committed.map((o) => [o.partition, BigInt(o.high)]));
    const marks = all
      .map((o) => ({ partition: o.partition, low: BigInt(o.low), high: BigInt(o.high), stable: stable.get(o.partition) ?? -1n }))
      .sort((a, b) => a.partition - b.partition);
    const unknown = marks.filter((m) => m.low < 0n || m.high < 0n || m.stable < 0n);
    if (unknown.length > 0) {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka did not answer for the log start and end of ${topic} partition(s) ${unknown.map((m) => m.partition).join(', ')} (it reported -1); asking again`);
    }
    // Asked one after the other, the stable offset can be a moment newer than the end: never above it.
    return marks.map((m) => (m.stable > m.high ? { ...m, stable: m.high } : m));
  }

  /** Each partition's log start alone (one ListOffsets round instead of watermarks' two); -1 fails as there. */
  async logStarts(topic: string): Promise<Map<number, bigint>> {
    const offsets = await this.call(() => this.admin.fetchTopicOffsets(topic, { timeout: this.timeoutMs } as never));
    const unknown = offsets.filter((o) => BigInt(o.low) < 0n);
    if (unknown.length > 0) {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka did not answer for the log start of ${topic} partition(s) ${unknown.map((o) => o.partition).join(', ')} (it reported -1); asking again`);
    }
    return new Map(offsets.map((o) => [o.partition, BigInt(o.low)]));
  }

  /**
   * Per partition, the first offset whose record's timestamp is at or after `timestampMs` (Kafka's
   * ListOffsets by timestamp, KIP-79), or the log end when no record is that recent. `checkpoints
   * reset --to DATETIME` moves checkpoints there.
   */
  async offsetsForTime(topic: string, timestampMs: number): Promise<Map<number, bigint>> {
    const offsets = await this.call(() => this.admin.fetchTopicOffsetsByTimestamp(topic, timestampMs, { timeout: this.timeoutMs } as never));
    const unknown = offsets.filter((o) => BigInt(o.offset) < 0n);
    if (unknown.length > 0) {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka did not answer for the offsets of ${topic} at ${new Date(timestampMs).toISOString()} on partition(s) ${unknown.map((o) => o.partition).join(', ')} (it reported -1); asking again`);
    }
    return new Map(offsets.map((o) => [o.partition, BigInt(o.offset)]));
  }

  /**
   * Idempotent; also releases a client whose connect failed. Disconnects once the call under way has
   * settled (see queue); calls queued behind it fail at once.
   * With `graceMs`, waits at most that long for it: the disconnect then happens in the background once
   * it settles (a stopping worker does not wait out a request to brokers that are down: its answer is
   * of no use to it any more).
   */
  async close(graceMs?: number): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closed = this.queue.then(async () => {
      this.connecting = undefined;
      await this.admin.disconnect().catch(() => undefined);
    });
    if (graceMs === undefined) return closed;
    closeInBackground(closed); // (the process's exit waits for it: src/kafka/client.ts)
    await settleWithin(closed, graceMs, () => undefined);
  }
}
