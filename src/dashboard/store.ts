/**
 * What the dashboard reads from Cassandra: checkpoints, quarantine counts, the latest alerts, the last
 * `verify` run and the registered workers; and every job's status, as `exactlyonce status` gathers it
 * (src/operate/status.ts, which holds those statements). Reads only. Tables written by
 * other parts of the system (audit_runs, workers) may not exist yet in an older keyspace: their
 * absence is an answer ("no verify run yet"), not an error.
 */
import { fromLong, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import { readStatus, type JobStatus } from '../operate/status.js';
import { readVerifySummary, type VerifySummary } from './verify-summary.js';
import { listWorkers, type RegisteredWorker } from './worker-registry.js';

/** Quarantine rows counted per partition at most (a dashboard must not scan an unbounded table), */
export const QUARANTINE_COUNT_LIMIT = 100_000;

export interface AlertRow {
  source: string;
  /** Window end, epoch ms. */
  ts: number;
  eventCount: number;
}

export interface QuarantineCounts {
  byPartition: Record<string, number>;
  byReason: Record<string, number>;
  total: number;
  /** True when a partition had more rows than QUARANTINE_COUNT_LIMIT (counts are then lower bounds). */
  capped: boolean;
}

export interface VerifyRun {
  id: string;
  /** Epoch ms: the row's finished_at, else its id's time. */
  finishedAt: number | null;
  ok: boolean | null;
  /** What it checked and found, read from the stored JSON; null when the summary is not that JSON. */
  summary: VerifySummary | null;
  /** The stored summary text when it could not be read (shown as it is). */
  unreadable: string | null;
}

/** An audit_runs (or audit_latest) row as the page shows it. */
function runOf(row: Record<string, unknown>): VerifyRun {
  const id = row['id'] as { toString(): string; getDate?: () => Date } | null;
  const finished = (row['finished_at'] as Date | null)?.getTime() ?? id?.getDate?.().getTime() ?? null;
  const text = row['summary'] as string | null;
  let summary: VerifySummary | null = null;
  try {
    summary = text === null ? null : readVerifySummary(JSON.parse(text));
  } catch {
    // not JSON: shown as text
  }
  return { id: String(id), finishedAt: finished, ok: (row['ok'] as boolean | null) ?? null, summary, unreadable: summary === null ? text : null };
}

export class DashboardStore {
  private tables: { names: Set<string>; at: number } | undefined;

  constructor(
    private readonly session: Client,
    private readonly keyspace: string,
    private readonly topic: string,
  ) {}

  /** Whether a table exists in the keyspace (the list is re-read at most every 10 s). */
  async hasTable(name: string): Promise<boolean> {
    if (this.tables === undefined || Date.now() - this.tables.at > 10_000) {
      const r = await this.session.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?', [this.keyspace], { prepare: true });
      this.tables = { names: new Set(r.rows.map((row) => row['table_name'] as string)), at: Date.now() };
    }
    return this.tables.names.has(name);
  }

  /** Next offset to read per partition, as checkpointed. */
  async checkpoints(): Promise<Map<number, bigint>> {
    const r = await this.session.execute(
      `SELECT partition, next_offset FROM ${this.keyspace}.checkpoints WHERE topic = ?`,
      [this.topic],
      { prepare: true },
    );
    return new Map(r.rows.map((row) => [row['partition'] as number, fromLong(row['next_offset'])]));
  }

  /** Quarantined records per partition and per reason, counted from the table (all time). */
  async quarantineCounts(partitions: readonly number[]): Promise<QuarantineCounts> {
    const out: QuarantineCounts = { byPartition: {}, byReason: {}, total: 0, capped: false };
    for (const p of partitions) {
      let n = 0;
      // Paged: each page is a slice of one Cassandra partition.
      const rows = this.session.stream(
        `SELECT reason FROM ${this.keyspace}.quarantine WHERE partition = ? LIMIT ${QUARANTINE_COUNT_LIMIT + 1}`,
        [p],
        { prepare: true, fetchSize: 5000 },
      ) as unknown as AsyncIterable<Record<string, unknown>>;
      for await (const row of rows) {
        if (n === QUARANTINE_COUNT_LIMIT) {
          out.capped = true;
          break;
        }
        n++;
        const reason = row['reason'] as string;
        out.byReason[reason] = (out.byReason[reason] ?? 0) + 1;
      }
      out.byPartition[String(p)] = n;
      out.total += n;
    }
    return out;
  }

  /** The most recent alerts (by window end) over all sources, and the number of alert rows. */
  async alerts(limit = 10): Promise<{ latest: AlertRow[]; rows: number; sources: number }> {
    const sources = (await this.session.execute(`SELECT DISTINCT source FROM ${this.keyspace}.alerts`, [], { prepare: true })).rows.map(
      (r) => r['source'] as string,
    );
    const latest: AlertRow[] = [];
    let rows = 0;
    for (const source of sources) {
      const [recent, count] = await Promise.all([
        this.session.execute(`SELECT source, ts, event_count FROM ${this.keyspace}.alerts WHERE source = ? ORDER BY ts DESC LIMIT ?`, [source, limit], {
          prepare: true,
        }),
        this.session.execute(`SELECT COUNT(*) AS n FROM ${this.keyspace}.alerts WHERE source = ?`, [source], { prepare: true }),
      ]);
      for (const r of recent.rows) latest.push({ source: r['source'] as string, ts: (r['ts'] as Date).getTime(), eventCount: r['event_count'] as number });
      rows += Number(count.first()['n']);
    }
    latest.sort((a, b) => b.ts - a.ts || a.source.localeCompare(b.source));
    return { latest: latest.slice(0, limit), rows, sources: sources.length };
  }

  /**
   * How far `verify` has proved each partition of the events job (the next offset its proof does not
   * cover); empty before the first recorded run or without the proof table (migration 040).
   */
  async proofs(): Promise<Map<number, bigint>> {
    if (!(await this.hasTable('audit_proof'))) return new Map();
    const r = await this.session.execute(`SELECT partition, proved_offset FROM ${this.keyspace}.audit_proof WHERE job = ? AND topic = ?`, ['events', this.topic], { prepare: true });
    return new Map(r.rows.filter((row) => row['proved_offset'] !== null).map((row) => [row['partition'] as number, fromLong(row['proved_offset'])]));
  }

  /** The latest `verify` run, null when there is none (or no audit_runs table yet). */
  async lastVerify(): Promise<VerifyRun | null> {
    // The latest run of the events job on this topic, one row (migration 040).
    if (await this.hasTable('audit_latest')) {
      const row = (await this.session.execute(`SELECT id, finished_at, ok, summary FROM ${this.keyspace}.audit_latest WHERE job = ? AND topic = ?`, ['events', this.topic], { prepare: true })).first();
      if (row !== null) return runOf(row);
    }
    if (!(await this.hasTable('audit_runs'))) return null;
    // A keyspace from before migration 040: the newest row of audit_runs (one per run, keyed by id).
    const r = await this.session.execute(`SELECT id, finished_at, ok, summary FROM ${this.keyspace}.audit_runs LIMIT 10000`, [], { prepare: true });
    let best: VerifyRun | null = null;
    let bestKey = -Infinity;
    for (const row of r.rows) {
      const id = row['id'] as { toString(): string; getDate?: () => Date } | null;
      const finished = (row['finished_at'] as Date | null)?.getTime() ?? id?.getDate?.().getTime() ?? null;
      const key = finished ?? 0;
      if (key < bestKey) continue;
      bestKey = key;
      best = runOf(row);
    }
    return best;
  }

  /**
   * Every job of the keyspace, what `exactlyonce status` shows of each (its workers, lag per partition,
   * stopped partitions with their code and the command that gets them going, quarantine counts by
   * reason, the last verify): the status module's own read, through the dashboard's admin client, its
   * quarantine counts bounded as ours are (QUARANTINE_COUNT_LIMIT per read).
   */
  async jobs(config: ConnectionConfig, admin: KafkaAdmin): Promise<JobStatus[]> {
    return readStatus({ ...config, keyspace: this.keyspace }, this.session, { admin, quarantineLimit: QUARANTINE_COUNT_LIMIT });
  }

  /** Workers that announced themselves (empty when the keyspace has no workers table yet). */
  async workers(): Promise<RegisteredWorker[]> {
    if (!(await this.hasTable('workers'))) return [];
    return listWorkers(this.session, this.keyspace, this.topic);
  }
}
