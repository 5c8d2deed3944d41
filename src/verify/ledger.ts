/**
 * The offset merge of one partition (docs/design.md §4 invariant 1): the records the topic returns, in
 * offset order, against the rows of the same offset range, also in offset order, each offset judged
 * once. Streaming: it holds one chunk of records and one row of each table at a time, whatever the
 * partition's size. What each offset must have, and the verdict, is src/verify/compare-rows.ts.
 *
 * Offsets are not contiguous (transaction markers, aborted transactions, compaction), so an offset the
 * topic does not return is a *gap*, counted and explained, never a loss; a row stored for such an
 * offset is *extra*.
 */
import type { SourceRecord } from '../engine/job.js';
import type { Gaps, ViolationLog } from './report.js';

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
