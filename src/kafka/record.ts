/**
 * One Kafka record as the adapters read it: the consumer hands these to the engine, the log reader to
 * the auditor. It lives here, in the lowest layer that makes it; the engine re-exports it to jobs
 * (src/engine/job.ts).
 */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** The record's Kafka timestamp, epoch ms. */
  readonly timestampMs: number;
  /**
   * Where the group consumer's reading that brought this record started (src/kafka/consumer.ts): the
   * offset after the record it handed over before this one, or the offset it was assigned or restarted
   * at ('log-start': the log start of then). Every record a read_committed consumer receives from there
   * up to this one was handed over before it, in order, so [fetchedFrom, offset) holds no other.
   * Undefined when the source does not say (other readers).
   */
  readonly fetchedFrom?: bigint | 'log-start';
}
