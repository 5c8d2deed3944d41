/**
 * librdkafka's consumer as src/kafka/consumer.ts drives it: the client's lower-level KafkaConsumer,
 * created with the properties that make it a group member which never moves, commits or prefetches
 * beyond its bounds by itself, and the shapes of what it hands back. A file of its own so that the
 * group consumer reads as what it does with the client, not how the client is configured.
 */
import { createRequire } from 'node:module';
import type { ConnectionConfig } from '../config.js';
import { baseProperties, type quietLogger } from './client.js';
import type { ConsumerOptions } from './consumer-contract.js';

/** See the consumer's properties: how long a partition whose prefetch queue is full waits to fetch again. */
export const FETCH_QUEUE_BACKOFF_MS = 20;

/** How long one `consume` call waits for a first record (it returns at once with what is there). */
const CONSUME_WAIT_MS = 100;

export interface TopicPartition {
  topic: string;
  partition: number;
}

/** A record as `consume` hands it over. */
export interface RawMessage {
  value: Buffer | null;
  key?: Buffer | null;
  offset: number;
  partition: number;
  topic: string;
  timestamp: number;
  headers?: Array<Record<string, Buffer>>;
}

/** The client's lower-level KafkaConsumer, as used here (lib/kafka-consumer.js). */
export interface LowLevelConsumer {
  connect(options: object | null, cb: (err: unknown) => void): void;
  disconnect(cb: (err: unknown) => void): void;
  subscribe(topics: string[]): void;
  consume(n: number, cb: (err: (Error & { code?: number }) | null | undefined, messages: RawMessage[] | undefined) => void): void;
  setDefaultConsumeTimeout(ms: number): void;
  setDefaultIsTimeoutOnlyForFirstMessage(only: boolean): void;
  incrementalAssign(assignments: Array<TopicPartition & { offset: number }>): void;
  incrementalUnassign(assignments: TopicPartition[]): void;
  assignmentLost(): boolean;
  /** What the client holds now. */
  assignments(): TopicPartition[];
  pause(partitions: TopicPartition[]): void;
  resume(partitions: TopicPartition[]): void;
  on(event: 'event.error', listener: (e: Error & { code?: number }) => void): void;
  on(event: 'event.log', listener: (m: { severity: number; message: string }) => void): void;
}

/**
 * The group member's client, its librdkafka log lines sent to `log`, its rebalances to `onRebalance`
 * (called during a `consume` call, and on disconnect).
 */
export function createNativeConsumer(
  config: ConnectionConfig,
  options: ConsumerOptions,
  log: ReturnType<typeof quietLogger>,
  onRebalance: (err: { code: number }, assignment: TopicPartition[]) => void,
): LowLevelConsumer {
  const { KafkaConsumer } = createRequire(import.meta.url)('@confluentinc/kafka-javascript') as { KafkaConsumer: new (conf: object, topicConf: object) => LowLevelConsumer };
  const consumer = new KafkaConsumer(
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
      rebalance_cb: onRebalance,
    },
    // The consumer never moves its position by itself: every partition is assigned at an explicit
    // offset (its checkpoint, or OFFSET_BEGINNING when never checkpointed), and a position that falls
    // outside the log while running (truncated, deleted, re-created) is an error that stops the
    // partition (onPositionOutOfRange), never a silent jump to the log start or end.
    { 'auto.offset.reset': 'error' },
  );
  // librdkafka's own log lines (log_level 3: errors), shown at reduced volume like every client's.
  consumer.on('event.log', (m) => {
    if (m.severity <= 3) log.error(m.message);
    else if (m.severity <= 5) log.warn(m.message);
  });
  consumer.setDefaultConsumeTimeout(CONSUME_WAIT_MS);
  consumer.setDefaultIsTimeoutOnlyForFirstMessage(true);
  return consumer;
}
