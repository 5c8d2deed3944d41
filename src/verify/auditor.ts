/**
 * The Auditor proves docs/design.md §4 for the events job against the broker's log, while workers run
 * or after they stopped. It walks the partitions as every auditor does (src/verify/partition-walk.ts:
 * checkpoints before watermarks, where each partition starts, lanes, the proof recorded up to the
 * first violation), and on the way:
 *
 * 1. For each partition it reads the topic from where its proof ended (or the log start) up to the
 *    checkpoint, in offset order, and merges it chunk by chunk with the `events` and `quarantine` rows
 *    of the same offset range (PartitionLedger, src/verify/compare-rows.ts). Memory: one chunk of
 *    records per lane, one page of rows per table, plus the alert windows the records fall in.
 * 2. Rows below the log start (records deleted by retention after they were stored) are counted, not
 *    judged; rows at or after the checkpoint are "in flight" while the log holds their offset, and
 *    extra once they are beyond the log end (read again after the scan, so a record produced during
 *    the audit is never mistaken for an extra row).
 * 3. It recomputes the alerts of the windows the new events fall in and judges them against the
 *    `alerts` table and the alerts topic (src/verify/alert-audit.ts). The topic is the truth: where
 *    `events` equals it (step 1), this is the recomputation from `events`; where it does not, the
 *    difference is reported once, as an events violation.
 */
import { fromLong, toLong, type Client, type Long, type Row } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import type { SourceRecord } from '../engine/job.js';
import { IncompleteRead, type LogReader } from '../kafka/log-reader.js';
import type { AlertRule } from '../jobs/events/alert-rule.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES, type Event } from '../jobs/events/event.js';
import { ORIGINAL_LAYOUT, type EventsLayout } from '../jobs/events/events-layout.js';
import { AlertAudit } from './alert-audit.js';
import { EventRows } from './event-rows.js';
import { PartitionLedger, type EventRow, type QuarantineRowView } from './compare-rows.js';
import { max, min, PartitionWalk, Progress, type ProofOptions, type WalkedPartition, type WalkOptions } from './partition-walk.js';
import { configFingerprint } from './proof-plan.js';
import { inParallel, pagedRows, pages } from './reads.js';
import { ViolationLog, type AlertsReport, type AuditReport } from './report.js';
import { auditStatements } from './statements.js';

export interface AuditOptions {
  readonly rule: AlertRule;
  /** Compare the alerts too (default true). */
  readonly checkAlerts?: boolean;
  /** Where the job stores its events (default: the seed job's `events` table, ORIGINAL_LAYOUT). */
  readonly layout?: EventsLayout;
  /** The workers' record size limit: larger records must be quarantined as too_large. */
  readonly maxRecordBytes?: number;
  /** Violations kept with their detail; all are counted (default 1000). */
  readonly keepViolations?: number;
  /** Records read and merged per chunk (default 5000). */
  readonly chunkRecords?: number;
  /** Partitions audited at once, each with its own Kafka reader (default 4). */
  readonly lanes?: number;
  /** Rows per Cassandra page (default 5000). */
  readonly fetchSize?: number;
  /** The topic read gives up when no record arrived for this long while some are expected, ms (default 60000). */
  readonly readIdleTimeoutMs?: number;
  /** Records judged so far, of the total this run checks. */
  readonly onProgress?: (done: number, total: number) => void;
  /** The recorded proofs (src/verify/partition-walk.ts); `config` defaults to the fingerprint of the rule, the record limit and the layout. */
  readonly proofs?: ProofOptions;
  /** Records at or beyond the checkpoints read to tell which alert windows can still change, at most (default 200,000). */
  readonly maxInFlightRecords?: number;
}

/** A row at or beyond the log end read before it (Auditor.aheadOfCheckpoint). */
interface Beyond {
  readonly partition: number;
  readonly offset: bigint;
  readonly table: 'events' | 'quarantine';
  readonly s: PartitionState;
}

interface PartitionState extends WalkedPartition {
  /** Where reading the topic starts: below `from` when the alert counts are behind the proof. */
  readonly scanFrom: bigint;
  readonly ledger: PartitionLedger;
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
  private readonly maxBytes: number;
  private alerts: AlertAudit | null = null;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly options: AuditOptions,
  ) {
    this.q = auditStatements(config.keyspace);
    this.violations = new ViolationLog(options.keepViolations ?? 1000);
    this.events = new EventRows((q, p, m) => pages(this.session, q, p, m, this.options.fetchSize ?? 5000), config.keyspace, options.layout ?? ORIGINAL_LAYOUT, eventRow);
    this.maxBytes = options.maxRecordBytes ?? DEFAULT_MAX_RECORD_BYTES;
  }

  private rows<T>(query: string, params: unknown[], map: (row: Row) => T): AsyncGenerator<T> {
    return pagedRows(this.session, query, params, map, this.options.fetchSize ?? 5000);
  }

  async run(): Promise<AuditReport> {
    const { config, options } = this;
    const walkOptions: WalkOptions = {
      noTopic: `topic ${config.topic} does not exist at ${config.brokers.join(',')}; nothing to verify`,
      readCheckpoints: () =>
        new CheckpointStore(this.session, config.keyspace, config.topic).readStored().catch((e: unknown) => {
          throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `cannot read ${config.keyspace}.checkpoints (${(e as Error).message}); is the schema applied? run \`exactlyonce schema apply\``, { cause: e });
        }),
      job: 'events',
      proofs: options.proofs,
      defaultConfig: () => configFingerprint({ rule: options.rule, maxRecordBytes: this.maxBytes, layout: options.layout ?? ORIGINAL_LAYOUT }),
      checkpointOutside: (w, cp) =>
        cp < w.low
          ? `partition ${w.partition}: checkpoint ${cp} is below the log start ${w.low}: records ${cp}..${w.low - 1n} were deleted (retention) before they were processed — lost`
          : `partition ${w.partition}: checkpoint ${cp} is beyond the log end ${w.high} (was the topic deleted and re-created?)`,
    };
    return PartitionWalk.run(config, this.session, this.violations, walkOptions, async (walk) => {
      const { plan, store, admin } = walk;
      if (options.checkAlerts ?? true) {
        const starts = new Map(plan.map((s) => [s.partition, s]));
        this.alerts = new AlertAudit({ rule: options.rule, keyspace: config.keyspace, alertsTopic: config.alertsTopic, session: this.session, admin, store, violations: this.violations, starts, full: walk.full });
      }

      const states = walk.partitions().map((b) => this.partitionState(b));
      const unknownPartitions = await this.unknownPartitions(new Set(states.map((s) => s.partition)), new Map([...walk.checkpoints].map(([p, c]) => [p, c.next])));

      const progress = new Progress(states.reduce((n, s) => n + Number(max(0n, s.end - s.scanFrom)), 0), options.onProgress);
      progress.begin();
      const scanEach = async (reader: LogReader, s: PartitionState) => {
        await this.scan(reader, s, progress);
        await this.belowLogStart(s);
      };
      return walk.inLanes(states, options.lanes, (s) => s.scanFrom < s.end, scanEach, async (readers) => {
        // Read after the scan: where the records in flight end (readInFlight below); a row at or beyond
        // it is judged once the log end is read again after the rows (PartitionWalk.judgeBeyondLogEnd).
        const after = new Map((await admin.watermarks(config.topic)).map((w) => [w.partition, w.high]));
        this.events.rescan(); // buckets written during the scan
        const beyond: Beyond[] = [];
        await inParallel(states, 16, (s) => this.aheadOfCheckpoint(s, after.get(s.partition) ?? s.high, beyond));
        await walk.judgeBeyondLogEnd(
          beyond,
          (r) => r.s.aheadOfCheckpoint++,
          (r, logEnd) => r.s.ledger.extraRow(r.table, r.offset, r.s.checkpoint !== null && r.s.checkpoint.next > r.s.high ? 'beyond the log end; the checkpoint is too' : `beyond the log end ${logEnd}`),
        );

        let alertsReport: AlertsReport | null = null;
        let countedTo = new Map(plan.map((s) => [s.partition, s.counted]));
        if (this.alerts !== null) {
          const alerts = this.alerts;
          // Which windows can still change: those the records at or beyond a checkpoint fall in.
          const known = await this.readInFlight(readers[0]!, states.map((s) => ({ partition: s.partition, from: s.end, to: after.get(s.partition) ?? s.high })));
          const r = await alerts.judge(readers[0]!, new Map(states.map((s) => [s.partition, max(s.scanned, s.start.counted)])), {
            advance: known && store !== null && options.proofs?.record === true,
            settle: async () => {
              const now = await admin.watermarks(config.topic);
              await this.readInFlight(readers[0]!, now.map((w) => ({ partition: w.partition, from: after.get(w.partition) ?? w.low, to: w.high })));
            },
          });
          alertsReport = r.report;
          countedTo = r.countedTo;
        }

        const recorded = await walk.recordProofs(states, (s) => countedTo.get(s.partition) ?? s.start.counted);
        return walk.report(recorded, {
          partitions: states.map((s) => walk.partitionReport(s, { ledger: s.ledger, aheadOfCheckpoint: s.aheadOfCheckpoint })),
          unknownPartitions,
          alerts: alertsReport,
        });
      });
    });
  }

  /**
   * Reads [scanFrom, checkpoint) of one partition and merges [from, checkpoint) of it chunk by
   * chunk with the rows of the same range (records below `from`, if any, are only counted for the
   * alerts); the next chunk is fetched from Kafka while the current one is checked against Cassandra.
   */
  private async scan(reader: LogReader, s: PartitionState, progress: Progress): Promise<void> {
    const p = s.partition;
    const counted = s.start.counted;
    const check = async (records: readonly SourceRecord[], upTo: bigint) => {
      const from = s.ledger.position;
      if (upTo > from) {
        await s.ledger.check(
          records,
          upTo,
          this.events.rangePages(p, from, upTo),
          pages(this.session, this.q.quarantineRange, [p, toLong(from), toLong(upTo)], quarantineRow, this.options.fetchSize ?? 5000),
        );
      }
      progress.add(Number(upTo - s.scanned));
    };
    if (s.scanFrom >= s.end) return;
    const chunks = reader.read(this.config.topic, p, s.scanFrom, s.end, this.options.chunkRecords ?? 5000, this.options.readIdleTimeoutMs ?? 60_000);
    let next = chunks.next();
    try {
      for (;;) {
        const c = await next;
        if (c.done === true) break;
        next = chunks.next();
        const records = c.value.records;
        // Below the proof but above the stored alert counts: counted, not judged again.
        if (this.alerts !== null && records[0]!.offset < s.from) {
          for (const r of records) {
            if (r.offset >= s.from) break;
            if (r.offset < counted) continue;
            const d = decodeEvent(r.value, this.maxBytes);
            if (d.ok) this.alerts.count(p, d.value);
          }
        }
        const upTo = records[records.length - 1]!.offset + 1n;
        await check(records, upTo);
        s.scanned = upTo;
      }
      // The broker confirmed the end: offsets left up to the checkpoint are a gap, rows there extra.
      if (s.ledger.position < s.end) await check([], s.end);
      s.scanned = s.end;
    } catch (e) {
      next.catch(() => undefined);
      if (!(e instanceof IncompleteRead)) throw e;
      s.scanned = e.at;
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

  /**
   * Reads the records of each range and tells the alert audit which windows they fall in (they can
   * still change). False, and every window is left unjudged, when there are more than
   * `maxInFlightRecords` of them (a pipeline far behind: reading them all would cost a full audit).
   */
  private async readInFlight(reader: LogReader, ranges: Array<{ partition: number; from: bigint; to: bigint }>): Promise<boolean> {
    const alerts = this.alerts!;
    const total = ranges.reduce((n, r) => n + (r.to > r.from ? Number(r.to - r.from) : 0), 0);
    if (total > (this.options.maxInFlightRecords ?? 200_000)) {
      alerts.inFlightUnknown();
      return false;
    }
    for (const r of ranges) {
      try {
        for await (const { records } of reader.read(this.config.topic, r.partition, r.from, r.to, this.options.chunkRecords ?? 5000, this.options.readIdleTimeoutMs ?? 60_000)) {
          for (const rec of records) {
            const d = decodeEvent(rec.value, this.maxBytes);
            if (d.ok) alerts.inFlight(d.value);
          }
        }
      } catch (e) {
        if (!(e instanceof IncompleteRead)) throw e;
        alerts.inFlightUnknown();
        return false;
      }
    }
    return true;
  }

  private partitionState(b: WalkedPartition): PartitionState {
    const p = b.partition;
    const { start } = b;
    const scanFrom = this.alerts === null ? b.from : max(b.low, min(start.proved, start.counted));
    const alerts = this.alerts;
    const ledger = new PartitionLedger(p, b.from, {
      topic: this.config.topic,
      decode: (v) => decodeEvent(v, this.maxBytes),
      violations: this.violations,
      onEvent: alerts === null ? undefined : (e: Event, offset: bigint) => offset >= start.counted && alerts.count(p, e),
    });
    return { ...b, scanFrom, scanned: scanFrom, ledger, aheadOfCheckpoint: 0 };
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

  /**
   * Rows below the log start: stored before retention deleted their records. Counted (those this run
   * has not seen before), and they count in the alerts. A run continuing a proof reads only those
   * between its proof (or the stored alert counts) and the log start.
   */
  private async belowLogStart(s: PartitionState): Promise<void> {
    if (s.low === 0n) return;
    const fresh = s.start.from === null;
    const from = fresh ? null : this.alerts === null ? s.start.proved : min(s.start.proved, s.start.counted);
    if (from !== null && from >= s.low) return;
    const p = s.partition;
    const events = from === null ? this.events.below(p, s.low) : this.events.range(p, from, s.low);
    for await (const row of events) {
      if (row.offset >= s.start.proved) s.belowLogStart++;
      if (this.alerts !== null && row.offset >= s.start.counted && row.source !== null && row.ts !== null && row.health !== null) this.alerts.count(p, { source: row.source, ts: row.ts, health: row.health });
    }
    const quarantine = from === null ? this.rows(this.q.quarantineBelow, [p, toLong(s.low)], (r) => fromLong(r['offset'])) : this.rows(this.q.quarantineRange, [p, toLong(from), toLong(s.low)], (r) => fromLong(r['offset']));
    for await (const offset of quarantine) if (offset >= s.start.proved) s.belowLogStart++;
  }

  /**
   * Rows at or after the checkpoint: in flight while the log holds their offset; one at or beyond the
   * log end read before them goes to `beyond`, judged once the log end is read again (PartitionWalk.judgeBeyondLogEnd).
   */
  private async aheadOfCheckpoint(s: PartitionState, logEndBefore: bigint, beyond: Beyond[]): Promise<void> {
    for (const [table, rowsOf] of [
      ['events', () => offsets(this.events.from(s.partition, s.end))],
      ['quarantine', () => this.rows(this.q.quarantineFrom, [s.partition, toLong(s.end)], (r) => fromLong(r['offset']))],
    ] as const) {
      for await (const offset of rowsOf()) {
        if (offset < logEndBefore) s.aheadOfCheckpoint++;
        else beyond.push({ partition: s.partition, offset, table, s });
      }
    }
  }
}
