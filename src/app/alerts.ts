/**
 * Exactly-once event-time alerts across partitions (DESIGN.md §4a option a).
 *
 * 1. Each event at the counted health level is indexed once per window it falls in, in
 *    `alert_window_events`, keyed by (source, window end, rule) and clustered by its Kafka partition
 *    and offset: idempotent by construction, so replays and zombies cannot double-count. Cost: one
 *    row per counted event and window (size/slide rows; 1 with the default tumbling windows), written
 *    in one unlogged single-partition batch per (source, window) per Kafka batch.
 * 2. After the batch's rows are acknowledged, every window it touched is recounted with COUNT(*) over
 *    that one small partition. Of two workers adding to one window, whichever counts last sees both
 *    writes (each counts after its own write is acknowledged), so the final count is exact.
 * 3. A window at or above the threshold is upserted into the original `alerts` table
 *    `USING TIMESTAMP windowEnd·1000 + count`: within a row the timestamp grows with the count, so a
 *    stale, smaller recount that lands last can never lower it (Cassandra keeps the highest timestamp).
 *    No counters, no Paxos.
 * 4. The count is published to the alerts topic, keyed by source and window end; then the table row is
 *    read back and, while it is higher than what was published, that is published too. So the last
 *    message of each key always equals the table row: the publisher whose message lands last read the
 *    table after the final count was stored (see README, "Alerts").
 * All of this runs before the batch's checkpoint, so a crash at any point replays it.
 */
import { consistencies, toLong, type Client } from '../cassandra/session.js';
import type { DecodedRecord, JobContext } from '../engine/job.js';
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
 * can never lower a count). Also used by `alerts rule` (src/app/rule-change.ts), which rewrites rows
 * after a TRUNCATE so that workers' later counts keep winning.
 */
export function alertWriteTimestamp(a: Alert): bigint {
  return BigInt(a.ts) * 1000n + BigInt(a.eventCount);
}

/** The alert row upsert; parameters (source, ts, event_count, alertWriteTimestamp). */
export function alertInsert(keyspace: string): string {
  return `INSERT INTO ${keyspace}.alerts (source, ts, event_count) VALUES (?, ?, ?) USING TIMESTAMP ?`;
}

/** The index row insert; parameters (source, window_end, rule, partition, offset). Idempotent. */
export function indexInsert(keyspace: string): string {
  return `INSERT INTO ${keyspace}.alert_window_events (source, window_end, rule, partition, offset) VALUES (?, ?, ?, ?, ?)`;
}

/** The index rows' key names the rule's windows and health (not the threshold: it does not change which events count where). */
export function ruleName(rule: AlertRule): string {
  return `h${rule.health}/${rule.windows.sizeMs}/${rule.windows.slideMs}`;
}

export interface AlertOutcome {
  /** Windows that reached the threshold with this batch. */
  raised: number;
  /** Windows already at the threshold whose count this batch changed or confirmed. */
  revised: number;
}

export class AlertWriter {
  private ctx!: JobContext;
  private session!: Client;
  private ks = '';
  private readonly rule: string;

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
  }

  /** Indexes the batch's counted events; returns the windows touched with this batch's share of each. */
  async index(partition: number, records: readonly DecodedRecord<Event>[]): Promise<Map<string, { source: string; end: number; added: number }>> {
    const byWindow = new Map<string, { source: string; end: number; offsets: bigint[] }>();
    for (const { record, value: e } of records) {
      if (e.health !== this.alertRule.health) continue;
      for (const end of windowEnds(e.ts, this.alertRule.windows)) {
        const k = alertTopicKey(e.source, end);
        let w = byWindow.get(k);
        if (w === undefined) byWindow.set(k, (w = { source: e.source, end, offsets: [] }));
        w.offsets.push(record.offset);
      }
    }
    const insert = indexInsert(this.ks);
    await Promise.all(
      [...byWindow.values()].map((w) =>
        this.session.batch(
          w.offsets.map((o) => ({ query: insert, params: [w.source, new Date(w.end), this.rule, partition, toLong(o)] })),
          { prepare: true, logged: false, consistency: consistencies.localQuorum },
        ),
      ),
    );
    return new Map([...byWindow].map(([k, w]) => [k, { source: w.source, end: w.end, added: w.offsets.length }]));
  }

  /** Recounts each touched window and stores + publishes the alerts at or above the threshold. */
  async update(touched: Map<string, { source: string; end: number; added: number }>): Promise<AlertOutcome> {
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

  protected async count(source: string, end: number): Promise<number> {
    const r = await this.session.execute(
      `SELECT COUNT(*) AS n FROM ${this.ks}.alert_window_events WHERE source = ? AND window_end = ? AND rule = ?`,
      [source, new Date(end), this.rule],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    return Number(r.first()['n']);
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
