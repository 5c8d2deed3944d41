/**
 * Records a job could not decode, kept with their partition and offset so the offset ledger stays
 * whole: every offset is in the job's output or here. The raw bytes are cut at `maxRawBytes`; the
 * full length and a SHA-256 of the whole record are kept so a cut record can still be identified.
 */
import { createHash } from 'node:crypto';
import { cutBatches } from '../cassandra/batches.js';
import { consistencies, fromLong, toLong, type Client, type Row } from '../cassandra/session.js';
import { engineTables, type EngineTables } from './engine-tables.js';
import type { SourceRecord } from './job.js';

export interface QuarantineEntry {
  readonly record: SourceRecord;
  readonly reason: string;
  readonly detail: string;
}

export interface QuarantineRow {
  partition: number;
  offset: bigint;
  topic: string;
  reason: string;
  detail: string;
  key: Buffer | null;
  raw: Buffer | null;
  rawLength: number;
  rawSha256: string;
  kafkaTs: Date | null;
}

/**
 * The reason of a record an operator quarantined by hand (`exactlyonce quarantine add`): one the store
 * refuses for good, which the partition then goes on without (src/engine/task-quarantine.ts), and
 * `verify` counts as accounted for.
 */
export const HAND_QUARANTINE_REASON = 'refused';

/** Default bound on the raw bytes kept per quarantined record, in bytes. */
export const DEFAULT_MAX_RAW_BYTES = 16 * 1024;
const QUARANTINE_ROWS_PER_BATCH = 100;
const QUARANTINE_BATCH_BYTES = 512 * 1024;

export class Quarantine {
  private readonly t: EngineTables;

  /** The quarantine of job `job` (its rows of `job_quarantine`), or without one the events job's table (src/engine/engine-tables.ts). */
  constructor(
    private readonly session: Client,
    keyspace: string,
    private readonly maxRawBytes = DEFAULT_MAX_RAW_BYTES,
    job?: string,
  ) {
    this.t = engineTables(keyspace, job);
  }

  /**
   * Stores the entries of one partition. Idempotent: rows are keyed by (partition, offset) and their
   * values are a pure function of the record, so a replay rewrites the same row.
   */
  async write(entries: readonly QuarantineEntry[]): Promise<void> {
    const statement = `INSERT INTO ${this.t.quarantine} (${this.t.jobColumn}partition, offset, topic, reason, detail, key, raw, raw_length, raw_sha256, kafka_ts) VALUES (${this.t.jobMarker}?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;
    // The rows of one Kafka partition share the Cassandra partition key: each UNLOGGED batch is one
    // mutation, applied atomically, like the `events` rows. Batches are cut by count and by bytes
    // (raw values are up to maxRawBytes each) to keep every mutation small.
    const rows = entries.map(({ record, reason, detail }) => {
      const value = record.value ?? Buffer.alloc(0);
      const raw = record.value === null ? null : value.subarray(0, this.maxRawBytes);
      return {
        size: (raw?.length ?? 0) + (record.key?.length ?? 0) + detail.length + 100,
        query: statement,
        params: [
          ...this.t.jobParams,
          record.partition,
          toLong(record.offset),
          record.topic,
          reason,
          detail,
          record.key,
          raw,
          value.length,
          createHash('sha256').update(value).digest('hex'),
          new Date(record.timestampMs),
        ],
      };
    });
    const batches = cutBatches(rows, QUARANTINE_ROWS_PER_BATCH, QUARANTINE_BATCH_BYTES, (r) => r.size);
    await Promise.all(
      batches.map((queries) =>
        queries.length === 1
          ? this.session.execute(queries[0]!.query, queries[0]!.params, { prepare: true, consistency: consistencies.localQuorum })
          : this.session.batch(queries, { prepare: true, logged: false, consistency: consistencies.localQuorum }),
      ),
    );
  }

  /** The reason `offset` of `partition` is quarantined for, or null when it is not. */
  async reasonOf(partition: number, offset: bigint): Promise<string | null> {
    const r = await this.session.execute(
      `SELECT reason FROM ${this.t.quarantine} WHERE ${this.t.jobWhere}partition = ? AND offset = ?`,
      [...this.t.jobParams, partition, toLong(offset)],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    return (r.first()?.['reason'] as string | null | undefined) ?? null;
  }

  async list(options: { partition?: number; limit: number }): Promise<QuarantineRow[]> {
    const columns = `${this.t.jobColumn}partition, offset, topic, reason, detail, key, raw, raw_length, raw_sha256, kafka_ts`;
    let rows: Row[];
    if (this.t.jobWhere !== '' && options.partition === undefined) {
      // The job-keyed table is partitioned by (job, partition): without a partition, every row is read
      // page by page and the job's are kept.
      rows = [];
      let pageState: string | undefined;
      do {
        const r = await this.session.execute(`SELECT ${columns} FROM ${this.t.quarantine}`, [], { prepare: true, fetchSize: 5000, pageState });
        rows.push(...r.rows.filter((row) => row['job'] === this.t.jobParams[0]));
        pageState = r.pageState ?? undefined;
      } while (pageState !== undefined && rows.length < options.limit);
      rows = rows.slice(0, options.limit);
    } else {
      const where = options.partition === undefined ? '' : ` WHERE ${this.t.jobWhere}partition = ?`;
      const params = options.partition === undefined ? [options.limit] : [...this.t.jobParams, options.partition, options.limit];
      rows = (await this.session.execute(`SELECT ${columns} FROM ${this.t.quarantine}${where} LIMIT ?`, params, { prepare: true })).rows;
    }
    return rows.map((row) => ({
      partition: row['partition'] as number,
      offset: fromLong(row['offset']),
      topic: row['topic'] as string,
      reason: row['reason'] as string,
      detail: row['detail'] as string,
      key: row['key'] as Buffer | null,
      raw: row['raw'] as Buffer | null,
      rawLength: row['raw_length'] as number,
      rawSha256: row['raw_sha256'] as string,
      kafkaTs: row['kafka_ts'] as Date | null,
    }));
  }
}
