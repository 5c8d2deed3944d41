/**
 * docs/design.md §4 invariant 3, incrementally: the alerts recomputed from the topic's events, judged
 * window by window against the `alerts` table and the latest message per key of the alerts topic.
 *
 * Which windows a new record can change: exactly those that contain its event time (for the rule's
 * health level), whatever its offset — a late event revises an old window. So a run judges the windows
 * its new records (those after the last proof) fall in, plus those of the alerts-topic messages
 * published since the last run; every other window's count cannot have changed since it was proved.
 * A window's count is the auditor's own stored count per partition (src/verify/proof-store.ts, in
 * the partition's lineage) plus this run's new events; the first run, or `--full`, counts everything
 * and scans the whole table and topic (finding alerts for windows no event falls in, too).
 *
 * Which windows can still change while the pipeline runs: those that a record at or beyond a
 * checkpoint falls in (read from the log up to its end, once before judging and once after, so a
 * record produced meanwhile is seen too). Their differences are counted as unsettled, not as
 * violations; the next run judges them once those records are checkpointed (they are then new
 * records of that run). Every other window is final, so it is judged even on a live pipeline.
 */
import { alertKey, type AlertRule } from '../jobs/events/alert-rule.js';
import type { Client } from '../cassandra/session.js';
import { IncompleteRead, type LogReader } from '../kafka/log-reader.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import { windowEnds } from '../jobs/events/windows.js';
import { decodeAlertMessage, LatestPerKey, windowOfKey } from '../jobs/events/alert-messages.js';
import { AlertDiff, type AlertViolation } from './alert-diff.js';
import type { PartitionStart } from './proof-plan.js';
import type { ProofStore, WindowId, WindowRow } from './proof-store.js';
import { execute, inParallel, pagedRows } from './reads.js';
import type { AlertsReport, ViolationLog } from './report.js';

export interface AlertAuditContext {
  readonly rule: AlertRule;
  readonly keyspace: string;
  readonly alertsTopic: string;
  readonly session: Client;
  readonly admin: KafkaAdmin;
  /** Null: no proof is read or written (an older keyspace, or nothing recorded). */
  readonly store: ProofStore | null;
  readonly violations: ViolationLog;
  /** Where each partition's counting started (its lineage and the stored counts' offset). */
  readonly starts: ReadonlyMap<number, PartitionStart>;
  /** Every partition started over: the whole alerts table and topic are read. */
  readonly full: boolean;
}

/** One partition's new events in one window, and the stored count they add to. */
interface Touched extends WindowId {
  readonly delta: Map<number, number>;
}

export class AlertAudit {
  private readonly touched = new Map<string, Touched>();
  /** Windows that records at or beyond a checkpoint fall in: they can still change. */
  private readonly pending = new Set<string>();
  /** Too many records in flight to read: any window can still change. */
  private unknown = false;

  constructor(private readonly ctx: AlertAuditContext) {}

  /** A counted event of `partition` that the stored counts do not include yet. */
  count(partition: number, e: { source: string; ts: number; health: number }): void {
    if (e.health !== this.ctx.rule.health) return;
    for (const end of windowEnds(e.ts, this.ctx.rule.windows)) {
      const k = alertKey(e.source, end);
      let w = this.touched.get(k);
      if (w === undefined) this.touched.set(k, (w = { source: e.source, end, delta: new Map() }));
      w.delta.set(partition, (w.delta.get(partition) ?? 0) + 1);
    }
  }

  /** An event at or beyond its partition's checkpoint: the windows it falls in are not judged. */
  inFlight(e: { source: string; ts: number; health: number }): void {
    if (e.health !== this.ctx.rule.health) return;
    for (const end of windowEnds(e.ts, this.ctx.rule.windows)) this.pending.add(alertKey(e.source, end));
  }

  /** Records in flight were not read: no window is judged (their differences count as unsettled). */
  inFlightUnknown(): void {
    this.unknown = true;
  }

  /**
   * Judges the windows (see the file comment) and, when `advance`, stores the counts up to `ends` (per
   * partition: where this run's counting ended) and how far the alerts topic was read. `settle` reads
   * the records produced since the log ends were taken (calling `inFlight`), after every read of the
   * table and topic. Returns the report and where each partition's counts now stand.
   */
  async judge(reader: LogReader, ends: ReadonlyMap<number, bigint>, o: { advance: boolean; settle: () => Promise<void> }): Promise<{ report: AlertsReport; countedTo: Map<number, bigint> }> {
    const { ctx } = this;
    const { store, rule } = ctx;
    const incremental = !ctx.full && store !== null;
    const differences: AlertViolation[] = [];
    const found = (v: AlertViolation) => differences.push(v);

    // The alerts topic: every message since the last run (from its start on a full run).
    const topicName = ctx.alertsTopic;
    const exists = (await ctx.admin.partitionCount(topicName)) !== null;
    const alertsTopicId = exists ? await ctx.admin.topicId(topicName) : null;
    const positions = incremental && alertsTopicId !== null ? await store.readAlertPositions(alertsTopicId) : new Map<number, bigint>();
    const latest = new LatestPerKey();
    const readTo = new Map<number, bigint>();
    const malformed: AlertViolation[] = [];
    const probe = new AlertDiff([], 'topic', topicName, (v) => malformed.push(v));
    for (const w of exists ? await ctx.admin.watermarks(topicName) : []) {
      const stored = positions.get(w.partition);
      const from = stored !== undefined && stored >= w.low && stored <= w.high ? stored : w.low;
      readTo.set(w.partition, w.high);
      try {
        for await (const { records } of reader.read(topicName, w.partition, from, w.high)) {
          for (const r of records) {
            const m = decodeAlertMessage(r.key, r.value);
            if (m.ok && windowOfKey(m.key) !== null) latest.add(r.partition, r.offset, r.timestampMs, m.key, m.alert);
            else probe.malformed(r.partition, r.offset, m.ok ? `key ${JSON.stringify(m.key)} names no window` : m.why);
          }
        }
      } catch (e) {
        if (!(e instanceof IncompleteRead)) throw e;
        readTo.set(w.partition, e.at);
        ctx.violations.add({ kind: 'incomplete_read', where: 'topic', partition: w.partition, offset: String(e.at), message: `topic ${topicName} partition ${w.partition}: the broker returned nothing from offset ${e.at} on; the alerts of that partition are not judged` });
      }
    }
    const newest = new Map<string, { window: WindowId; partition: number; offset: bigint; count: number | null }>();
    for (const [key, m] of latest.entries()) {
      const window = windowOfKey(key)!;
      newest.set(alertKey(window.source, window.end), { window, partition: m.partition, offset: m.offset, count: m.alert?.eventCount ?? null });
    }

    // The windows judged: those the new events fall in, and those of the new messages.
    const judged = new Map<string, WindowId>();
    for (const [k, w] of this.touched) judged.set(k, { source: w.source, end: w.end });
    for (const [k, m] of newest) judged.set(k, m.window);

    // Each window's count: the stored counts of its partitions (incremental runs), plus the new events.
    const counts = new Map<string, number>();
    const bases = new Map<string, { count: number; through: bigint }>();
    let stale = false;
    if (incremental) {
      const rows = await store.readWindows(judged.values());
      for (const [k, list] of rows) {
        let n = 0;
        for (const row of list) {
          const base = this.base(row);
          if (base === undefined) continue;
          if (base === 'stale') {
            stale = true;
            continue;
          }
          n += base.count;
          bases.set(`${k}|${row.partition}`, base);
        }
        counts.set(k, n);
      }
    }
    for (const [k, w] of this.touched) counts.set(k, (counts.get(k) ?? 0) + [...w.delta.values()].reduce((a, b) => a + b, 0));
    const expected = [...judged]
      .map(([k, w]) => ({ source: w.source, ts: w.end, eventCount: counts.get(k) ?? 0 }))
      .filter((a) => a.eventCount >= rule.threshold);

    // The table: whole on a full run, else the judged windows' rows.
    const table = new AlertDiff(expected, 'table', `${ctx.keyspace}.alerts`, found);
    if (!incremental) {
      for await (const a of pagedRows(ctx.session, `SELECT source, ts, event_count FROM ${ctx.keyspace}.alerts`, [], (r) => ({ source: r['source'] as string, ts: (r['ts'] as Date).getTime(), eventCount: r['event_count'] as number }))) {
        table.found(a);
      }
    } else {
      await inParallel(judged.values(), 32, async (w) => {
        const row = (await execute(ctx.session, `SELECT event_count FROM ${ctx.keyspace}.alerts WHERE source = ? AND ts = ?`, [w.source, new Date(w.end)])).first();
        if (row !== null) table.found({ source: w.source, ts: w.end, eventCount: row['event_count'] as number });
      });
    }

    // The topic: each judged window's latest message, new or as the last run read it.
    const topic = new AlertDiff(expected, 'topic', topicName, found);
    if (!exists) topic.side.exists = false;
    else {
      const earlier = incremental && alertsTopicId !== null ? await store.readAlertLatest(alertsTopicId, [...judged].filter(([k]) => !newest.has(k)).map(([, w]) => w)) : new Map();
      for (const [k, w] of judged) {
        const count = newest.has(k) ? newest.get(k)!.count : (earlier.get(k)?.count ?? null);
        if (count !== null) topic.found({ source: w.source, ts: w.end, eventCount: count });
      }
      topic.side.messages = latest.messages;
      topic.side.malformed = probe.side.malformed;
    }
    const tableSide = table.finish();
    const topicSide = topic.finish();

    // Windows that records produced meanwhile fall in are not judged either.
    await o.settle();
    let unsettled = 0;
    for (const v of differences) {
      if (this.unknown || this.pending.has(alertKey(v.alert!.source, v.alert!.ts))) unsettled++;
      else ctx.violations.add(v);
    }
    for (const v of malformed) ctx.violations.add(v);

    const advance = o.advance && !this.unknown && !stale && store !== null;
    if (advance) {
      const rows = [...this.touched].flatMap(([k, w]) =>
        [...w.delta].map(([partition, delta]) => {
          const base = bases.get(`${k}|${partition}`) ?? { count: 0, through: 0n };
          return { source: w.source, end: w.end, partition, lineage: ctx.starts.get(partition)!.lineage, count: base.count + delta, through: ends.get(partition)!, prevCount: base.count, prevThrough: base.through };
        }),
      );
      await store.writeWindows(rows);
      if (alertsTopicId !== null) {
        await store.writeAlertLatest(alertsTopicId, [...newest.values()].map((m) => ({ ...m.window, partition: m.partition, offset: m.offset, count: m.count })));
        await store.writeAlertPositions(alertsTopicId, readTo);
      }
    }
    const countedTo = new Map([...ctx.starts].map(([p, s]) => [p, advance ? (ends.get(p) ?? s.counted) : s.counted]));
    return {
      countedTo,
      report: {
        rule: { windowMs: rule.windows.sizeMs, slideMs: rule.windows.slideMs, threshold: rule.threshold, health: rule.health },
        incremental,
        windows: judged.size,
        expected: expected.length,
        table: tableSide,
        topic: topicSide,
        settled: this.pending.size === 0 && !this.unknown && !stale,
        pendingWindows: this.pending.size,
        unsettled,
      },
    };
  }

  /**
   * The stored count a partition's new events add to, from its row in one window: the row itself when
   * it is not newer than the proof this run started from, else the value it was computed from (a run
   * that stored counts, then crashed or lost the race to write its proof); 'stale' when both are
   * newer (another audit proved further meanwhile: this run's counts would be wrong, so it stores none).
   * Undefined for rows of another lineage (an older proof of the partition, ignored).
   */
  private base(row: WindowRow): { count: number; through: bigint } | 'stale' | undefined {
    const start = this.ctx.starts.get(row.partition);
    if (start === undefined || row.lineage !== start.lineage) return undefined;
    if (row.through <= start.counted) return { count: row.count, through: row.through };
    if (row.prevThrough <= start.counted) return { count: row.prevCount, through: row.prevThrough };
    return 'stale';
  }
}
