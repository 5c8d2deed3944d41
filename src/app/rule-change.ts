/**
 * `exactlyonce alerts rule`: changes the job's alert rule (window, slide, threshold, health) and makes
 * everything derived from it what the new rule gives, from the stored `events`:
 *
 * 1. Marks the job row (RULE_CHANGE_MARK in its settings) before writing anything, then checks that
 *    no worker is registered in `<keyspace>.workers`. From the mark on, a worker that starts refuses
 *    (its settings lack the mark: EO_JOB_CONFIG_MISMATCH), and so does `verify`; an interrupted run
 *    leaves the mark, so nothing runs on half-rewritten alerts until the command is run again.
 * 2. Reads every `events` row and counts the new rule's windows; writes the new rule's rows of the
 *    `alert_window_events` index (idempotent upserts: rows keyed by partition and offset), so that a
 *    worker's later recount of a window counts every stored event. The index is keyed by rule, so
 *    the old rule's rows never mix with the new; they are deleted (space), and so are rows under the
 *    new rule's name that the events do not give (left from an earlier use of that rule).
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
import { fromLong, isRetriableCassandraError, toLong, type Client, type Long, type QueryOptions, type ResultSet, type Row } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { JobBinding, type BoundJob, type Settings } from '../engine/job-binding.js';
import { retry } from '../engine/retry.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { IncompleteRead, LogReader } from '../kafka/log-reader.js';
import { Producer, type OutgoingRecord } from '../kafka/producer.js';
import { alertKey, describeRule, WindowCounter, type Alert, type AlertRule } from './alert-rule.js';
import { alertInsert, alertTopicKey, alertTopicValue, alertWriteTimestamp, indexInsert, ruleName } from './alerts.js';
import { decodeAlertMessage, LatestPerKey } from './audit/alert-diff.js';
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
  readonly index: { rule: string; rows: number; deletedPartitions: number; deletedRows: number };
  readonly table: { alerts: number; unchanged: number; added: number; raised: number; lowered: number; deleted: number; truncated: boolean };
  readonly topic: { name: string; published: number; tombstones: number; deleted: Array<{ key: string }> };
  /** The settings stored at the end (a dry run: that would be stored). */
  readonly settings: Settings;
}

/** Cassandra rows per unlogged single-partition batch of index rows. */
const ROWS_PER_BATCH = 100;
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
    // 2. The events, counted under the new rule; their index rows written as they are read.
    step(`reading ${this.ks}.events${o.dryRun ? '' : ` and writing the index rows of rule ${rule}`}`);
    const pending = new Map<string, { source: string; end: number; rows: Array<[number, bigint]> }>();
    let pendingRows = 0;
    let indexRows = 0;
    const flush = async () => {
      const insert = indexInsert(this.ks);
      const batches: Array<{ source: string; end: number; rows: Array<[number, bigint]> }> = [];
      for (const w of pending.values()) {
        for (let i = 0; i < w.rows.length; i += ROWS_PER_BATCH) batches.push({ ...w, rows: w.rows.slice(i, i + ROWS_PER_BATCH) });
      }
      pending.clear();
      pendingRows = 0;
      await inParallel(batches, CONCURRENCY, (b) =>
        retry(
          () =>
            this.session.batch(
              b.rows.map(([p, offset]) => ({ query: insert, params: [b.source, new Date(b.end), rule, p, toLong(offset)] })),
              { prepare: true, logged: false },
            ),
          { server: 'Cassandra', isRetriable: isRetriableCassandraError, deadlineMs: 120_000 },
        ).then(() => undefined),
      );
    };
    for await (const row of this.rows(`SELECT partition, offset, ts, source, health FROM ${this.ks}.events`)) {
      events++;
      const e = { source: row['source'] as string, ts: (row['ts'] as Date).getTime(), health: row['health'] as number };
      if (e.health !== to.health) continue;
      counted++;
      counter.add(e);
      if (o.dryRun) continue;
      const offset = fromLong(row['offset'] as Long);
      for (const end of windowEnds(e.ts, to.windows)) {
        const k = alertKey(e.source, end);
        let w = pending.get(k);
        if (w === undefined) pending.set(k, (w = { source: e.source, end, rows: [] }));
        w.rows.push([row['partition'] as number, offset]);
        pendingRows++;
        indexRows++;
      }
      if (pendingRows >= 5000) await flush();
    }
    if (!o.dryRun) await flush();
    const index = o.dryRun ? { rule, rows: 0, deletedPartitions: 0, deletedRows: 0 } : { rule, rows: indexRows, ...(await this.cleanIndex(rule, to, counter, step)) };

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
    return { dryRun: o.dryRun, keyspace: this.ks, from: current.rule, to, events, counted, workers, index, table, topic, settings };
  }

  /**
   * Deletes the index rows the new rule's events do not give: every partition of another rule, and
   * rows under the new rule's name that no stored event gives (left from an earlier use of that rule
   * on other records). Deletes carry the wall-clock timestamp, as the index's inserts do.
   */
  private async cleanIndex(rule: string, to: AlertRule, counter: WindowCounter, step: (s: string) => void): Promise<{ deletedPartitions: number; deletedRows: number }> {
    step(`removing the index rows of other rules from ${this.ks}.alert_window_events`);
    const others = new Map<string, { source: string; end: Date; rule: string }>();
    const stored = new Map<string, { source: string; end: number; n: number }>();
    for await (const row of this.rows(`SELECT source, window_end, rule FROM ${this.ks}.alert_window_events`)) {
      const source = row['source'] as string;
      const end = row['window_end'] as Date;
      const r = row['rule'] as string;
      if (r !== rule) {
        others.set(`${r}\u0000${alertKey(source, end.getTime())}`, { source, end, rule: r });
        continue;
      }
      const k = alertKey(source, end.getTime());
      const s = stored.get(k);
      if (s === undefined) stored.set(k, { source, end: end.getTime(), n: 1 });
      else s.n++;
    }
    let deletedPartitions = 0;
    let deletedRows = 0;
    const deletePartition = `DELETE FROM ${this.ks}.alert_window_events WHERE source = ? AND window_end = ? AND rule = ?`;
    await inParallel(others.values(), CONCURRENCY, async (p) => {
      await this.exec(deletePartition, [p.source, p.end, p.rule]);
      deletedPartitions++;
    });
    // Every row the events give was written above, so a window holding more rows than its count has
    // extra ones; which, only the events can say.
    const extra = [...stored.values()].filter((s) => s.n > counter.count(s.source, s.end));
    await inParallel(extra, CONCURRENCY, async (s) => {
      if (counter.count(s.source, s.end) === 0) {
        await this.exec(deletePartition, [s.source, new Date(s.end), rule]);
        deletedPartitions++;
        return;
      }
      for await (const row of this.rows(`SELECT partition, offset FROM ${this.ks}.alert_window_events WHERE source = ? AND window_end = ? AND rule = ?`, [s.source, new Date(s.end), rule])) {
        const e = (await this.exec(`SELECT ts, source, health FROM ${this.ks}.events WHERE partition = ? AND offset = ?`, [row['partition'], row['offset']])).first();
        const gives = e !== null && e['source'] === s.source && e['health'] === to.health && windowEnds((e['ts'] as Date).getTime(), to.windows).includes(s.end);
        if (gives) continue;
        await this.exec(`DELETE FROM ${this.ks}.alert_window_events WHERE source = ? AND window_end = ? AND rule = ? AND partition = ? AND offset = ?`, [s.source, new Date(s.end), rule, row['partition'], row['offset']]);
        deletedRows++;
      }
    });
    return { deletedPartitions, deletedRows };
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
