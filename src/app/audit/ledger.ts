/**
 * The offset ledger of one partition (DESIGN.md §4 invariant 1): merges the records the topic returns,
 * in offset order, with the `events` and `quarantine` rows of the same offset range, also in offset
 * order, and judges every offset once. Streaming: it holds one chunk of records and one row of each
 * table at a time, whatever the partition's size.
 *
 * Offsets are not contiguous (transaction markers, aborted transactions, compaction), so an offset the
 * topic does not return is a *gap*, counted and explained, never a loss; a row stored for such an
 * offset is *extra*.
 */
import { createHash } from 'node:crypto';
import type { Decoded, SourceRecord } from '../../engine/job.js';
import type { Event } from '../event.js';
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
  /** Each valid event of the topic, for the alert recomputation. */
  readonly onEvent?: (e: Event) => void;
}

/** Peeks one item ahead of an async iterator of rows sorted by offset. */
class Cursor<T> {
  private head: T | undefined;
  private done = false;

  constructor(private readonly it: AsyncIterator<T>) {}

  async peek(): Promise<T | undefined> {
    if (this.head === undefined && !this.done) {
      const n = await this.it.next();
      if (n.done === true) this.done = true;
      else this.head = n.value;
    }
    return this.head;
  }

  take(): void {
    this.head = undefined;
  }

  /** Stops the underlying query early (only after an error). */
  async close(): Promise<void> {
    await this.it.return?.();
  }
}

const MAX_GAP_EXAMPLES = 5;

export class PartitionLedger {
  records = 0;
  stored = 0;
  quarantined = 0;
  missing = 0;
  extra = 0;
  mismatched = 0;
  /** Matching quarantine rows by reason. */
  readonly reasons: Record<string, number> = {};
  readonly gaps: Gaps = { offsets: 0, ranges: 0, examples: [] };
  /** The next offset not yet judged. */
  private pos: bigint;

  constructor(
    readonly partition: number,
    from: bigint,
    private readonly ctx: LedgerContext,
  ) {
    this.pos = from;
  }

  get position(): bigint {
    return this.pos;
  }

  /**
   * Judges `records` (ascending; those before `position` are ignored as re-deliveries) and every row
   * of `events` and `quarantine` with an offset in [position, upTo). The rows must cover exactly that
   * range, ascending. Offsets in the range the topic did not return are gaps; rows there are extra.
   */
  async check(
    records: readonly SourceRecord[],
    upTo: bigint,
    events: AsyncIterable<EventRow>,
    quarantine: AsyncIterable<QuarantineRowView>,
  ): Promise<void> {
    const ev = new Cursor(events[Symbol.asyncIterator]());
    const qu = new Cursor(quarantine[Symbol.asyncIterator]());
    try {
      for (const r of records) {
        if (r.offset < this.pos) continue;
        if (r.offset >= upTo) break;
        if (r.offset > this.pos) this.gap(this.pos, r.offset);
        await this.extrasBefore(ev, r.offset, 'events');
        await this.extrasBefore(qu, r.offset, 'quarantine');
        const e = await ev.peek();
        const row = e !== undefined && e.offset === r.offset ? e : undefined;
        if (row !== undefined) ev.take();
        const q = await qu.peek();
        const qrow = q !== undefined && q.offset === r.offset ? q : undefined;
        if (qrow !== undefined) qu.take();
        this.judge(r, row, qrow);
        this.pos = r.offset + 1n;
      }
      if (upTo > this.pos) this.gap(this.pos, upTo);
      await this.extrasBefore(ev, upTo, 'events');
      await this.extrasBefore(qu, upTo, 'quarantine');
      if (upTo > this.pos) this.pos = upTo;
    } catch (e) {
      await Promise.all([ev.close(), qu.close()]).catch(() => undefined);
      throw e;
    }
  }

  /** Reports a row for an offset the topic does not hold. */
  extraRow(table: 'events' | 'quarantine', offset: bigint, why: string): void {
    this.extra++;
    this.ctx.violations.add({
      kind: 'extra',
      partition: this.partition,
      offset: String(offset),
      message: `partition ${this.partition} offset ${offset}: extra ${table} row — the topic has no record at this offset (${why})`,
    });
  }

  private async extrasBefore(cursor: Cursor<{ offset: bigint }>, offset: bigint, table: 'events' | 'quarantine'): Promise<void> {
    for (;;) {
      const row = await cursor.peek();
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

  private judge(r: SourceRecord, row: EventRow | undefined, q: QuarantineRowView | undefined): void {
    this.records++;
    const at = `partition ${this.partition} offset ${r.offset}`;
    const v = (kind: 'missing' | 'mismatch' | 'quarantined_valid' | 'stored_malformed', message: string) =>
      this.ctx.violations.add({ kind, partition: this.partition, offset: String(r.offset), message: `${at}: ${message}` });
    const d = this.ctx.decode(r.value);
    if (d.ok) {
      this.ctx.onEvent?.(d.value);
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
