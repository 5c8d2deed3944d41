/**
 * The proof for any job: a job that says what each record must produce can be audited by
 * `exactlyonce verify --job` (and `chaos --job`) against the broker's log, the way the events job is
 * (src/engine/job-auditor.ts):
 *
 * - log mode: every offset the job passed has exactly its row (or its quarantine row, or nothing when
 *   the job's rule says so), and no other row exists; a row whose TTL passed may be gone;
 * - upsert mode: per key, the table holds exactly the row of the key's last record (the highest
 *   offset that was not quarantined), or none when that record deletes the key; no other row exists.
 *   A column a record leaves unset keeps the value of the key's last record that set it (since the
 *   last delete).
 * - aggregate mode (src/engine/aggregation.ts): each stored partial is the fold of its partition's
 *   records of its group and window up to its `through` offset, and covers every such record below the
 *   checkpoint; each result row is the merge of its partials, written at their merge timestamp.
 */
import type { SourceRecord } from '../kafka/record.js';
import type { Row } from '../cassandra/session.js';
import type { Fold } from './aggregation.js';

/** What one record must produce. Values are the ones the job binds to Cassandra (bigint, Date, …). */
export type Expectation =
  /**
   * A row: its primary key columns and its other columns. `expiresAtMs`: the row lives until then
   * (a TTL): once past, its absence is expected (counted as expired, not missing).
   */
  | {
      readonly kind: 'row';
      readonly key: Readonly<Record<string, unknown>>;
      readonly row: Readonly<Record<string, unknown>>;
      readonly expiresAtMs?: number;
      /** Upsert mode: columns the record does not write (their value in `row` is null): the key's earlier value stays. */
      readonly unset?: readonly string[];
      /**
       * Upsert mode: what orders the key's records instead of the offset, and the write timestamp of
       * the record's cells: the key's row is its record with the highest version, on any partition.
       */
      readonly version?: number;
    }
  /** Upsert mode: the key's row is deleted (a tombstone record), `version` as a row's. */
  | { readonly kind: 'delete'; readonly key: Readonly<Record<string, unknown>>; readonly version?: number }
  /** Aggregate mode: the record is folded into these (group, window)s, each named by its key text. */
  | { readonly kind: 'contribute'; readonly slots: readonly string[]; readonly value: unknown }
  /** The record is quarantined, with this reason. */
  | { readonly kind: 'quarantine'; readonly reason: string }
  /**
   * The record leaves nothing by the job's own rule (`why`, e.g. filtered): no row, no quarantine row;
   * in upsert mode it does not change its key's row.
   */
  | { readonly kind: 'none'; readonly why: string };

export interface JobAudit {
  /** The table the job writes, in the worker's keyspace. */
  readonly table: string;
  readonly mode: 'log' | 'upsert' | 'aggregate';
  /** Aggregate mode: how the job folds and where its partials and results are. */
  readonly aggregate?: AggregateAudit;
  /** The table's primary key columns, in order. */
  readonly keyColumns: readonly string[];
  /** The other columns compared. */
  readonly columns: readonly string[];
  /**
   * Upsert mode: the write timestamp (µs) each row's cells must carry, from the record's offset
   * (checks that no other writer with wall-clock timestamps touched the table).
   */
  readonly writeTimestamp?: (offset: bigint) => bigint;
  /**
   * Upsert mode: the records carry versions (Expectation.version) that order a key's records on any
   * partition, so every audit reads the whole log: the records after a recorded proof do not say
   * whether an older one had a higher version.
   */
  readonly versioned?: boolean;
  /** Pure: what the record must produce. */
  expect(record: SourceRecord): Expectation;
  /**
   * Lines the job adds under the report once every record was judged (after the `expect` calls of one
   * audit): what is worth a look but is not a violation, e.g. a column whose field no record had.
   */
  notes?(): string[];
  /**
   * Seeded records of the kind the job reads (a `badRatio` of them malformed), for `chaos --job`:
   * without it the job can be verified, not put under chaos.
   */
  sample?(o: { seed: number; count: number; badRatio: number }): Iterable<{ key: string | Buffer | null; value: string | Buffer | null; headers?: Record<string, string | Buffer> }>;
  /** What `sample` needs done first, once (a sink of Avro records registers its sample schema for the topic). */
  prepareSample?(): Promise<void>;
}

/** What `verify --job` needs of an aggregating job (src/verify/aggregate-audit.ts). */
export interface AggregateAudit {
  /** The partials table (the result table is `JobAudit.table`). */
  readonly partialsTable: string;
  /** The columns to read of each table (the result's and the partials'). */
  readonly resultColumns: readonly string[];
  readonly partialColumns: readonly string[];
  readonly fold: Fold<unknown, unknown>;
  /** A partials row: its (group, window) key text, partition, through offset and state. */
  partial(row: Row): { slot: string; partition: number; through: bigint; state: unknown };
  /** A result row: its (group, window) key text and its aggregate values, as canonical text. */
  result(row: Row): { slot: string; values: Readonly<Record<string, string>> };
  /** The aggregate values a merged state must show, as canonical text. */
  resultValues(state: unknown): Readonly<Record<string, string>>;
  /** A state as canonical text (two states are equal when their texts are). */
  stateText(state: unknown): string;
  /** The result column whose write time is the merge timestamp. */
  readonly timedColumn: string;
  /**
   * Results also published to a topic as their windows close (closeAfter): a window closes on a
   * partition once that partition's watermark (the latest time of its contributing records) reaches
   * its close time; its latest message must then exist, and equal the row once every partition that
   * contributed has closed it.
   */
  readonly closed?: {
    readonly topic: string;
    /** A contributing value's time, and the close time of each of its slots (in the order of `contribute`'s slots). */
    times(value: unknown): { time: number; closeAt: readonly number[] };
    /** A message's aggregate values as canonical text (as `result` gives a row's), or why it is malformed. */
    message(value: Buffer | null): Readonly<Record<string, string>> | string;
  };
}
