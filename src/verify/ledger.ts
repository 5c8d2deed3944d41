/**
 * The offset ledger of one partition (docs/design.md §4 invariant 1): merges the records the topic returns,
 * in offset order, with the `events` and `quarantine` rows of the same offset range, also in offset
 * order, and judges every offset once. Streaming: it holds one chunk of records and one row of each
 * table at a time, whatever the partition's size.
 *
 * Offsets are not contiguous (transaction markers, aborted transactions, compaction), so an offset the
 * topic does not return is a *gap*, counted and explained, never a loss; a row stored for such an
 * offset is *extra*.
 */
import { createHash } from 'node:crypto';
import type { Decoded, SourceRecord } from '../engine/job.js';
import { HAND_QUARANTINE_REASON } from '../engine/quarantine.js';
import type { Event } from '../jobs/events/event.js';
import type { Gaps, ViolationLog } from './report.js';

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

/**
 * Peeks one row ahead of an async iterator of pages of rows sorted by offset. Within a page it answers
 * without awaiting (`ready`, `head`); only a new page is awaited.
 */
export class Cursor<T> {
  private page: readonly T[] = [];
  private i = 0;
  private done = false;

  constructor(private readonly it: AsyncIterator<readonly T[]>) {}

  /** True when `head` answers without waiting for a page. */
  get ready(): boolean {
    return this.i < this.page.length || this.done;
  }

  /** The next row (only when `ready`), undefined after the last. */
  head(): T | undefined {
    return this.page[this.i];
  }

  async peek(): Promise<T | undefined> {
    while (this.i >= this.page.length && !this.done) {
      const n = await this.it.next();
      if (n.done === true) this.done = true;
      else {
        this.page = n.value;
        this.i = 0;
      }
    }
    return this.page[this.i];
  }

  take(): void {
    this.i++;
  }

  /** Stops the underlying query early (only after an error). */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}

const MAX_GAP_EXAMPLES = 5;

/**
 * The offset merge any ledger is made of: records in offset order against the rows of two tables
 * (the output rows and the quarantine) of the same offset range, also in offset order, each offset
 * judged once by `judge`. Rows for offsets the topic does not return are extra; those offsets are gaps.
 */
export abstract class OffsetLedger<R extends { offset: bigint }, Q extends { offset: bigint }, In extends { offset: bigint } = SourceRecord> {
  records = 0;
  stored = 0;
  quarantined = 0;
  missing = 0;
  extra = 0;
  mismatched = 0;
  /** Matching quarantine rows by reason. */
  readonly reasons: Record<string, number> = {};
  /** Records that rightly left no row, by why (a job's filter, a TTL that passed). */
  readonly skipped: Record<string, number> = {};
  readonly gaps: Gaps = { offsets: 0, ranges: 0, examples: [] };
  /** The next offset not yet judged. */
  private pos: bigint;

  constructor(
    readonly partition: number,
    from: bigint,
    protected readonly violations: ViolationLog,
    /** The two tables' names, for the extra rows' messages. */
    private readonly tables: readonly [string, string],
  ) {
    this.pos = from;
  }

  get position(): bigint {
    return this.pos;
  }

  /**
   * Judges `records` (ascending; those before `position` are ignored as re-deliveries) and every row
   * of both tables with an offset in [position, upTo). The rows must cover exactly that range,
   * ascending (`rows` null: the output is not keyed by offset, only the quarantine is merged).
   * Offsets in the range the topic did not return are gaps; rows there are extra.
   */
  async check(records: readonly In[], upTo: bigint, rows: AsyncIterable<readonly R[]> | null, quarantine: AsyncIterable<readonly Q[]>): Promise<void> {
    const [rowTable, quarantineTable] = this.tables;
    const ev = rows === null ? null : new Cursor(rows[Symbol.asyncIterator]());
    const qu = new Cursor(quarantine[Symbol.asyncIterator]());
    try {
      for (const r of records) {
        if (r.offset < this.pos) continue;
        if (r.offset >= upTo) break;
        if (r.offset > this.pos) this.gap(this.pos, r.offset);
        if (ev !== null) await this.extrasBefore(ev, r.offset, rowTable);
        await this.extrasBefore(qu, r.offset, quarantineTable);
        const e = ev === null ? undefined : ev.ready ? ev.head() : await ev.peek();
        const row = e !== undefined && e.offset === r.offset ? e : undefined;
        if (row !== undefined) ev!.take();
        const q = qu.ready ? qu.head() : await qu.peek();
        const qrow = q !== undefined && q.offset === r.offset ? q : undefined;
        if (qrow !== undefined) qu.take();
        this.records++;
        this.judge(r, row, qrow);
        this.pos = r.offset + 1n;
      }
      if (upTo > this.pos) this.gap(this.pos, upTo);
      if (ev !== null) await this.extrasBefore(ev, upTo, rowTable);
      await this.extrasBefore(qu, upTo, quarantineTable);
      if (upTo > this.pos) this.pos = upTo;
    } catch (e) {
      await Promise.all([ev?.close(), qu.close()]).catch(() => undefined);
      throw e;
    }
  }

  /** Reports a row for an offset the topic does not hold. */
  extraRow(table: string, offset: bigint, why: string): void {
    this.extra++;
    this.violations.add({
      kind: 'extra',
      partition: this.partition,
      offset: String(offset),
      message: `partition ${this.partition} offset ${offset}: extra ${table} row — the topic has no record at this offset (${why})`,
    });
  }

  /** Judges one offset: its record and the rows found for it in each table. */
  protected abstract judge(r: In, row: R | undefined, q: Q | undefined): void;

  private async extrasBefore(cursor: Cursor<{ offset: bigint }>, offset: bigint, table: string): Promise<void> {
    for (;;) {
      const row = cursor.ready ? cursor.head() : await cursor.peek();
      if (row === undefined || row.offset >= offset) return;
      cursor.take();
      this.extraRow(table, row.offset, 'an offset gap: transaction marker, aborted or compacted record');
    }
  }

  /** [from, to) was not returned by the broker. */
  private gap(from: bigint, to: bigint): void {
    this.gaps.offsets += Number(to - from);
    this.gaps.ranges++;
    if (this.gaps.examples.length < MAX_GAP_EXAMPLES) this.gaps.examples.push(to - from === 1n ? `${from}` : `${from}..${to - 1n}`);
  }
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
