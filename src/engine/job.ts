/**
 * What a user implements to run an exactly-once Kafka → Cassandra job on the engine. The engine owns
 * partitions, offsets, checkpoints, retries and quarantine; a Job only decodes records and writes their
 * outputs.
 */
import type { Client } from '../cassandra/session.js';
import type { SourceRecord } from '../kafka/record.js';

/** One Kafka record as the engine hands it to a job. */
export type { SourceRecord } from '../kafka/record.js';

/** A decoded record, or why it cannot be decoded (the engine then quarantines it). */
export type Decoded<T> = { ok: true; value: T } | { ok: false; reason: string; detail: string };

export interface DecodedRecord<T> {
  readonly record: SourceRecord;
  readonly value: T;
}

/** A record for a Kafka topic the job publishes to (e.g. derived results). */
export interface PublishRecord {
  readonly key: string | Buffer;
  readonly value: string | Buffer;
}

/** What the engine gives a job once connected. */
export interface JobContext {
  readonly session: Client;
  readonly keyspace: string;
  /**
   * Publishes records with the engine's idempotent producer; resolves when the broker acknowledged
   * them all. Records with the same key keep their order.
   */
  publish(topic: string, records: readonly PublishRecord[]): Promise<void>;
}

export interface Job<T> {
  /** The job's name: the key of its row in the keyspace's `job` table (src/engine/job-binding.ts). */
  readonly name: string;
  /** The topics the job publishes to, if any: the Runner checks at start that they exist. */
  readonly outputTopics?: readonly string[];
  /**
   * Everything that changes what a record becomes (decode limits, rules). Stored with the job when it
   * is first run; a worker whose settings differ from the stored ones refuses to start
   * (EO_JOB_CONFIG_MISMATCH), so two workers can never write competing results.
   */
  readonly settings?: Readonly<Record<string, string | number | boolean>>;
  /** Pure and deterministic: the same record always decodes the same way. */
  decode(record: SourceRecord): Decoded<T>;
  /** Called once the Cassandra session is open (prepare statements, check tables). */
  open(context: JobContext): Promise<void>;
  /**
   * Stores the outputs of the decoded records of one batch of one partition. Called before that
   * batch's checkpoint is written, and possibly again for the same records after a crash or by a
   * zombie, so it MUST be idempotent: writing the same records twice leaves the same rows.
   * A rejected promise is retried by the engine when the error is retriable.
   */
  write(partition: number, records: readonly DecodedRecord<T>[]): Promise<void>;
}
