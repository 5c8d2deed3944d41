/**
 * `exactlyonce alerts rule`: changes the job's alert rule (window, slide, threshold, health) and makes
 * everything derived from it what the new rule gives, from the stored `events`:
 *
 * 1. Marks the job row (RULE_CHANGE_MARK in its settings) before writing anything, then checks that
 *    no worker is registered in `<keyspace>.workers`. From the mark on, a worker that starts refuses
 *    (its settings lack the mark: EO_JOB_CONFIG_MISMATCH), and so does `verify`; an interrupted run
 *    leaves the mark, so nothing runs on half-rewritten alerts until the command is run again.
 * 2. Reads every `events` row and counts the new rule's windows per Kafka partition, and writes those
 *    counts to `alert_window_counts` with the offset of the last event each includes (the state workers
 *    add to, src/jobs/events/alerts.ts). Workers write those rows `USING TIMESTAMP through_offset`, so a row
 *    left from another rule, or from an earlier use of this rule on other records, cannot be deleted
 *    or lowered by a write (its timestamp may be higher); when any stored row is not exactly one the
 *    events give, the table is TRUNCATEd first (no tombstone, no timestamp left behind) and all the new
 *    rule's rows written again. The per-event index of earlier versions (`alert_window_events`) is
 *    emptied too: from then on the counts are the whole state.
 * 3. The `alerts` table. Workers write rows `USING TIMESTAMP windowEnd·1000 + count`, so a larger count
 *    always wins (alerts.ts). A rule change may have to LOWER a count or delete a row, which no write
 *    or delete can do without breaking that: a write or tombstone with a timestamp above the old
 *    count's would also hide every later, correct count of the row below it (a worker's recount of
 *    count c writes at windowEnd·1000 + c), and one below it does not take effect. So when any row
 *    must go down or go away, the table is TRUNCATEd — a truncation leaves no tombstone and no
 *    timestamp behind (Cassandra drops the data written before it) — and every alert of the new rule
 *    is written again at the workers' own timestamps windowEnd·1000 + count: later recounts by
 *    workers keep winning exactly as before. (TRUNCATE needs every Cassandra node up; the table is
 *    empty for a moment in between, which readers of the table see.) When counts only appear or
 *    grow, the new rows are simply upserted at those timestamps, and they win.
 * 4. The alerts topic: the latest message of each key is read; every alert of the new rule whose latest
 *    message differs is published, and every key whose latest message is an alert the new rule does
 *    not give gets a tombstone (null value, same key `source@windowEnd`), so compaction removes it.
 *    Deciding from the topic itself, not from the table, makes a second run finish what an
 *    interrupted one left.
 * 5. Stores the new settings (JobBinding.updateSettings), which also removes the mark.
 * Every step is idempotent: running the command again with the same rule converges.
 */
import { fromLong, isRetriableCassandraError, toLong, type Client, type Long, type QueryOptions, type ResultSet, type Row } from '../../cassandra/session.js';
import type { ConnectionConfig } from '../../config.js';
import { JobBinding, type BoundJob, type Settings } from '../../engine/job-binding.js';
import { retry } from '../../engine/retry.js';
import { ExactlyOnceError } from '../../errors.js';
import { KafkaAdmin } from '../../kafka/admin.js';
import { IncompleteRead, LogReader } from '../../kafka/log-reader.js';
import { Producer, type OutgoingRecord } from '../../kafka/producer.js';
import { alertKey, describeRule, WindowCounter, type Alert, type AlertRule } from './alert-rule.js';
import { alertInsert, alertTopicKey, alertTopicValue, alertWriteTimestamp, countInsert, ruleName } from './alerts.js';
import { decodeAlertMessage, LatestPerKey } from './alert-messages.js';
import { parseSettings, RULE_CHANGE_MARK, storedSettings } from './event-job.js';
import { windowEnds } from './windows.js';

export interface RuleChangeOptions {
  readonly to: AlertRule;
  /** Compute and report only: nothing is written (the mark neither). */
  readonly dryRun: boolean;
  /** Told what the command is doing, one line per step. */
  readonly onStep?: (step: string) => void;
}

export interface RegisteredWorkerRow {
  workerId: string;
  host: string;
  pid: number | null;
  metricsPort: number;
}

export interface RuleChangeReport {
  readonly dryRun: boolean;
  readonly keyspace: string;
  readonly from: AlertRule;
  readonly to: AlertRule;
  /** `events` rows read, and those at the counted health level. */
  readonly events: number;
  readonly counted: number;
  /** Workers registered while a dry run ran (a real run refuses instead). */
  readonly workers: RegisteredWorkerRow[];
  /** The count rows of the new rule, those stored that differed, and whether the table was emptied first. */
  readonly counts: { rule: string; rows: number; written: number; stale: number; truncated: boolean; legacyIndexEmptied: boolean };
  readonly table: { alerts: number; unchanged: number; added: number; raised: number; lowered: number; deleted: number; truncated: boolean };
  readonly topic: { name: string; published: number; tombstones: number; deleted: Array<{ key: string }> };
  /** The settings stored at the end (a dry run: that would be stored). */
  readonly settings: Settings;
}

/** Statements in flight at once. */
const CONCURRENCY = 32;

async function inParallel<T>(items: Iterable<T>, limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const it = items[Symbol.iterator]();
  await Promise.all(
    Array.from({ length: limit }, async () => {
      for (let n = it.next(); n.done !== true; n = it.next()) await fn(n.value);
    }),
  );
}

export class RuleChange {
  private readonly ks: string;
  private readonly binding: JobBinding;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly job: BoundJob,
  ) {
    this.ks = config.keyspace;
    this.binding = new JobBinding(session, config.keyspace);
  }

  private exec(query: string, params: unknown[], options: QueryOptions = {}): Promise<ResultSet> {
    return retry(() => this.session.execute(query, params, { prepare: true, ...options }), {
      server: 'Cassandra',
      isRetriable: isRetriableCassandraError,
      deadlineMs: 120_000,
    });
  }

  /** Every row of a query, page by page; a page that times out is fetched again. */
  private async *rows(query: string, params: unknown[] = []): AsyncGenerator<Row> {
    let pageState: string | undefined;
    do {
      const r = await this.exec(query, params, { fetchSize: 5000, pageState });
      yield* r.rows;
      pageState = r.pageState ?? undefined;
    } while (pageState !== undefined);
  }

  /** Workers registered in `<keyspace>.workers` (those serving metrics; rows expire 30 s after a worker's last heartbeat). */
  async registeredWorkers(): Promise<RegisteredWorkerRow[]> {
    const r = await this.exec(`SELECT worker_id, host, pid, metrics_port FROM ${this.ks}.workers`, []);
    return r.rows.map((row) => ({
      workerId: row['worker_id'] as string,
      host: row['host'] as string,
      pid: (row['pid'] as number | null) ?? null,
      metricsPort: row['metrics_port'] as number,
    }));
  }

  async run(o: RuleChangeOptions): Promise<RuleChangeReport> {
    const step = o.onStep ?? (() => undefined);
    const stored = this.job.settings;
    const { [RULE_CHANGE_MARK]: unfinished, ...withoutMark } = stored;
    const current = parseSettings(withoutMark, ` in the job stored in keyspace ${this.ks}`);
    // Everything the job has stays as it is but the rule (the record size limit, settings of other versions).
    const settings: Settings = { ...withoutMark, ...storedSettings({ maxRecordBytes: current.maxRecordBytes, rule: o.to }) };
    parseSettings(settings); // the new rule is valid on its own
    if (unfinished !== undefined) step(`finishing an unfinished change of the rule (${String(unfinished)})`);

    if (!o.dryRun) {
      await this.binding.updateSettings(this.job.name, { ...stored, [RULE_CHANGE_MARK]: `started ${new Date().toISOString()}, to ${describeRule(o.to)}` });
    }
    // Checked after the mark: a worker starting from now on refuses; one that started before is listed.
    const workers = await this.registeredWorkers().catch((e: unknown) => {
      throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `cannot read ${this.ks}.workers (${(e as Error).message.split('\n')[0]}); run \`exactlyonce schema apply\``, { cause: e });
    });
    if (workers.length > 0 && !o.dryRun) {
      await this.binding.updateSettings(this.job.name, stored);
      const list = workers.slice(0, 5).map((w) => `${w.host}${w.pid === null ? '' : ` pid ${w.pid}`} (metrics port ${w.metricsPort})`).join(', ');
      throw new ExactlyOnceError(
        'EO_USAGE',
        `${workers.length} worker(s) of keyspace ${this.ks} are running: ${list}${workers.length > 5 ? ', …' : ''}. ` +
          'Stop them first (Ctrl-C or `kill -TERM <pid>`: each finishes its batches and leaves), then run this again; a worker killed with SIGKILL stays listed for up to 30 s',
      );
    }

    const to = o.to;
    const rule = ruleName(to);
    const counter = new WindowCounter(to);
    let events = 0;
    let counted = 0;
    // 2. The events, counted under the new rule, per window and Kafka partition.
    step(`reading ${this.ks}.events`);
    const perPartition = new Map<string, { source: string; end: number; partition: number; count: number; through: number }>();
    for await (const row of this.rows(`SELECT partition, offset, ts, source, health FROM ${this.ks}.events`)) {
      events++;
      const e = { source: row['source'] as string, ts: (row['ts'] as Date).getTime(), health: row['health'] as number };
      if (e.health !== to.health) continue;
      counted++;
      counter.add(e);
      const partition = row['partition'] as number;
      const offset = Number(fromLong(row['offset'] as Long));
      for (const end of windowEnds(e.ts, to.windows)) {
        const k = `${partition}\u0000${alertKey(e.source, end)}`;
        const c = perPartition.get(k);
        if (c === undefined) perPartition.set(k, { source: e.source, end, partition, count: 1, through: offset });
        else {
          c.count++;
          if (offset > c.through) c.through = offset;
        }
      }
    }
    const counts = await this.rewriteCounts(rule, [...perPartition.values()], o.dryRun, step);

    // 3. The alerts table.
    const expected = counter.alerts();
    const table = await this.rewriteTable(expected, o.dryRun, step);

    // 4. The alerts topic.
    const topic = await this.republish(expected, o.dryRun, step);

    // 5. The new settings (and the mark gone).
    if (!o.dryRun) {
      step('storing the new rule with the job');
      await this.binding.updateSettings(this.job.name, settings);
    }
    return { dryRun: o.dryRun, keyspace: this.ks, from: current.rule, to, events, counted, workers, counts, table, topic, settings };
  }

  /**
   * Makes `alert_window_counts` hold exactly the new rule's rows (see the file comment), and empties
   * the per-event index of earlier versions.
   */
  private async rewriteCounts(
    rule: string,
    expected: ReadonlyArray<{ source: string; end: number; partition: number; count: number; through: number }>,
    dryRun: boolean,
    step: (s: string) => void,
  ): Promise<RuleChangeReport['counts']> {
    const key = (source: string, end: number, r: string, partition: number) => `${r}\u0000${partition}\u0000${alertKey(source, end)}`;
    const want = new Map(expected.map((c) => [key(c.source, c.end, rule, c.partition), c]));
    const missing = new Set(want.keys());
    let stale = 0;
    for await (const row of this.rows(`SELECT source, window_end, rule, partition, event_count, through_offset FROM ${this.ks}.alert_window_counts`)) {
      const k = key(row['source'] as string, (row['window_end'] as Date).getTime(), row['rule'] as string, row['partition'] as number);
      const c = want.get(k);
      const through = row['through_offset'] as Long | null;
      if (c !== undefined && through !== null && c.count === row['event_count'] && c.through === through.toNumber()) missing.delete(k);
      else stale++;
    }
    let legacy = false;
    try {
      legacy = (await this.exec(`SELECT source FROM ${this.ks}.alert_window_events LIMIT 1`, [])).rowLength > 0;
    } catch {
      // no such table
    }
    const truncated = stale > 0;
    const write = truncated ? [...want.values()] : [...missing].map((k) => want.get(k)!);
    const out = { rule, rows: want.size, written: write.length, stale, truncated, legacyIndexEmptied: legacy };
    if (dryRun) return out;
    if (legacy) {
      step(`emptying ${this.ks}.alert_window_events (the per-event index of earlier versions; TRUNCATE)`);
      await this.exec(`TRUNCATE ${this.ks}.alert_window_events`, [], { prepare: false, readTimeout: 120_000 });
    }
    if (truncated) {
      step(`emptying ${this.ks}.alert_window_counts (TRUNCATE: ${stale} row(s) of other rules or other counts) and writing its ${want.size} row(s) again`);
      await this.exec(`TRUNCATE ${this.ks}.alert_window_counts`, [], { prepare: false, readTimeout: 120_000 });
    } else {
      step(`writing ${write.length} row(s) to ${this.ks}.alert_window_counts`);
    }
    const insert = countInsert(this.ks);
    await inParallel(write, CONCURRENCY, async (c) => {
      await this.exec(insert, [c.source, new Date(c.end), rule, c.partition, c.count, c.through, c.through]);
    });
    return out;
  }

  /** Makes the `alerts` table equal `expected` (see the file comment for the timestamps). */
  private async rewriteTable(expected: readonly Alert[], dryRun: boolean, step: (s: string) => void): Promise<RuleChangeReport['table']> {
    const rows = new Map<string, number>();
    for await (const row of this.rows(`SELECT source, ts, event_count FROM ${this.ks}.alerts`)) {
      rows.set(alertKey(row['source'] as string, (row['ts'] as Date).getTime()), row['event_count'] as number);
    }
    const t = { alerts: expected.length, unchanged: 0, added: 0, raised: 0, lowered: 0, deleted: 0, truncated: false };
    const write: Alert[] = [];
    const keep = new Set<string>();
    for (const a of expected) {
      const k = alertKey(a.source, a.ts);
      keep.add(k);
      const had = rows.get(k);
      if (had === a.eventCount) t.unchanged++;
      else if (had === undefined) t.added++;
      else if (had < a.eventCount) t.raised++;
      else t.lowered++;
      if (had !== a.eventCount) write.push(a);
    }
    for (const k of rows.keys()) if (!keep.has(k)) t.deleted++;
    t.truncated = t.lowered + t.deleted > 0;
    if (dryRun) return t;
    if (t.truncated) {
      step(`emptying ${this.ks}.alerts (TRUNCATE: ${t.lowered} count(s) to lower, ${t.deleted} alert(s) to delete) and writing its ${expected.length} alert(s) again`);
      // TRUNCATE waits for every replica; the server's own limit (truncate_request_timeout) is 60 s.
      await this.exec(`TRUNCATE ${this.ks}.alerts`, [], { prepare: false, readTimeout: 120_000 });
    } else {
      step(`writing ${write.length} alert(s) to ${this.ks}.alerts`);
    }
    const insert = alertInsert(this.ks);
    await inParallel(t.truncated ? expected : write, CONCURRENCY, async (a) => {
      await this.exec(insert, [a.source, new Date(a.ts), a.eventCount, toLong(alertWriteTimestamp(a))]);
    });
    return t;
  }

  /** Makes the latest message of each key of the alerts topic equal `expected`, tombstones included. */
  private async republish(expected: readonly Alert[], dryRun: boolean, step: (s: string) => void): Promise<RuleChangeReport['topic']> {
    const topic = this.job.outputTopics[0] ?? this.config.alertsTopic;
    step(`reading the alerts topic ${topic}`);
    const latest = new LatestPerKey();
    const admin = new KafkaAdmin(this.config);
    try {
      if ((await admin.partitionCount(topic)) === null) {
        throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `the job's alerts topic ${topic} does not exist at ${this.config.brokers.join(',')}; run \`exactlyonce topic create\``);
      }
      const reader = await LogReader.open(this.config);
      try {
        for (const w of await admin.watermarks(topic)) {
          for await (const { records } of reader.read(topic, w.partition, w.low, w.high)) {
            for (const r of records) {
              const m = decodeAlertMessage(r.key, r.value);
              if (m.ok) latest.add(r.partition, r.offset, r.timestampMs, m.key, m.alert);
            }
          }
        }
      } catch (e) {
        if (e instanceof IncompleteRead) {
          throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `topic ${topic}: ${e.message} for 60 s; nothing was published. Is Kafka healthy? Run this again`, { cause: e });
        }
        throw e;
      } finally {
        await reader.close();
      }
    } finally {
      await admin.close();
    }
    const now = new Map<string, Alert>();
    // A decoded message's key is alertTopicKey(source, ts) of its value (decodeAlertMessage checks it).
    for (const a of latest.alerts()) now.set(alertTopicKey(a.source, a.ts), a);
    const records: OutgoingRecord[] = [];
    const wanted = new Set<string>();
    for (const a of expected) {
      const key = alertTopicKey(a.source, a.ts);
      wanted.add(key);
      if (now.get(key)?.eventCount !== a.eventCount) records.push({ key, value: alertTopicValue(a) });
    }
    const published = records.length;
    const deleted: Array<{ key: string }> = [];
    for (const key of now.keys()) {
      if (wanted.has(key)) continue;
      records.push({ key, value: null });
      deleted.push({ key });
    }
    if (!dryRun && records.length > 0) {
      step(`publishing ${published} alert(s) and ${deleted.length} tombstone(s) to ${topic}`);
      const producer = new Producer(this.config);
      try {
        for (let i = 0; i < records.length; i += 500) {
          const chunk = records.slice(i, i + 500);
          await retry(() => producer.send(topic, chunk), {
            server: 'Kafka',
            isRetriable: (e) => e instanceof ExactlyOnceError && e.retriable,
            deadlineMs: 120_000,
          });
        }
      } finally {
        await producer.close();
      }
    }
    return { name: topic, published, tombstones: deleted.length, deleted };
  }
}
