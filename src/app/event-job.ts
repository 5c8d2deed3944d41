/**
 * The original EventStreamingApp on the engine: each valid event becomes one row of the original
 * `events` table, keyed by the Kafka partition and offset it came from, and feeds the event-time
 * alerts (src/app/alerts.ts), all before the batch's checkpoint.
 *
 * Its settings — everything that changes what a record becomes: the record size limit and the alert
 * rule — are the job's, stored in the keyspace's `job` table by its first worker
 * (src/engine/job-binding.ts). A worker or `verify` started without a setting's flag uses the stored
 * value; one given a different value refuses (EO_JOB_CONFIG_MISMATCH, naming each flag). Only
 * `exactlyonce alerts rule` changes the stored rule (src/app/rule-change.ts).
 */
import { consistencies, toLong, type Client } from '../cassandra/session.js';
import type { Decoded, DecodedRecord, Job, JobContext, SourceRecord } from '../engine/job.js';
import { JobBinding, type BoundJob, type SettingValue, type Settings } from '../engine/job-binding.js';
import { ExactlyOnceError } from '../errors.js';
import { DEFAULT_ALERT_RULE, type AlertRule } from './alert-rule.js';
import { AlertWriter, type AlertOutcome } from './alerts.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES, type Event, type HealthCode } from './event.js';
import { validateWindowSpec } from './windows.js';

/** The job's name: the key of its row in `<keyspace>.job`. */
export const EVENT_JOB_NAME = 'events';

/** What changes what a record becomes. */
export interface EventJobSettings {
  readonly maxRecordBytes: number;
  readonly rule: AlertRule;
}

export const DEFAULT_EVENT_JOB_SETTINGS: EventJobSettings = { maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, rule: DEFAULT_ALERT_RULE };

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
  return { maxRecordBytes: v['max-record-bytes']!, rule: { windows, threshold: v['threshold']!, health: v['alert-health'] as HealthCode } };
}

/**
 * A key of the stored settings that marks an unfinished `alerts rule` (src/app/rule-change.ts): set
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

/** Rows per Cassandra batch. All rows of a batch share the partition key, so the batch is one mutation. */
const ROWS_PER_BATCH = 100;

export interface EventJobOptions {
  /** Larger records are quarantined (a setting of the job). */
  maxRecordBytes: number;
  /** The alert rule (a setting of the job). */
  rule: AlertRule;
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
  private session: Client | undefined;
  private insert = '';
  private readonly alerts: AlertWriter;
  private readonly options: EventJobOptions;
  /** Highest event time seen by this worker, to count late events (metric only). */
  private maxTs = Number.NEGATIVE_INFINITY;

  constructor(options: Partial<EventJobOptions> = {}) {
    this.options = { maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, rule: DEFAULT_ALERT_RULE, alertsTopic: 'exactlyonce.alerts', ...options };
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
    this.session = ctx.session;
    this.insert = `INSERT INTO ${ctx.keyspace}.events (id, ts, partition, offset, source, client, health) VALUES (?, ?, ?, ?, ?, ?, ?)`;
    this.alerts.open(ctx);
  }

  /**
   * Idempotent: a row's key is (partition, offset) and every value is a pure function of the record,
   * so writing the same records again (replay after a crash, a zombie's late write) leaves the same
   * rows; the alert index is keyed the same way and alert writes are monotonic (see alerts.ts). Rows
   * of one Kafka partition share the Cassandra partition key, so each UNLOGGED batch is applied
   * atomically and in isolation without a batchlog.
   */
  async write(partition: number, records: readonly DecodedRecord<Event>[]): Promise<void> {
    const session = this.session!;
    const chunks: Promise<unknown>[] = [];
    for (let i = 0; i < records.length; i += ROWS_PER_BATCH) {
      const queries = records.slice(i, i + ROWS_PER_BATCH).map(({ record, value: e }) => ({
        query: this.insert,
        params: [toLong(e.id), new Date(e.ts), partition, toLong(record.offset), e.source, e.client, e.health],
      }));
      chunks.push(session.batch(queries, { prepare: true, logged: false, consistency: consistencies.localQuorum }));
    }
    const [touched] = await Promise.all([this.alerts.index(partition, records), ...chunks]);
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
