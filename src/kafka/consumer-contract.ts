/**
 * What a GroupConsumer (src/kafka/consumer.ts) asks of its user and hands it: the options, the
 * assignment handler that plans where each partition starts, and the batch callback. A file of its
 * own so that the engine names these without depending on the consumer's machinery.
 */
import type { SourceRecord } from './record.js';

/**
 * Where an assigned partition starts: an offset, the log start when it was never checkpointed, or
 * 'stopped' for a partition that must not be read (it is assigned, then paused at once).
 */
export type StartOffset = bigint | 'beginning' | 'stopped';

export interface AssignmentHandler {
  /** Awaited before the partitions are assigned; must resolve with a start for each of them. */
  onAssign(partitions: number[]): Promise<Map<number, StartOffset>>;
  /** Partitions taken away (`lost` when the session expired, e.g. after a pause). */
  onRevoke(partitions: number[], lost: boolean): void;
  /**
   * The client refused to assign partitions that onAssign planned (its incrementalAssign threw), or to
   * move one that restartAt restarts: they are not read until the next rebalance gives them again, or
   * a later restartAt succeeds. Not called for a rebalance or a restart that succeeded.
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

/**
 * Called with each batch, one at a time per partition; `fetchedAt` is when (performance.now()) the
 * `consume` call that brought the batch's last record returned: every record of it was fetched from
 * the brokers before then.
 */
export type EachBatch = (partition: number, records: SourceRecord[], fetchedAt: number) => Promise<void>;
