/**
 * The original EventStreamingApp on the engine: each valid event becomes one row of the original
 * `events` table, keyed by the Kafka partition and offset it came from, and feeds the event-time
 * alerts (src/app/alerts.ts), all before the batch's checkpoint.
 */
import { consistencies, toLong, type Client } from '../cassandra/session.js';
import type { Decoded, DecodedRecord, Job, JobContext, SourceRecord } from '../engine/job.js';
import { DEFAULT_ALERT_RULE, type AlertRule } from './alert-rule.js';
import { AlertWriter, type AlertOutcome } from './alerts.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES, type Event } from './event.js';

/** Rows per Cassandra batch. All rows of a batch share the partition key, so the batch is one mutation. */
const ROWS_PER_BATCH = 100;

export interface EventJobOptions {
  maxRecordBytes: number;
  rule: AlertRule;
  alertsTopic: string;
  /** Told what each batch did to the alerts (metrics). */
  onAlerts?: (outcome: AlertOutcome, lateEvents: number) => void;
}

export class EventJob implements Job<Event> {
  private session: Client | undefined;
  private insert = '';
  private readonly alerts: AlertWriter;
  private readonly options: EventJobOptions;
  /** Highest event time seen by this worker, to count late events (metric only). */
  private maxTs = Number.NEGATIVE_INFINITY;

  constructor(options: Partial<EventJobOptions> = {}) {
    this.options = { maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, rule: DEFAULT_ALERT_RULE, alertsTopic: 'exactlyonce.alerts', ...options };
    this.alerts = new AlertWriter(this.options.rule, this.options.alertsTopic);
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
