/**
 * Reads a topic back partition by partition, in offset order, in chunks, with strictly bounded memory:
 * the auditor's view of the broker's log, and the tests' (`readTopic`). It uses the client's low-level
 * consumer (explicit `assign`, `consume(n)` pulls) rather than the KafkaJS-style group consumer, whose
 * message cache is sized by the measured consumption rate and so has no useful bound: reading 1 M
 * records it grows past 1.5 GB.
 * Here at most one chunk is in JavaScript, plus librdkafka's prefetch queue (capped below).
 *
 * Offsets are not contiguous; the reader knows it reached `until` when a record at or after it
 * arrives, or when the client reports the end of the partition at or past it (the client steps over
 * transaction markers and aborted records, which are never delivered, read_committed).
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from './admin.js';
import { KAFKA_UNREACHABLE_HINT, kafkaJS } from './client.js';
import { recordHeaders, type SourceRecord } from './record.js';

interface RawMessage {
  value: Buffer | null;
  key: Buffer | string | null | undefined;
  offset: number;
  partition: number;
  topic: string;
  timestamp?: number;
  headers?: Array<Record<string, Buffer>>;
}

interface LowLevelConsumer {
  connect(options: object, cb: (err: unknown) => void): void;
  disconnect(cb: (err: unknown) => void): void;
  assign(assignments: Array<{ topic: string; partition: number; offset: number }>): void;
  unassign(): void;
  consume(n: number, cb: (err: unknown, messages: RawMessage[]) => void): void;
  setDefaultConsumeTimeout(ms: number): void;
  setDefaultIsTimeoutOnlyForFirstMessage(only: boolean): void;
  on(event: 'partition.eof', listener: (e: { topic: string; partition: number; offset: number }) => void): void;
}

export interface LogChunk {
  /** Records in offset order, all below `until`. */
  records: SourceRecord[];
}

/** Thrown when the broker returned nothing for `idleTimeoutMs` although records were still expected. */
export class IncompleteRead extends Error {
  constructor(
    readonly partition: number,
    readonly at: bigint,
  ) {
    super(`partition ${partition}: no record arrived from offset ${at} on`);
  }
}

export class LogReader {
  private eof: { partition: number; offset: number } | undefined;
  private closed: Promise<void> | undefined;

  private constructor(private readonly consumer: LowLevelConsumer) {
    consumer.on('partition.eof', (e) => (this.eof = { partition: e.partition, offset: e.offset }));
  }

  /** `clientId` names the reader to the broker; its group is a throw-away one with that prefix. */
  static async open(config: ConnectionConfig, clientId = 'exactlyonce-auditor'): Promise<LogReader> {
    kafkaJS(); // fails with EO_KAFKA_CLIENT_MISSING, and a clear message, when the native client is not built
    const require = createRequire(import.meta.url);
    const { KafkaConsumer } = require('@confluentinc/kafka-javascript') as { KafkaConsumer: new (conf: object, topicConf: object) => LowLevelConsumer };
    const consumer = new KafkaConsumer(
      {
        log_level: 3,
        ...config.kafkaConfig,
        // After the user's properties (--kafka-config), so that none of them can weaken the audit:
        'bootstrap.servers': config.brokers.join(','),
        'client.id': clientId,
        // A throw-away group: offsets are assigned explicitly and nothing is ever committed.
        'group.id': `${clientId}-${randomBytes(6).toString('hex')}`,
        'enable.auto.commit': false,
        'enable.partition.eof': true,
        'isolation.level': 'read_committed',
        // The prefetch bound (KiB): librdkafka's queue is the only buffer besides one chunk. 4 MiB
        // holds several 5,000-record chunks of events (about 100 bytes each); verify runs several
        // readers at once (--lanes), each with its own queue (16 MiB each put 4 lanes at 486 MiB RSS
        // on 1,000,000 records).
        'queued.max.messages.kbytes': 4096,
        'queued.min.messages': 10000,
        // A partition read to its end leaves a fetch waiting at the broker for new records, up to
        // fetch.wait.max.ms (default 500 ms); the next partition assigned is fetched only after it
        // returns. With one partition after another that was 0.5 s per partition (120 partitions of
        // 1,000 records: 30 s, nearly all of it waiting). The reader never waits for new records.
        'fetch.wait.max.ms': 10,
      },
      { 'auto.offset.reset': 'earliest' },
    );
    consumer.setDefaultConsumeTimeout(500);
    consumer.setDefaultIsTimeoutOnlyForFirstMessage(true);
    await new Promise<void>((resolve, reject) =>
      consumer.connect({ timeout: 15_000 }, (err) => (err ? reject(new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka at ${config.brokers.join(',')} did not answer (${String(err)}); ${KAFKA_UNREACHABLE_HINT}`, { cause: err })) : resolve())),
    );
    return new LogReader(consumer);
  }

  /**
   * The records of [from, until) of one partition, `chunk` at most at a time. Throws IncompleteRead
   * when nothing arrives for `idleTimeoutMs` while records are still expected.
   */
  async *read(topic: string, partition: number, from: bigint, until: bigint, chunk = 5000, idleTimeoutMs = 60_000): AsyncGenerator<LogChunk> {
    if (until <= from) return;
    this.eof = undefined;
    this.consumer.assign([{ topic, partition, offset: Number(from) }]);
    try {
      let next = from;
      let lastProgress = Date.now();
      for (;;) {
        // Fill one chunk from what the client has fetched; a call waits (500 ms at most) only for
        // its first message, so a short partition or the end of one costs no idle wait.
        const records: SourceRecord[] = [];
        let done = false;
        while (records.length < chunk && !done) {
          const messages = await new Promise<RawMessage[]>((resolve, reject) =>
            this.consumer.consume(chunk - records.length, (err, m) => (err ? reject(err) : resolve(m))),
          );
          for (const m of messages) {
            if (m.topic !== topic || m.partition !== partition) continue;
            const offset = BigInt(m.offset);
            if (offset < next) continue; // a re-delivery after a reconnect
            if (offset >= until) {
              done = true;
              break;
            }
            const headers = recordHeaders(m.headers);
            records.push({
              topic,
              partition,
              offset,
              key: m.key === null || m.key === undefined ? null : Buffer.isBuffer(m.key) ? m.key : Buffer.from(m.key),
              value: m.value ?? null,
              timestampMs: m.timestamp ?? 0,
              ...(headers === undefined ? {} : { headers }),
            });
            next = offset + 1n;
          }
          if (next >= until) done = true;
          if (messages.length > 0) {
            lastProgress = Date.now();
            continue;
          }
          // Nothing ready: the end of the partition (markers and aborted records are stepped over
          // and reported as the end), or a slow broker.
          const eof = this.eof as { partition: number; offset: number } | undefined;
          if (eof !== undefined && eof.partition === partition && BigInt(eof.offset) >= until) done = true;
          else if (records.length > 0) break;
          else if (Date.now() - lastProgress > idleTimeoutMs) throw new IncompleteRead(partition, next);
        }
        if (records.length > 0) yield { records };
        if (done) return;
      }
    } finally {
      this.consumer.unassign();
    }
  }

  /**
   * The offset of the first record a read_committed consumer receives in [from, until) of a partition,
   * or null when there is none: the range holds only aborted records and transaction markers (or
   * records removed by compaction). Throws IncompleteRead when the broker does not answer for
   * `idleTimeoutMs`. `from` must not be below the log start (the reader would start at the log start).
   */
  async firstOffset(topic: string, partition: number, from: bigint, until: bigint, idleTimeoutMs: number): Promise<bigint | null> {
    for await (const { records } of this.read(topic, partition, from, until, 1, idleTimeoutMs)) return records[0]!.offset;
    return null;
  }

  /** Idempotent. */
  close(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => this.consumer.disconnect(() => resolve()));
    return this.closed;
  }
}

/**
 * The record at `offset` of a partition, as a read_committed consumer receives it, or undefined when
 * there is none there (a transaction marker, an aborted record, one removed by compaction). Throws
 * IncompleteRead when the broker does not answer for `idleTimeoutMs`. What `quarantine add` and
 * `redrive` read one record with; `reader` is a LogReader (or a test's stand-in for its `read`).
 */
export async function readOne(reader: Pick<LogReader, 'read'>, topic: string, partition: number, offset: bigint, idleTimeoutMs = 30_000): Promise<SourceRecord | undefined> {
  let record: SourceRecord | undefined;
  for await (const chunk of reader.read(topic, partition, offset, offset + 1n, 1, idleTimeoutMs)) record = chunk.records[0];
  return record?.offset === offset ? record : undefined;
}

export interface ReadTopicOptions {
  /** Exclusive end offset per partition; default: the log end now. */
  until?: Map<number, bigint>;
  /** Throw IncompleteRead when no record arrived for this long although some are still expected, in ms. */
  idleTimeoutMs?: number;
}

/**
 * Reads every partition of a topic from its log start up to its end offset (`until`, by default the
 * log end at the time of the call) and calls `onBatch` for each chunk, partition by partition in offset
 * order. Resolves with each partition's log start, end and the number of records read.
 */
export async function readTopic(
  config: ConnectionConfig,
  topic: string,
  onBatch: (records: SourceRecord[]) => void | Promise<void>,
  options: ReadTopicOptions = {},
): Promise<Map<number, { low: bigint; end: bigint; read: number }>> {
  const admin = new KafkaAdmin(config);
  const marks = await admin.watermarks(topic).finally(() => admin.close());
  const ends = new Map(marks.map((w) => [w.partition, { low: w.low, end: options.until?.get(w.partition) ?? w.high, read: 0 }]));
  if (![...ends.values()].some((e) => e.end > e.low)) return ends;
  const reader = await LogReader.open(config, 'exactlyonce-reader');
  try {
    for (const [partition, e] of ends) {
      for await (const { records } of reader.read(topic, partition, e.low, e.end, 5000, options.idleTimeoutMs ?? 30_000)) {
        await onBatch(records);
        e.read += records.length;
      }
    }
    return ends;
  } finally {
    await reader.close();
  }
}
