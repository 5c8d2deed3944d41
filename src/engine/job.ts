/**
 * What a user implements to run an exactly-once Kafka → Cassandra job on the engine. The engine owns
 * partitions, offsets, checkpoints, retries and quarantine; a Job only decodes records and writes their
 * outputs.
 */
import type { Registry } from 'prom-client';
import type { Client } from '../cassandra/session.js';
import type { SourceRecord } from '../kafka/record.js';
import type { JobAudit } from './job-audit.js';

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
  /**
   * The worker's Prometheus registry (prom-client), for the job's own metrics: served on `/metrics`
   * beside the engine's. `open` may run more than once (it is retried): look a metric up
   * (`getSingleMetric`) before making it.
   */
  readonly metrics?: Registry;
}

/**
 * A migration the job declares for its own tables (`exactlyonce schema apply --job`): applied once, in
 * version order, and recorded in `<keyspace>.job_schema_migrations` under the job's name, apart from
 * the engine's own. `{{keyspace}}` in the CQL is replaced by the keyspace; statements end in `;`.
 */
export interface JobMigration {
  readonly version: number;
  readonly name: string;
  readonly cql: string;
}

/**
 * Fetches what a job's `decode` reads, for one batch, before the batch is decoded. The engine retries a
 * retriable rejection (the server does not answer) with backoff until it resolves — one log line when
 * `server` stops answering and one when it is back, its retries counted under its name — and decodes,
 * quarantines or skips nothing meanwhile; a rejection no retry fixes stops the partition, coded. What
 * the server answers for good (a schema id it does not know) is no error here: `decode` then says why
 * the record cannot be decoded, and it is quarantined. Safe to repeat (a batch read again).
 */
export interface DecodeLookup {
  /** The server asked, as the logs, metrics and /readyz name it ("Schema Registry"). */
  readonly server: string;
  fetch(records: readonly SourceRecord[], signal: AbortSignal): Promise<void>;
}

export interface Job<T> {
  /**
   * The job's name: the key of its row in the keyspace's `job` table (src/engine/job-binding.ts) and
   * of its checkpoints and quarantined records (src/engine/engine-tables.ts). Letters, digits, `_`, `-`.
   */
  readonly name: string;
  /** The input topic; left out, the worker's `--topic`. */
  readonly topic?: string;
  /**
   * Keep the engine's first, unkeyed tables (`checkpoints`, `quarantine`, `partition_state`) instead of
   * the job-keyed ones: only for the events job, whose positions an existing keyspace may hold there
   * (they predate the job-keyed tables), so that it keeps them (src/engine/engine-tables.ts).
   */
  readonly legacyTables?: boolean;
  /**
   * True when what the job writes assumes that all records of a key stay on one partition (an upsert
   * whose highest offset wins). Adding partitions to the topic moves keys, and offsets of two
   * partitions do not order one key's records: every partition of such a job stops
   * (EO_PARTITIONS_ADDED) before a batch that may hold a moved key is written.
   */
  readonly keysStayOnPartition?: boolean;
  /**
   * What each record must produce in the job's table, for `verify --job` and `chaos --job`
   * (src/engine/job-audit.ts). Left out, the job's output cannot be audited.
   */
  readonly audit?: JobAudit;
  /**
   * The tables the job writes in the keyspace. Each is bound to this job when it first runs: a job that
   * declares a table another job writes refuses to start (EO_TABLE_OWNED, src/engine/job-binding.ts),
   * since the two jobs' rows would overwrite each other.
   */
  readonly tables?: readonly string[];
  /** The job's own tables, created by `exactlyonce schema apply --job` (never by a worker). */
  readonly migrations?: readonly JobMigration[];
  /** The topics the job publishes to, if any: the Runner checks at start that they exist. */
  readonly outputTopics?: readonly string[];
  /**
   * Everything that changes what a record becomes (decode limits, rules). Stored with the job when it
   * is first run; a worker whose settings differ from the stored ones refuses to start
   * (EO_JOB_CONFIG_MISMATCH), so two workers can never write competing results.
   */
  readonly settings?: Readonly<Record<string, string | number | boolean>>;
  /**
   * What `decode` needs from another server before a batch is decoded (the schemas of a Schema
   * Registry, src/formats/decoder.ts `decoderLookup`), so that decode itself stays pure and synchronous.
   */
  readonly lookup?: DecodeLookup;
  /** Pure and deterministic: the same record always decodes the same way. */
  decode(record: SourceRecord): Decoded<T>;
  /**
   * Called once the Cassandra session is open (prepare statements, check tables); called again when it
   * fails with a retriable error (a server restarting), so it must be safe to repeat.
   */
  open(context: JobContext): Promise<void>;
  /**
   * Partitions were assigned to this worker, before any of their records is fetched (after their
   * checkpoints are read). A rejected promise is logged; the partitions are still processed.
   */
  onAssign?(partitions: readonly number[]): Promise<void> | void;
  /**
   * Partitions were revoked (`lost`: taken without a clean hand-over, e.g. after a session timeout).
   * Batches of them in flight may still finish; no new one starts. Must not throw.
   */
  onRevoke?(partitions: readonly number[], lost: boolean): void;
  /**
   * The partition will be read again from `from`, below where this worker got to: its checkpoint was
   * reset (`checkpoints reset`), or Cassandra lost writes it had acknowledged (src/engine/lost-writes.ts),
   * so outputs this job wrote for records from `from` on may be gone. Whatever it remembers of the
   * partition past `from` (a cache of what it wrote last) must be forgotten. Called before any batch
   * from `from` is handed over; must not throw.
   */
  onRewind?(partition: number, from: bigint): void;
  /** Called once when the worker stops, after the last batch; idempotent. */
  close?(): Promise<void>;
  /**
   * Stores the outputs of the decoded records of one batch of one partition. Called before that
   * batch's checkpoint is written, and possibly again for the same records after a crash or by a
   * zombie, so it MUST be idempotent: writing the same records twice leaves the same rows.
   * A rejected promise is retried by the engine when the error is retriable. `signal` is aborted when
   * the worker stops: the write may give up (its batch's checkpoint is then not written, so the records
   * are read again by the next owner).
   */
  write(partition: number, records: readonly DecodedRecord<T>[], signal: AbortSignal): Promise<void>;
}
