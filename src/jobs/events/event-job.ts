/**
 * The seed job's EventStreamingApp (docs/design.md §2) as a job of the engine: each valid event becomes
 * one row of the `events` table (the seed job's, verbatim), keyed by the Kafka partition and offset it
 * came from, and feeds the event-time alerts (src/jobs/events/alerts.ts), all before the batch's checkpoint.
 *
 * Its settings — everything that changes what a record becomes: the record size limit and the alert
 * rule — are the job's, stored in the keyspace's `job` table by its first worker
 * (src/engine/job-binding.ts). A worker or `verify` started without a setting's flag uses the stored
 * value; one given a different value refuses (EO_JOB_CONFIG_MISMATCH, naming each flag). Only
 * `exactlyonce alerts rule` changes the stored rule (src/jobs/events/rule-change.ts).
 */
import { int32, utf8, ValueCache } from '../../cassandra/encode.js';
import { BatchRows } from '../../cassandra/batch-rows.js';
import { PreparedBatch } from '../../cassandra/prepared-batch.js';
import { BATCH_BYTES, ROWS_PER_BATCH } from '../../cassandra/batches.js';
import { consistencies, type Client } from '../../cassandra/session.js';
import type { Decoded, DecodedRecord, Job, JobContext, SourceRecord } from '../../engine/job.js';
import { JobBinding, type BoundJob, type SettingValue, type Settings } from '../../engine/job-binding.js';
import { ExactlyOnceError } from '../../errors.js';
import { DEFAULT_ALERT_RULE, type AlertRule } from './alert-rule.js';
import { AlertWriter, type AlertOutcome } from './alerts.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES, type Event, type HealthCode } from './event.js';
import { bucketOf, eventsTable, formatLayout, ORIGINAL_LAYOUT, parseLayout, sameCassandraPartition, type EventsLayout } from './events-layout.js';
import { validateWindowSpec } from './windows.js';

/** The job's name: the key of its row in `<keyspace>.job`. */
export const EVENT_JOB_NAME = 'events';

/** What changes what a record becomes. */
export interface EventJobSettings {
  readonly maxRecordBytes: number;
  readonly rule: AlertRule;
  /** Where the rows go (src/jobs/events/events-layout.ts); stored only when not the seed job's `events` table (ORIGINAL_LAYOUT), so a job row stored without one (a job older than layouts) still matches. */
  readonly layout?: EventsLayout;
}

export const DEFAULT_EVENT_JOB_SETTINGS: EventJobSettings = { maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, rule: DEFAULT_ALERT_RULE, layout: ORIGINAL_LAYOUT };

/** The stored setting of the layout (`run --layout`); absent: the seed job's `events` table (ORIGINAL_LAYOUT). */
export const LAYOUT_SETTING = 'layout';

/**
 * Each setting as stored in the job row: keyed by its flag's name (so a difference names the flag to
 * fix), with the bounds the flag accepts.
 */
export const SETTING_FLAGS = {
  'max-record-bytes': { option: 'maxRecordBytes', min: 64, max: 1e9 },
  'window-ms': { option: 'windowMs', min: 1, max: 86_400_000 * 365 },
  'slide-ms': { option: 'slideMs', min: 1, max: 86_400_000 * 365 },
  threshold: { option: 'threshold', min: 1, max: 2 ** 31 - 1 },
  'alert-health': { option: 'alertHealth', min: 0, max: 2 },
} as const;

export type SettingFlag = keyof typeof SETTING_FLAGS;

/** The settings as the job row stores them, e.g. `{"max-record-bytes": 65536, "window-ms": 5000, …}`. */
export function storedSettings(s: EventJobSettings): Settings {
  return {
    'max-record-bytes': s.maxRecordBytes,
    'window-ms': s.rule.windows.sizeMs,
    'slide-ms': s.rule.windows.slideMs,
    threshold: s.rule.threshold,
    'alert-health': s.rule.health,
    ...(s.layout === undefined || s.layout.kind === 'original' ? {} : { [LAYOUT_SETTING]: formatLayout(s.layout) }),
  };
}

/**
 * Stored (or resolved) settings back to what the job runs with; throws EO_CONFIG_INVALID naming the
 * flag of a value out of bounds or missing (`where` ends the message's parenthesis, e.g. `; the job
 * stored in keyspace k`). Settings this version does not know are ignored here (the job's `checkSame`
 * then names them as a difference: a worker never runs without a setting it ignores).
 */
export function parseSettings(settings: Settings, where = ''): EventJobSettings {
  const v: Record<string, number> = {};
  for (const [flag, b] of Object.entries(SETTING_FLAGS)) {
    const x = settings[flag];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < b.min || x > b.max) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `--${flag}: expected a whole number from ${b.min} to ${b.max} (got ${x === undefined ? 'none' : JSON.stringify(x)}${where})`);
    }
    v[flag] = x;
  }
  const windows = { sizeMs: v['window-ms']!, slideMs: v['slide-ms']! };
  const problem = validateWindowSpec(windows);
  if (problem !== undefined) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--window-ms/--slide-ms: ${problem} (got ${windows.sizeMs}/${windows.slideMs}${where})`);
  const layout = settings[LAYOUT_SETTING];
  return {
    maxRecordBytes: v['max-record-bytes']!,
    rule: { windows, threshold: v['threshold']!, health: v['alert-health'] as HealthCode },
    layout: layout === undefined ? ORIGINAL_LAYOUT : parseLayout(String(layout), where),
  };
}

/**
 * A key of the stored settings that marks an unfinished `alerts rule` (src/jobs/events/rule-change.ts): set
 * before it rewrites anything, removed when it stores the new rule. No worker knows this key, so
 * while it is there every worker refuses to start (EO_JOB_CONFIG_MISMATCH, by the engine's own
 * comparison), and `verify` too: the alerts are being rewritten.
 */
export const RULE_CHANGE_MARK = 'alerts-rule-change';

/**
 * The settings a command runs with: the job's stored value of each setting unless its flag was given
 * explicitly — then the flag's value, which the job's check refuses when it differs (to change the
 * rule, there is `alerts rule`). Before the job is set up (`stored` null), the flags, defaults included.
 * Settings the job has and the flags do not (e.g. `RULE_CHANGE_MARK`) are kept, so the check names them.
 */
export function resolveSettings(stored: Settings | null, flags: Settings, explicit: ReadonlySet<string>): Settings {
  if (stored === null) return flags;
  const out: Record<string, SettingValue> = { ...flags, ...stored };
  for (const k of explicit) if (flags[k] !== undefined) out[k] = flags[k];
  return out;
}

/** Throws when an `alerts rule` run on the keyspace is unfinished (its mark is in the stored settings). */
export function checkNoRuleChange(job: BoundJob | null, keyspace: string, who: string): void {
  const mark = job?.settings[RULE_CHANGE_MARK];
  if (mark === undefined) return;
  throw new ExactlyOnceError(
    'EO_JOB_CONFIG_MISMATCH',
    `${who} cannot start: a change of the alert rule of keyspace ${keyspace} is unfinished (${String(mark)}); the alerts are being rewritten. Run \`exactlyonce alerts rule\` again with the rule wanted to finish it`,
  );
}

/**
 * The job row of the keyspace, or null before its first worker. A keyspace made before the `job`
 * table existed says what to run.
 */
export async function readJob(session: Client, keyspace: string): Promise<BoundJob | null> {
  try {
    return await new JobBinding(session, keyspace).read(EVENT_JOB_NAME);
  } catch (e) {
    const msg = e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e);
    if (/unconfigured table|does not exist|keyspace .* not/i.test(msg)) {
      throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `cannot read ${keyspace}.job, where the job's configuration is stored (${msg}); run \`exactlyonce schema apply\``, { cause: e });
    }
    throw e;
  }
}

/** The encoded values that repeat from row to row: sources and clients. */
const texts = new ValueCache<string>(utf8);

/** Bytes of one `events` row's values besides its two strings (id, ts, partition, offset, health, bucket). */
const FIXED_ROW_BYTES = 8 + 8 + 4 + 8 + 4 + 8;

/**
 * Writes the `events` rows of records[from, to) of one partition into `rows`, each as the batch entry
 * of the prepared insert (src/cassandra/prepared-batch.ts): values in the statement's order, already
 * encoded — no statement object, parameter array or value buffer per row (the hot path: measured in
 * bench/micro.ts). `bucket`: the rows' bucket in the bucketed layout (one per batch: a batch never
 * spans two buckets). Stops after the row that brings `rows` to `maxBytes`; returns the index of the
 * first record not written (`to` when all were).
 */
export function insertRows(rows: BatchRows, partition: number, records: readonly DecodedRecord<Event>[], from: number, to: number, bucket?: bigint, maxBytes = Infinity): number {
  for (let i = from; i < to; i++) {
    if (rows.at >= maxBytes) return i;
    const r = records[i]!;
    const e = r.value;
    const offset = r.record.offset;
    rows.row();
    rows.int64(e.id);
    rows.int64FromNumber(e.ts);
    rows.int32(partition);
    if (typeof offset === 'bigint') rows.int64(offset);
    else rows.int64FromNumber(offset);
    rows.bytes(texts.get(e.source));
    rows.bytes(texts.get(e.client));
    rows.int32(e.health);
    if (bucket !== undefined) rows.int64(bucket);
  }
  return to;
}

/** The parameters of the insert that make the partition key (partition; and bucket), for routing the batch. */
export function insertRouting(partition: number, bucket?: bigint): unknown[] {
  const params: unknown[] = [null, null, int32(partition), null, null, null, null];
  if (bucket !== undefined) {
    const b = Buffer.allocUnsafe(8);
    b.writeBigInt64BE(bucket);
    params.push(b);
  }
  return params;
}

/** The `events` insert of a layout (the bucketed one adds the bucket). */
export function insertStatement(keyspace: string, layout: EventsLayout): { query: string; values: number } {
  return layout.kind === 'original'
    ? { query: `INSERT INTO ${keyspace}.events (id, ts, partition, offset, source, client, health) VALUES (?, ?, ?, ?, ?, ?, ?)`, values: 7 }
    : { query: `INSERT INTO ${keyspace}.${eventsTable(layout)} (id, ts, partition, offset, source, client, health, bucket) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, values: 8 };
}

export interface EventJobOptions {
  /** Larger records are quarantined (a setting of the job). */
  maxRecordBytes: number;
  /** The alert rule (a setting of the job). */
  rule: AlertRule;
  /** Where the rows go (a setting of the job). */
  layout: EventsLayout;
  alertsTopic: string;
  /** Told what each batch did to the alerts (metrics). */
  onAlerts?: (outcome: AlertOutcome, lateEvents: number) => void;
}

export class EventJob implements Job<Event> {
  readonly name = EVENT_JOB_NAME;
  /** Its checkpoints and quarantine stay in the engine's first tables (src/engine/engine-tables.ts). */
  readonly legacyTables = true;
  /** Stored with the job by its first worker; every later worker must have the same (the Runner checks). */
  readonly settings: Settings;
  /** The insert of the events rows, written in batches of pre-encoded rows. */
  private insert: { batch: PreparedBatch; values: number } | undefined;
  private readonly alerts: AlertWriter;
  private readonly options: EventJobOptions;
  /** Highest event time seen by this worker, to count late events (metric only). */
  private maxTs = Number.NEGATIVE_INFINITY;

  constructor(options: Partial<EventJobOptions> = {}) {
    this.options = { maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, rule: DEFAULT_ALERT_RULE, layout: ORIGINAL_LAYOUT, alertsTopic: 'exactlyonce.alerts', ...options };
    this.alerts = new AlertWriter(this.options.rule, this.options.alertsTopic);
    this.settings = storedSettings(this.options);
  }

  get outputTopics(): readonly string[] {
    return [this.options.alertsTopic];
  }

  decode(record: SourceRecord): Decoded<Event> {
    return decodeEvent(record.value, this.options.maxRecordBytes);
  }

  async open(ctx: JobContext): Promise<void> {
    const { query, values } = insertStatement(ctx.keyspace, this.options.layout);
    this.insert = { batch: new PreparedBatch(ctx.session, query, consistencies.localQuorum), values };
    this.alerts.open(ctx);
    await this.alerts.checkNoLegacyIndex();
  }

  /** The partition is read again from an earlier offset: its cached alert counts may be ahead of the stored ones. */
  onRewind(partition: number): void {
    this.alerts.forget(partition);
  }

  /**
   * Idempotent: a row's key is (partition, offset) and every value is a pure function of the record,
   * so writing the same records again (replay after a crash, a zombie's late write) leaves the same
   * rows; the alert counts never count an offset twice and alert writes are monotonic (see alerts.ts). Rows
   * of one Kafka partition share the Cassandra partition key, so each UNLOGGED batch is applied
   * atomically and in isolation without a batchlog.
   */
  async write(partition: number, records: readonly DecodedRecord<Event>[]): Promise<void> {
    const insert = this.insert!;
    const prepared = await insert.batch.prepared();
    // Every batch is encoded before any is sent: a throw while encoding leaves no send behind it
    // whose failure nothing would handle (an unhandled rejection ends the process).
    const chunks: Array<{ rows: BatchRows; routing: ReturnType<typeof insertRouting> }> = [];
    const layout = this.options.layout;
    // A batch never spans two Cassandra partitions (two buckets), so each stays one atomic mutation.
    for (const run of sameCassandraPartition(layout, records, (r) => r.record.offset)) {
      const bucket = layout.kind === 'original' ? undefined : bucketOf(layout, run[0]!.record.offset);
      const routing = insertRouting(partition, bucket);
      for (let i = 0; i < run.length; ) {
        const to = Math.min(run.length, i + ROWS_PER_BATCH);
        const rows = new BatchRows(prepared.queryId, insert.values, FIXED_ROW_BYTES + 40, to - i);
        i = insertRows(rows, partition, run, i, to, bucket, BATCH_BYTES);
        chunks.push({ rows, routing });
      }
    }
    const [touched] = await Promise.all([this.alerts.index(partition, records), ...chunks.map((c) => insert.batch.send(prepared, c.rows, c.routing))]);
    const outcome = await this.alerts.update(touched);
    let late = 0;
    const lateBefore = this.maxTs - this.options.rule.windows.sizeMs;
    for (const { value } of records) {
      if (value.ts < lateBefore) late++;
      if (value.ts > this.maxTs) this.maxTs = value.ts;
    }
    this.options.onAlerts?.(outcome, late);
  }
}
