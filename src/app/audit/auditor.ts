/**
 * The Auditor proves DESIGN.md §4 against the broker's log, while workers run or after they stopped:
 *
 * 1. It reads the checkpoints first, then the watermarks: every row below a checkpoint is durable
 *    before the audit looks at it, so a live pipeline can be audited.
 * 2. For each partition it reads the topic from the log start up to the checkpoint, in offset order,
 *    and merges it chunk by chunk with the `events` and `quarantine` rows of the same offset range
 *    (PartitionLedger). Memory: one chunk of records per partition being read (at most 4 at once),
 *    one page of rows per table, plus the alert windows.
 * 3. Rows below the log start (records deleted by retention after they were stored) are counted, not
 *    judged; rows at or after the checkpoint are "in flight" while the log holds their offset, and
 *    extra once they are beyond the log end (read again after the scan, so a record produced during
 *    the audit is never mistaken for an extra row).
 * 4. It recomputes the alerts from the events of the topic (plus the stored rows of offsets retention
 *    deleted) and diffs them with the `alerts` table and the latest message per key of the alerts
 *    topic. The topic is the truth: where `events` equals it (step 2), this is the recomputation from
 *    `events`; where it does not, the difference is reported once, as an events violation.
 *    Alerts are compared exactly only when the pipeline was drained for the whole audit; on a live
 *    pipeline their differences are counted as unsettled, not as violations.
 */
import { fromLong, isRetriableCassandraError, toLong, type Client, type Long, type Row } from '../../cassandra/session.js';
import type { ConnectionConfig } from '../../config.js';
import { ExactlyOnceError } from '../../errors.js';
import { CheckpointStore } from '../../engine/checkpoint-store.js';
import type { SourceRecord } from '../../engine/job.js';
import { retry } from '../../engine/retry.js';
import { KafkaAdmin, type Watermarks } from '../../kafka/admin.js';
import { IncompleteRead, LogReader } from '../../kafka/log-reader.js';
import { WindowCounter, type AlertRule } from '../alert-rule.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES } from '../event.js';
import { ORIGINAL_LAYOUT, type EventsLayout } from '../events-layout.js';
import { EventRows } from './event-rows.js';
import { AlertDiff, decodeAlertMessage, LatestPerKey, type AlertViolation } from './alert-diff.js';
import { PartitionLedger, type EventRow, type QuarantineRowView } from './ledger.js';
import { ViolationLog, type AlertsReport, type AuditReport, type PartitionReport } from './report.js';
import { auditStatements } from './statements.js';

export interface AuditOptions {
  readonly rule: AlertRule;
  /** Compare the alerts too (default true). */
  readonly checkAlerts?: boolean;
  /** Where the job stores its events (default: the original `events` table). */
  readonly layout?: EventsLayout;
  /** The workers' record size limit: larger records must be quarantined as too_large. */
  readonly maxRecordBytes?: number;
  /** Violations kept with their detail; all are counted (default 1000). */
  readonly keepViolations?: number;
  /** Records read and merged per chunk (default 5000). */
  readonly chunkRecords?: number;
  /** Partitions audited at once, each with its own Kafka reader (default 2). */
  readonly lanes?: number;
  /** Rows per Cassandra page (default 5000). */
  readonly fetchSize?: number;
  /** The topic read gives up when no record arrived for this long while some are expected, ms (default 60000). */
  readonly readIdleTimeoutMs?: number;
  /** Records judged so far, of the total below the checkpoints. */
  readonly onProgress?: (done: number, total: number) => void;
}

interface PartitionState {
  readonly partition: number;
  readonly low: bigint;
  readonly high: bigint;
  /** The last stable offset: the end of what a read_committed consumer can read (lag is counted to it). */
  readonly stable: bigint;
  readonly checkpoint: bigint | null;
  /** The audit reads [low, end): the checkpoint, clamped into the log. */
  readonly end: bigint;
  readonly ledger: PartitionLedger;
  belowLogStart: number;
  aheadOfCheckpoint: number;
}

function eventRow(row: Row): EventRow {
  const id = row['id'] as Long | null;
  const ts = row['ts'] as Date | null;
  return {
    offset: fromLong(row['offset']),
    id: id === null ? null : fromLong(id),
    ts: ts === null ? null : ts.getTime(),
    source: row['source'] as string | null,
    client: row['client'] as string | null,
    health: row['health'] as number | null,
  };
}

function quarantineRow(row: Row): QuarantineRowView {
  return {
    offset: fromLong(row['offset']),
    topic: row['topic'] as string | null,
    reason: row['reason'] as string | null,
    rawLength: row['raw_length'] as number | null,
    rawSha256: row['raw_sha256'] as string | null,
  };
}

async function* offsets(rows: AsyncIterable<EventRow>): AsyncGenerator<bigint> {
  for await (const r of rows) yield r.offset;
}

export class Auditor {
  private readonly q: ReturnType<typeof auditStatements>;
  private readonly violations: ViolationLog;
  private readonly events: EventRows<EventRow>;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly options: AuditOptions,
  ) {
    this.q = auditStatements(config.keyspace);
    this.violations = new ViolationLog(options.keepViolations ?? 1000);
    this.events = new EventRows((q, p, m) => this.rows(q, p, m), config.keyspace, options.layout ?? ORIGINAL_LAYOUT, eventRow);
  }

  /** Every row of a query, page by page; a page that times out is fetched again. */
  private async *rows<T>(query: string, params: unknown[], map: (row: Row) => T): AsyncGenerator<T> {
    let pageState: string | undefined;
    do {
      const state = pageState;
      const r = await retry(
        () => this.session.execute(query, params, { prepare: true, fetchSize: this.options.fetchSize ?? 5000, pageState: state }),
        { server: 'Cassandra', isRetriable: isRetriableCassandraError, deadlineMs: 120_000 },
      );
      for (const row of r.rows) yield map(row);
      pageState = r.pageState ?? undefined;
    } while (pageState !== undefined);
  }

  async run(): Promise<AuditReport> {
    const started = Date.now();
    const { config } = this;
    const checkAlerts = this.options.checkAlerts ?? true;
    const maxBytes = this.options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
    const counter = new WindowCounter(this.options.rule);
    const admin = new KafkaAdmin(config);
    try {
      if ((await admin.partitionCount(config.topic)) === null) {
        throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${config.topic} does not exist at ${config.brokers.join(',')}; nothing to verify`);
      }
      // Checkpoints first: every row below them is durable before we read it.
      const store = new CheckpointStore(this.session, config.keyspace, config.topic);
      const checkpoints = await store.readAll().catch((e: unknown) => {
        throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `cannot read ${config.keyspace}.checkpoints (${(e as Error).message}); is the schema applied? run \`exactlyonce schema apply\``, { cause: e });
      });
      const before = await admin.watermarks(config.topic);

      const states = new Map<number, PartitionState>();
      for (const w of before) states.set(w.partition, this.partitionState(w, checkpoints.get(w.partition) ?? null, counter, maxBytes));
      const unknownPartitions = await this.unknownPartitions(new Set(states.keys()), checkpoints);

      const total = [...states.values()].reduce((n, s) => n + Number(s.end - s.low), 0);
      const progress = { done: 0, total };
      this.options.onProgress?.(0, total);
      // Partitions are audited `lanes` at a time, each lane with a reader of its own: the audit waits
      // on Cassandra more than it computes, so two lanes keep one core busy.
      const lanes = Math.max(1, Math.min(this.options.lanes ?? 2, states.size));
      const readers: LogReader[] = [];
      try {
        for (let i = 0; i < lanes; i++) readers.push(await LogReader.open(config));
        const queue = [...states.values()];
        await Promise.all(
          readers.map(async (reader) => {
            for (let s = queue.shift(); s !== undefined; s = queue.shift()) {
              await this.scan(reader, s, progress);
              await this.belowLogStart(s, counter);
            }
          }),
        );

        // Read after the scan: a row at or beyond this log end cannot belong to any record.
        const after = new Map((await admin.watermarks(config.topic)).map((w) => [w.partition, w.high]));
        const checkpointsAfter = await store.readAll();
        this.events.rescan(); // buckets written during the scan
        for (const s of states.values()) await this.aheadOfCheckpoint(s, after.get(s.partition) ?? s.high);

        const settled =
          unknownPartitions.length === 0 &&
          [...states.values()].every(
            (s) =>
              (s.checkpoint ?? s.low) === s.high &&
              after.get(s.partition) === s.high &&
              checkpointsAfter.get(s.partition) === s.checkpoint &&
              s.aheadOfCheckpoint === 0 &&
              s.ledger.position === s.end,
          );
        const alerts = checkAlerts ? await this.compareAlerts(admin, readers[0]!, counter, settled) : null;
        return this.report(started, [...states.values()], unknownPartitions, alerts);
      } finally {
        await Promise.all(readers.map((r) => r.close()));
      }
    } finally {
      await admin.close();
    }
  }

  /**
   * Reads [log start, checkpoint) of one partition and merges it chunk by chunk with the rows of the
   * same range; the next chunk is fetched from Kafka while the current one is checked against Cassandra.
   */
  private async scan(reader: LogReader, s: PartitionState, progress: { done: number; total: number }): Promise<void> {
    const p = s.partition;
    const check = async (records: readonly SourceRecord[], upTo: bigint) => {
      const from = s.ledger.position;
      await s.ledger.check(
        records,
        upTo,
        this.events.range(p, from, upTo),
        this.rows(this.q.quarantineRange, [p, toLong(from), toLong(upTo)], quarantineRow),
      );
      progress.done += Number(s.ledger.position - from);
      this.options.onProgress?.(progress.done, progress.total);
    };
    const chunks = reader.read(this.config.topic, p, s.low, s.end, this.options.chunkRecords ?? 5000, this.options.readIdleTimeoutMs ?? 60_000);
    let next = chunks.next();
    try {
      for (;;) {
        const c = await next;
        if (c.done === true) break;
        next = chunks.next();
        await check(c.value.records, c.value.records[c.value.records.length - 1]!.offset + 1n);
      }
      // The broker confirmed the end: offsets left up to the checkpoint are a gap, rows there extra.
      if (s.ledger.position < s.end) await check([], s.end);
    } catch (e) {
      next.catch(() => undefined);
      if (!(e instanceof IncompleteRead)) throw e;
      this.violations.add({
        kind: 'incomplete_read',
        partition: p,
        offset: String(e.at),
        message:
          `partition ${p}: the broker returned nothing from offset ${e.at} up to the checkpoint ${s.end} for ${(this.options.readIdleTimeoutMs ?? 60_000) / 1000} s; ` +
          'these offsets are not judged. Is Kafka healthy? Run verify again',
      });
    }
  }

  private partitionState(w: Watermarks, checkpoint: bigint | null, counter: WindowCounter, maxBytes: number): PartitionState {
    const p = w.partition;
    if (checkpoint !== null && checkpoint < w.low) {
      this.violations.add({
        kind: 'checkpoint',
        partition: p,
        offset: String(checkpoint),
        message: `partition ${p}: checkpoint ${checkpoint} is below the log start ${w.low}: records ${checkpoint}..${w.low - 1n} were deleted (retention) before they were processed — lost`,
      });
    } else if (checkpoint !== null && checkpoint > w.high) {
      this.violations.add({
        kind: 'checkpoint',
        partition: p,
        offset: String(checkpoint),
        message: `partition ${p}: checkpoint ${checkpoint} is beyond the log end ${w.high} (was the topic deleted and re-created?)`,
      });
    }
    const c = checkpoint ?? w.low;
    const end = c < w.low ? w.low : c > w.high ? w.high : c;
    const ledger = new PartitionLedger(p, w.low, {
      topic: this.config.topic,
      decode: (v) => decodeEvent(v, maxBytes),
      violations: this.violations,
      onEvent: (e) => counter.add(e),
    });
    return { partition: p, low: w.low, high: w.high, stable: w.stable, checkpoint, end, ledger, belowLogStart: 0, aheadOfCheckpoint: 0 };
  }

  /** Rows and checkpoints of partitions the topic does not have: all extra. */
  private async unknownPartitions(known: Set<number>, checkpoints: Map<number, bigint>): Promise<AuditReport['unknownPartitions']> {
    const found = new Map<number, { partition: number; events: number; quarantine: number; checkpoint: string | null }>();
    const entry = (p: number) => {
      let e = found.get(p);
      if (e === undefined) found.set(p, (e = { partition: p, events: 0, quarantine: 0, checkpoint: checkpoints.has(p) ? String(checkpoints.get(p)) : null }));
      return e;
    };
    for (const [p, c] of checkpoints) {
      if (known.has(p)) continue;
      entry(p);
      this.violations.add({ kind: 'checkpoint', partition: p, offset: String(c), message: `partition ${p}: a checkpoint (${c}) for a partition the topic ${this.config.topic} does not have` });
    }
    const first = -(2n ** 63n);
    const tables = [
      ['events', () => this.events.partitions(), (p: number) => offsets(this.events.from(p, first))],
      ['quarantine', () => this.rows(this.q.quarantinePartitions, [], (r) => r['partition'] as number), (p: number) => this.rows(this.q.quarantineFrom, [p, toLong(first)], (r) => fromLong(r['offset']))],
    ] as const;
    for (const [table, partitions, rowsOf] of tables) {
      for await (const p of partitions()) {
        if (known.has(p)) continue;
        const e = entry(p);
        const ledger = new PartitionLedger(p, 0n, { topic: this.config.topic, decode: decodeEvent, violations: this.violations });
        for await (const offset of rowsOf(p)) {
          e[table]++;
          ledger.extraRow(table, offset, `the topic has no partition ${p}`);
        }
      }
    }
    return [...found.values()].sort((a, b) => a.partition - b.partition);
  }

  /** Rows below the log start: stored before retention deleted their records. Counted, and they count in the alerts. */
  private async belowLogStart(s: PartitionState, counter: WindowCounter): Promise<void> {
    if (s.low === 0n) return;
    for await (const row of this.events.below(s.partition, s.low)) {
      s.belowLogStart++;
      if (row.source !== null && row.ts !== null && row.health !== null) counter.add({ source: row.source, ts: row.ts, health: row.health });
    }
    for await (const _ of this.rows(this.q.quarantineBelow, [s.partition, toLong(s.low)], (r) => r)) s.belowLogStart++;
  }

  /** Rows at or after the checkpoint: in flight while the log holds their offset, extra beyond the log end. */
  private async aheadOfCheckpoint(s: PartitionState, logEndNow: bigint): Promise<void> {
    for (const [table, rowsOf] of [
      ['events', () => offsets(this.events.from(s.partition, s.end))],
      ['quarantine', () => this.rows(this.q.quarantineFrom, [s.partition, toLong(s.end)], (r) => fromLong(r['offset']))],
    ] as const) {
      for await (const offset of rowsOf()) {
        if (offset < logEndNow) s.aheadOfCheckpoint++;
        else s.ledger.extraRow(table, offset, s.checkpoint !== null && s.checkpoint > s.high ? 'beyond the log end; the checkpoint is too' : `beyond the log end ${logEndNow}`);
      }
    }
  }

  private async compareAlerts(admin: KafkaAdmin, reader: LogReader, counter: WindowCounter, settled: boolean): Promise<AlertsReport> {
    const rule = this.options.rule;
    const expected = counter.alerts();
    let unsettled = 0;
    const report = (v: AlertViolation) => {
      if (settled) this.violations.add(v);
      else unsettled++;
    };
    const table = new AlertDiff(expected, 'table', `${this.config.keyspace}.alerts`, report);
    for await (const a of this.rows(this.q.alerts, [], (r) => ({ source: r['source'] as string, ts: (r['ts'] as Date).getTime(), eventCount: r['event_count'] as number }))) {
      table.found(a);
    }
    const topicName = this.config.alertsTopic;
    const topic = new AlertDiff(expected, 'topic', topicName, report);
    if ((await admin.partitionCount(topicName)) === null) {
      topic.side.exists = false;
    } else {
      const latest = new LatestPerKey();
      for (const w of await admin.watermarks(topicName)) {
        try {
          for await (const { records } of reader.read(topicName, w.partition, w.low, w.high)) {
            for (const r of records) {
              const m = decodeAlertMessage(r.key, r.value);
              if (m.ok) latest.add(r.partition, r.offset, r.timestampMs, m.key, m.alert);
              else topic.malformed(r.partition, r.offset, m.why);
            }
          }
        } catch (e) {
          if (!(e instanceof IncompleteRead)) throw e;
          this.violations.add({ kind: 'incomplete_read', where: 'topic', partition: w.partition, offset: String(e.at), message: `topic ${topicName} partition ${w.partition}: the broker returned nothing from offset ${e.at} on; the alerts of that partition are not judged` });
        }
      }
      for (const a of latest.alerts()) topic.found(a);
      topic.side.messages = latest.messages;
    }
    return {
      rule: { windowMs: rule.windows.sizeMs, slideMs: rule.windows.slideMs, threshold: rule.threshold, health: rule.health },
      expected: expected.length,
      table: table.finish(),
      topic: topic.finish(),
      settled,
      unsettled,
    };
  }

  private report(started: number, states: PartitionState[], unknownPartitions: AuditReport['unknownPartitions'], alerts: AlertsReport | null): AuditReport {
    const partitions: PartitionReport[] = states.map((s) => {
      const l = s.ledger;
      // Aborted records, transaction markers and a transaction still open are not lag: nothing to read.
      const lag = s.stable - (s.checkpoint ?? s.low);
      return {
        partition: s.partition,
        logStart: String(s.low),
        logEnd: String(s.high),
        checkpoint: s.checkpoint === null ? null : String(s.checkpoint),
        lag: String(lag < 0n ? 0n : lag),
        records: l.records,
        stored: l.stored,
        quarantined: l.quarantined,
        reasons: { ...l.reasons },
        missing: l.missing,
        extra: l.extra,
        mismatched: l.mismatched,
        gaps: l.gaps,
        belowLogStart: s.belowLogStart,
        aheadOfCheckpoint: s.aheadOfCheckpoint,
      };
    });
    const sum = (f: (p: PartitionReport) => number) => partitions.reduce((n, p) => n + f(p), 0);
    const unknownExtra = unknownPartitions.reduce((n, u) => n + u.events + u.quarantine, 0);
    const durationMs = Date.now() - started;
    const records = sum((p) => p.records);
    return {
      ok: this.violations.total === 0,
      topic: this.config.topic,
      keyspace: this.config.keyspace,
      startedAt: new Date(started).toISOString(),
      durationMs,
      recordsPerSecond: Math.round(records / Math.max(0.001, durationMs / 1000)),
      peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
      partitions,
      totals: {
        records,
        stored: sum((p) => p.stored),
        quarantined: sum((p) => p.quarantined),
        missing: sum((p) => p.missing),
        extra: sum((p) => p.extra) + unknownExtra,
        mismatched: sum((p) => p.mismatched),
        lag: String(partitions.reduce((n, p) => n + BigInt(p.lag), 0n)),
        gapOffsets: sum((p) => p.gaps.offsets),
        belowLogStart: sum((p) => p.belowLogStart),
        aheadOfCheckpoint: sum((p) => p.aheadOfCheckpoint),
      },
      unknownPartitions,
      alerts,
      violationCounts: { ...this.violations.counts },
      violationTotal: this.violations.total,
      violations: [...this.violations.kept],
    };
  }
}
