/**
 * Where verify compares rows: what a record must have produced against what Cassandra holds, one offset
 * (or one key) at a time, and the verdict — stored, quarantined, missing, extra or mismatched.
 *
 * - PartitionLedger, the events job: each record against its `events` row (id, ts, source, client,
 *   health: eventDiff) and its `quarantine` row (reason, topic, raw_length, raw_sha256: quarantineDiff).
 * - JobLedger, any job with an `audit` (src/engine/job-audit.ts): each record's expectation against the
 *   job's quarantine row and, in log mode, its table row (the job's value columns, as canonical CQL values).
 * - judgeKey, an upsert job: each key's row against its last record (the merge of its records), and the
 *   row's write time against that record's.
 *
 * The other pieces: the offset merge that pairs each record with the rows of its offset (OffsetLedger,
 * src/verify/ledger.ts); the keyed merge that brings an upsert table's records together by key
 * (src/verify/upsert-audit.ts); the walk of the partitions (src/verify/partition-walk.ts) and the two
 * auditors that drive it (src/verify/auditor.ts, src/verify/job-auditor.ts); the alerts' comparison
 * (src/verify/alert-diff.ts).
 */
import { createHash } from 'node:crypto';
import type { Row } from '../cassandra/session.js';
import type { Expectation } from '../engine/job-audit.js';
import type { Decoded, SourceRecord } from '../engine/job.js';
import { HAND_QUARANTINE_REASON } from '../engine/quarantine.js';
import type { Event } from '../jobs/events/event.js';
import { canonical } from '../jobs/sink/cql-types.js';
import { OffsetLedger } from './ledger.js';
import { TTL_SLACK_MS, type ViolationKind, type ViolationLog } from './report.js';

const text = (v: unknown) => JSON.stringify(canonical(v));

/** An `events` row as the auditor reads it (nulls where a column is null). */
export interface EventRow {
  readonly offset: bigint;
  readonly id: bigint | null;
  readonly ts: number | null;
  readonly source: string | null;
  readonly client: string | null;
  readonly health: number | null;
}

/** A `quarantine` row as the auditor reads it. */
export interface QuarantineRowView {
  readonly offset: bigint;
  readonly topic: string | null;
  readonly reason: string | null;
  readonly rawLength: number | null;
  readonly rawSha256: string | null;
}

export interface LedgerContext {
  /** The events topic, as the quarantine rows must name it. */
  readonly topic: string;
  /** The workers' codec, with their record size limit. */
  readonly decode: (value: Buffer | null) => Decoded<Event>;
  readonly violations: ViolationLog;
  /** Each valid event judged, with its offset, for the alert recomputation. */
  readonly onEvent?: (e: Event, offset: bigint) => void;
}

/** The events job's ledger: each record against its `events` row and its `quarantine` row. */
export class PartitionLedger extends OffsetLedger<EventRow, QuarantineRowView> {
  constructor(
    partition: number,
    from: bigint,
    private readonly ctx: LedgerContext,
  ) {
    super(partition, from, ctx.violations, ['events', 'quarantine']);
  }

  protected judge(r: SourceRecord, row: EventRow | undefined, q: QuarantineRowView | undefined): void {
    const at = `partition ${this.partition} offset ${r.offset}`;
    const v = (kind: 'missing' | 'mismatch' | 'quarantined_valid' | 'stored_malformed', message: string) =>
      this.ctx.violations.add({ kind, partition: this.partition, offset: String(r.offset), message: `${at}: ${message}` });
    const d = this.ctx.decode(r.value);
    if (q?.reason === HAND_QUARANTINE_REASON) {
      // An operator's decision (`quarantine add`: the store refused the record), accounted for as it is;
      // its event counts towards the alerts only if it was stored after all.
      if (d.ok && row !== undefined) this.ctx.onEvent?.(d.value, r.offset);
      this.quarantined++;
      this.reasons[q.reason] = (this.reasons[q.reason] ?? 0) + 1;
      return;
    }
    if (d.ok) {
      this.ctx.onEvent?.(d.value, r.offset);
      if (row !== undefined) {
        const diff = eventDiff(row, d.value);
        if (diff.length > 0) {
          this.mismatched++;
          v('mismatch', `events row differs from the record: ${diff.join(', ')}`);
        } else if (q === undefined) {
          this.stored++;
        }
      } else if (q === undefined) {
        this.missing++;
        v('missing', 'a valid event has no row in events (nor in quarantine)');
      }
      if (q !== undefined) {
        this.mismatched++;
        v('quarantined_valid', `a valid event is in quarantine (reason ${q.reason ?? 'null'})${row === undefined ? '' : ' as well as in events'}`);
      }
    } else {
      if (q !== undefined) {
        const diff = quarantineDiff(q, r, d.reason, this.ctx.topic);
        if (diff.length > 0) {
          this.mismatched++;
          v('mismatch', `quarantine row differs from the record: ${diff.join(', ')}`);
        } else if (row === undefined) {
          this.quarantined++;
          this.reasons[d.reason] = (this.reasons[d.reason] ?? 0) + 1;
        }
      } else if (row === undefined) {
        this.missing++;
        v('missing', `a malformed record (${d.reason}) has no row in quarantine (nor in events)`);
      }
      if (row !== undefined) {
        this.mismatched++;
        v('stored_malformed', `a malformed record (${d.reason}) is stored in events`);
      }
    }
  }
}

/** Every column that differs, as `column stored ≠ record`. */
export function eventDiff(row: EventRow, e: Event): string[] {
  const out: string[] = [];
  const show = (v: unknown) => (typeof v === 'bigint' ? String(v) : JSON.stringify(v));
  const cmp = (name: string, stored: unknown, want: unknown) => {
    if (stored !== want) out.push(`${name} ${show(stored)} ≠ ${show(want)}`);
  };
  cmp('id', row.id, e.id);
  cmp('ts', row.ts, e.ts);
  cmp('source', row.source, e.source);
  cmp('client', row.client, e.client);
  cmp('health', row.health, e.health);
  return out;
}

export function quarantineDiff(q: QuarantineRowView, r: SourceRecord, reason: string, topic: string): string[] {
  const out: string[] = [];
  const value = r.value ?? Buffer.alloc(0);
  if (q.reason !== reason) out.push(`reason ${JSON.stringify(q.reason)} ≠ ${JSON.stringify(reason)}`);
  if (q.topic !== topic) out.push(`topic ${JSON.stringify(q.topic)} ≠ ${JSON.stringify(topic)}`);
  if (q.rawLength !== value.length) out.push(`raw_length ${q.rawLength} ≠ ${value.length}`);
  const sha = createHash('sha256').update(value).digest('hex');
  if (q.rawSha256 !== sha) out.push(`raw_sha256 ${q.rawSha256 ?? 'null'} ≠ ${sha}`);
  return out;
}

/** A record of the job's topic and what it must produce. */
export interface JobRecord {
  readonly offset: bigint;
  readonly e: Expectation;
}

/** A job's quarantine row. */
export interface JobQuarantineRow {
  readonly offset: bigint;
  readonly reason: string | null;
}

/** A log-mode table row. */
export interface JobTableRow {
  readonly offset: bigint;
  readonly row: Row;
}

/**
 * Any job's ledger (`Job.audit`): each record's expectation against the job's quarantine row of its
 * offset and, in log mode, its table row (keyed by partition and offset). In upsert mode the table is
 * judged key by key (judgeKey); here only the quarantine is.
 */
export class JobLedger extends OffsetLedger<JobTableRow, JobQuarantineRow, JobRecord> {
  constructor(
    partition: number,
    from: bigint,
    violations: ViolationLog,
    private readonly o: { mode: 'log' | 'upsert' | 'aggregate'; table: string; valueColumns: readonly string[] },
  ) {
    super(partition, from, violations, [o.table, 'quarantine']);
  }

  private v(kind: ViolationKind, offset: bigint, message: string): void {
    this.violations.add({ kind, partition: this.partition, offset: String(offset), message: `partition ${this.partition} offset ${offset}: ${message}` });
  }

  protected judge(r: JobRecord, row: JobTableRow | undefined, q: JobQuarantineRow | undefined): void {
    const { e } = r;
    const table = this.o.table;
    if (q?.reason === HAND_QUARANTINE_REASON) {
      // An operator's decision (`quarantine add`: the store refused the record), accounted for as it is.
      this.quarantined++;
      this.reasons[q.reason] = (this.reasons[q.reason] ?? 0) + 1;
      return;
    }
    if (e.kind === 'none') {
      // Nothing by the job's rule (a filter): no row, no quarantine row.
      if (q !== undefined) {
        this.mismatched++;
        this.v('mismatch', r.offset, `quarantined (${q.reason}) though the job's rule leaves the record no row (${e.why})`);
      }
      if (row !== undefined) {
        this.extra++;
        this.v('extra', r.offset, `a ${table} row, though the job's rule leaves the record none (${e.why})`);
      }
      if (q === undefined && row === undefined) this.skipped[e.why] = (this.skipped[e.why] ?? 0) + 1;
      return;
    }
    if (e.kind === 'quarantine') {
      if (q === undefined) {
        this.missing++;
        this.v('missing', r.offset, `the record must be quarantined (${e.reason}) and is not`);
      } else if (q.reason !== e.reason) {
        this.mismatched++;
        this.v('mismatch', r.offset, `quarantined as ${q.reason}, the job says ${e.reason}`);
      } else {
        this.quarantined++;
        this.reasons[e.reason] = (this.reasons[e.reason] ?? 0) + 1;
      }
      if (row !== undefined) this.extraRow(table, r.offset, 'the record is quarantined');
      return;
    }
    if (q !== undefined) {
      this.mismatched++;
      this.v('quarantined_valid', r.offset, `quarantined (${q.reason}) though the job's record is valid`);
    }
    if (this.o.mode !== 'log') {
      // Upsert: the key's row is judged by the keyed merge; aggregate: the partials by the aggregate audit.
      if (q === undefined) this.stored++;
      return;
    }
    if (row === undefined) {
      // A row whose TTL passed is gone (Cassandra expires it at or after record time + TTL).
      const expires = (e as { expiresAtMs?: number }).expiresAtMs;
      if (expires !== undefined && expires <= Date.now() + TTL_SLACK_MS) {
        if (q === undefined) this.skipped['expired'] = (this.skipped['expired'] ?? 0) + 1;
        return;
      }
      this.missing++;
      this.v('missing', r.offset, `no row in ${table}${expires === undefined ? '' : ` (its TTL runs until ${new Date(expires).toISOString()})`}`);
      return;
    }
    const want = (e as { row: Record<string, unknown> }).row;
    const diff = this.o.valueColumns.filter((c) => text(row.row[c]) !== text(want[c]));
    if (diff.length > 0) {
      this.mismatched++;
      this.v('mismatch', r.offset, diff.map((c) => `${c} is ${text(row.row[c])}, the record says ${text(want[c])}`).join('; '));
    } else if (q === undefined) this.stored++;
  }
}

/** What the upsert audit counts per partition (the partition of each key's last record). */
export interface UpsertCounts {
  missing: number;
  extra: number;
  mismatched: number;
  aheadOfCheckpoint: number;
  /** Keys that rightly have no row, by why (expired: their last record's TTL passed). */
  skipped: Record<string, number>;
}

/** A key's records, reduced as they stream past. */
export interface KeyGroup {
  key: string;
  partitions: number[];
  /** The last record below its partition's checkpoint, if any. */
  last: { partition: number; offset: bigint; del: boolean; values: unknown[] | null; packedKey: unknown; expiresAtMs: number | null; version: number | null } | undefined;
  /**
   * A versioned key's cells (records below the checkpoints, in version order): per cell, the highest
   * version that wrote it (null: none did) and the values written at it — several on a tie, which
   * Cassandra settles by the greater value, so any of them is accepted; a delete's null, which wins a
   * tie. Undefined for a key ordered by offset.
   */
  cells: { at: Array<number | null>; values: unknown[][] } | undefined;
  /**
   * Columns left unset by some record: per column, the offset whose record last wrote a non-null value
   * since the last delete (null: a null written, or none), and whether any record since the last delete
   * (or a delete itself) wrote it at all: an unknown column (unset by every record seen) is not judged.
   */
  setAt: Array<bigint | null> | undefined;
  known: boolean[] | undefined;
  /** Write timestamps of the key's records at or beyond the checkpoint (batches in flight). */
  inFlight: Set<bigint>;
  firstPartition: number;
}

/** A row as read: its canonical values and its latest write time. */
export interface TableRow {
  key: string;
  values: unknown[];
  wt: string | null;
}

/** What judgeKey needs of the upsert audit's context (src/verify/upsert-audit.ts). */
export interface KeyContext {
  readonly table: string;
  readonly valueColumns: readonly string[];
  /** The write timestamp each row's cells must carry, from its record's offset. */
  readonly writeTimestamp: ((offset: bigint) => bigint) | undefined;
  /** The counters of a partition of the topic. */
  readonly counts: (partition: number) => UpsertCounts;
}

/** Reports a key's violation, on the partition (and offset) of the record that names it, if any. */
export type KeyNote = (kind: ViolationKind, partition: number | undefined, offset: bigint | undefined, message: string) => void;

/** An upsert job's key: its row against its last record (the merge of its records), and the row's write time. */
export function judgeKey(ctx: KeyContext, note: KeyNote, g: KeyGroup, row: TableRow | undefined): void {
  const table = ctx.table;
  const last = g.last;
  const partition = last?.partition ?? g.firstPartition;
  // A write of a batch in flight: newer than the key's last record below the checkpoint.
  // (A versioned key's write in flight counts only if it is no older than its last record's version.)
  if (row !== undefined && row.wt !== null && g.inFlight.has(BigInt(row.wt)) && (last?.version == null || BigInt(row.wt) >= BigInt(last.version))) {
    ctx.counts(partition).aheadOfCheckpoint++;
    return;
  }
  if (row === undefined) {
    if (last === undefined || last.del) return;
    // Its last record's TTL passed: the row is gone (an expired record deletes it when written).
    if (last.expiresAtMs !== null && last.expiresAtMs <= Date.now() + TTL_SLACK_MS) {
      const c = ctx.counts(last.partition);
      c.skipped['expired'] = (c.skipped['expired'] ?? 0) + 1;
      return;
    }
    // A batch in flight may have deleted it (a versioned key's: by a delete of no lower version).
    if (last.version === null ? g.inFlight.size > 0 : [...g.inFlight].some((ts) => ts >= BigInt(last.version!))) {
      ctx.counts(partition).aheadOfCheckpoint++;
      return;
    }
    note('missing', last.partition, last.offset, `${table} key ${g.key}: no row, though its last record (partition ${last.partition} offset ${last.offset}) writes one`);
    return;
  }
  if (last === undefined || last.del) {
    const where = last === undefined ? 'no record below the checkpoints names this key' : `its last record (partition ${last.partition} offset ${last.offset}) deletes it`;
    note('extra', last?.partition ?? partition, last?.offset, `${table} key ${g.key}: a row, though ${where}`);
    return;
  }
  const want = last.values!;
  // Merged (unset cells): a column no record seen wrote is not judged; the row's latest write is the
  // latest record that wrote a value (none known: not judged).
  const known = g.known;
  const cells = g.cells;
  const same = (i: number, v: unknown) => JSON.stringify(row.values[i]) === JSON.stringify(v);
  const diff = ctx.valueColumns
    .map((c, i) => ({ c, i }))
    .filter(({ i }) => (cells !== undefined ? cells.at[i] !== null && !cells.values[i]!.some((v) => same(i, v)) : (known === undefined || known[i]!) && !same(i, want[i])));
  const latestSet = g.setAt?.reduce<bigint | null>((a, b) => (b !== null && (a === null || b > a) ? b : a), null);
  // A versioned row's latest write: the highest version among its cells that hold a value (a cell
  // written null holds none, and a cell left unset keeps the version that wrote it).
  const latestVersion = cells?.at.reduce<number | null>((a, at, i) => (at !== null && row.values[i] !== null && (a === null || at > a) ? at : a), null);
  const wantTs = cells !== undefined ? (latestVersion == null ? undefined : BigInt(latestVersion)) : latestSet === null ? undefined : ctx.writeTimestamp?.(latestSet ?? last.offset);
  if (diff.length > 0) {
    note(
      'mismatch',
      last.partition,
      last.offset,
      `${table} key ${g.key}: ${diff.map(({ c, i }) => `${c} is ${JSON.stringify(row.values[i])}, its last record (partition ${last.partition} offset ${last.offset}) says ${JSON.stringify(want[i])}`).join('; ')}`,
    );
  } else if (wantTs !== undefined && row.wt !== null && BigInt(row.wt) !== wantTs) {
    note('mismatch', last.partition, last.offset, `${table} key ${g.key}: written at timestamp ${row.wt}, not ${wantTs} (${cells !== undefined ? 'the highest version that wrote a value of it' : `from its last record's offset ${last.offset}`}): another writer touched the table`);
  }
}
