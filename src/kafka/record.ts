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
}
