/**
 * Exactly-once event-time alerts across partitions (docs/design.md §5).
 *
 * 1. State per (source, window end, rule) and Kafka partition, in `alert_window_counts`: the number of
 *    counted events of that partition in the window, and the offset of the last one counted
 *    (`through_offset`), written `USING TIMESTAMP through_offset`. These are the partials of the
 *    engine's exactly-once aggregation (src/engine/aggregation.ts, whose argument covers them): a count
 *    is a pure function of the log, a replay or a zombie can neither count an event twice nor lower a
 *    count, and a batch adds to the row cached while the partition is read contiguously, or read back.
 *    Cost: one row write per touched window per batch, whatever the window's size.
 * 2. After the batch's rows are acknowledged, every window it touched is summed over its partitions
 *    (one single-partition read). Of two workers adding to one window, whichever sums last sees both
 *    writes (each sums after its own write is acknowledged), so the final sum is exact.
 * 3. A window at or above the threshold is upserted into the `alerts` table (the seed job's,
 *    verbatim) `USING TIMESTAMP windowEnd·1000 + count`: within a row the timestamp grows with the
 *    count, so a stale, smaller sum that lands last can never lower it (Cassandra keeps the highest
 *    timestamp). No counters, no Paxos.
 * 4. The count is published to the alerts topic, keyed by source and window end; then the table row is
 *    read back and, while it is higher than what was published, that is published too. So the last
 *    message of each key always equals the table row: the publisher whose message lands last read the
 *    table after the final count was stored (see docs/aggregates.md, "Alerts").
 * All of this runs before the batch's checkpoint, so a crash at any point replays it.
 */
import { consistencies, fromLong, toLong, type Client, type Long } from '../../cassandra/session.js';
import { applyBatch, PartialCache, type Fold, type Partial } from '../../engine/aggregation.js';
import type { DecodedRecord, JobContext } from '../../engine/job.js';
import { IncompleteRows } from '../../engine/incomplete-rows.js';
import { ExactlyOnceError } from '../../errors.js';
import type { Alert, AlertRule } from './alert-rule.js';
import type { Event } from './event.js';
import { windowEnds } from './windows.js';

/** The alert topic's key for a window: `source@windowEndMs`. */
export function alertTopicKey(source: string, windowEnd: number): string {
  return `${source}@${windowEnd}`;
}

export function alertTopicValue(a: Alert): string {
  return JSON.stringify({ ts: a.ts, source: a.source, eventCount: a.eventCount });
}

/**
 * The write timestamp of an alert row, in µs: `windowEnd·1000 + count`. Within a row it grows with the
 * count, so of two recounts the larger one wins whatever order they land in (a stale, smaller recount
 * can never lower a count). Also used by `alerts rule` (src/jobs/events/rule-change.ts), which rewrites rows
 * after a TRUNCATE so that workers' later counts keep winning.
 */
export function alertWriteTimestamp(a: Alert): bigint {
  return BigInt(a.ts) * 1000n + BigInt(a.eventCount);
}

/** The alert row upsert; parameters (source, ts, event_count, alertWriteTimestamp). */
export function alertInsert(keyspace: string): string {
  return `INSERT INTO ${keyspace}.alerts (source, ts, event_count) VALUES (?, ?, ?) USING TIMESTAMP ?`;
}

/**
 * The count row upsert; parameters (source, window_end, rule, partition, event_count, through_offset,
 * through_offset again as the write timestamp). Idempotent and monotonic (see the file comment).
 */
export function countInsert(keyspace: string): string {
  return `INSERT INTO ${keyspace}.alert_window_counts (source, window_end, rule, partition, event_count, through_offset) VALUES (?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`;
}

/** The count rows' key names the rule's windows and health (not the threshold: it does not change which events count where). */
export function ruleName(rule: AlertRule): string {
  return `h${rule.health}/${rule.windows.sizeMs}/${rule.windows.slideMs}`;
}

export interface AlertOutcome {
  /** Windows that reached the threshold with this batch. */
  raised: number;
  /** Windows already at the threshold whose count this batch changed or confirmed. */
  revised: number;
}

/** A window touched by one batch: this batch's new events in it (its share of the count). */
export interface TouchedWindow {
  source: string;
  end: number;
  added: number;
}

/**
 * The alert counts as one client of the engine's exactly-once aggregation (src/engine/aggregation.ts):
 * a window's per-partition partial is its count of counted events, merged by a sum.
 */
const COUNT: Fold<null, number> = { empty: () => 0, add: (n) => n + 1, merge: (a, b) => a + b };

export class AlertWriter {
  private ctx!: JobContext;
  private session!: Client;
  private ks = '';
  private insert = '';
  private readonly rule: string;
  private readonly cache = new PartialCache<number>();
  /** Count rows read without one of their cells, by partition, window end and source. */
  private readonly incomplete = new IncompleteRows();

  constructor(
    private readonly alertRule: AlertRule,
    private readonly alertsTopic: string,
  ) {
    this.rule = ruleName(alertRule);
  }

  open(ctx: JobContext): void {
    this.ctx = ctx;
    this.session = ctx.session;
    this.ks = ctx.keyspace;
    this.insert = countInsert(ctx.keyspace);
  }

  /**
   * Forgets the cached counts of a partition read again from an earlier offset (a reset, or writes
   * Cassandra lost: src/engine/lost-writes.ts): the stored rows are read back instead. (A batch that
   * does not continue the cache drops it anyway; this makes it explicit, whatever offset comes next.)
   */
  forget(partition: number): void {
    this.cache.forget(partition);
  }

  /**
   * Refuses a keyspace whose alert state is still the per-event index of an earlier version
   * (`alert_window_events`, migration 003): its counts are not in `alert_window_counts`, so workers
   * would count those windows short. `alerts rule` rebuilds the counts from the stored events.
   */
  async checkNoLegacyIndex(): Promise<void> {
    let rows: number;
    try {
      rows = (await this.session.execute(`SELECT source FROM ${this.ks}.alert_window_events LIMIT 1`, [], { consistency: consistencies.localQuorum })).rowLength;
    } catch {
      return; // no such table: nothing left over
    }
    if (rows > 0) {
      throw new ExactlyOnceError(
        'EO_JOB_CONFIG_MISMATCH',
        `keyspace ${this.ks} holds alert index rows of an earlier version (${this.ks}.alert_window_events), whose counts workers no longer read. ` +
          'With every worker stopped, run `exactlyonce alerts rule` once (flags left out keep the stored rule): it rebuilds the per-partition counts from the stored events',
      );
    }
  }

  /**
   * Adds the batch's counted events to its partition's count in each window they fall in and stores
   * those counts; returns every window touched with this batch's new events in each (0 when a replay
   * brought nothing new: the window is still summed and published again, in case a crash came first).
   */
  async index(partition: number, records: readonly DecodedRecord<Event>[]): Promise<Map<string, TouchedWindow>> {
    const touched = new Map<string, TouchedWindow>();
    const counted: Array<{ key: string; offset: bigint; value: null }> = [];
    const health = this.alertRule.health;
    const windows = this.alertRule.windows;
    for (let i = 0; i < records.length; i++) {
      const { record, value: e } = records[i]!;
      if (e.health !== health) continue;
      const offset = BigInt(record.offset);
      for (const end of windowEnds(e.ts, windows)) {
        const k = alertTopicKey(e.source, end);
        if (!touched.has(k)) touched.set(k, { source: e.source, end, added: 0 });
        counted.push({ key: k, offset, value: null });
      }
    }
    if (records.length === 0) return touched;
    const first = BigInt(records[0]!.record.offset);
    const last = BigInt(records[records.length - 1]!.record.offset);
    const known = this.cache.begin(partition, first);
    const after = await applyBatch(COUNT, partition, counted, async (k) => {
      const w = touched.get(k)!;
      return known.get(k) ?? (await this.readCount(w.source, w.end, partition));
    });
    await Promise.all(
      [...after].map(async ([k, { partial, added }]) => {
        const w = touched.get(k)!;
        w.added = added;
        if (added === 0) return;
        await this.session.execute(this.insert, [w.source, new Date(w.end), this.rule, partition, partial.state, toLong(partial.through), toLong(partial.through)], {
          prepare: true,
          consistency: consistencies.localQuorum,
        });
      }),
    );
    this.cache.commit(partition, first, last, new Map([...after].map(([k, a]) => [k, a.partial])));
    return touched;
  }

  /** The stored count of one partition in one window (none: 0 through -1). */
  private async readCount(source: string, end: number, partition: number): Promise<Partial<number>> {
    const r = await this.session.execute(
      `SELECT event_count, through_offset FROM ${this.ks}.alert_window_counts WHERE source = ? AND window_end = ? AND rule = ? AND partition = ?`,
      [source, new Date(end), this.rule, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    const row = r.first();
    if (row === null) return { state: 0, through: -1n };
    const count = row['event_count'] as number | null;
    const through = row['through_offset'] as Long | null;
    // Both cells are written by one statement: a row without one is torn or changed by hand (IncompleteRows).
    const where = `${source}, ${new Date(end).toISOString()}, partition ${partition}`;
    const key = `${partition}\u0000${end}\u0000${source}`;
    if (count === null || through === null) {
      const missing = count === null ? 'event_count' : 'through_offset';
      return this.incomplete.refuse(
        key,
        `${this.ks}.alert_window_counts answered the row (${where}) without its ${missing}; reading it again`,
        (seconds) =>
          `the ${this.ks}.alert_window_counts row (${where}) has had no ${missing} for ${seconds} s: workers write both cells in one statement, so the row was changed outside them, and the window's count cannot be known from it. ` +
          'The partition is stopped at its checkpoint and nothing is skipped. To recount every window from the stored events, stop the workers and run `exactlyonce alerts rule` with the job\'s current rule (docs/aggregates.md, "One job, one configuration — and changing the rule"), then start them again',
      );
    }
    this.incomplete.whole(key);
    return { state: count, through: fromLong(through) };
  }

  /** Sums each touched window and stores + publishes the alerts at or above the threshold. */
  async update(touched: Map<string, TouchedWindow>): Promise<AlertOutcome> {
    const outcome: AlertOutcome = { raised: 0, revised: 0 };
    await Promise.all(
      [...touched.values()].map(async (w) => {
        const count = await this.count(w.source, w.end);
        if (count < this.alertRule.threshold) return;
        if (count - w.added < this.alertRule.threshold) outcome.raised++;
        else outcome.revised++;
        await this.store({ source: w.source, ts: w.end, eventCount: count });
        let published = count;
        await this.publish({ source: w.source, ts: w.end, eventCount: published });
        // Read back: a concurrent worker may have stored a higher count whose message landed earlier.
        for (;;) {
          const stored = await this.read(w.source, w.end);
          if (stored === null || stored <= published) break;
          published = stored;
          await this.publish({ source: w.source, ts: w.end, eventCount: published });
        }
      }),
    );
    return outcome;
  }

  /** A window's count: the sum of its partitions' counts. */
  protected async count(source: string, end: number): Promise<number> {
    const r = await this.session.execute(
      `SELECT event_count FROM ${this.ks}.alert_window_counts WHERE source = ? AND window_end = ? AND rule = ?`,
      [source, new Date(end), this.rule],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    let n = 0;
    for (const row of r.rows) n += row['event_count'] as number;
    return n;
  }

  /** Idempotent and monotonic: the write timestamp grows with the count within a row. */
  protected async store(a: Alert): Promise<void> {
    await this.session.execute(
      alertInsert(this.ks),
      [a.source, new Date(a.ts), a.eventCount, toLong(alertWriteTimestamp(a))],
      { prepare: true, consistency: consistencies.localQuorum },
    );
  }

  private async read(source: string, end: number): Promise<number | null> {
    const r = await this.session.execute(
      `SELECT event_count FROM ${this.ks}.alerts WHERE source = ? AND ts = ?`,
      [source, new Date(end)],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    const row = r.first();
    return row === null ? null : (row['event_count'] as number);
  }

  private publish(a: Alert): Promise<void> {
    return this.ctx.publish(this.alertsTopic, [{ key: alertTopicKey(a.source, a.ts), value: alertTopicValue(a) }]);
  }
}
