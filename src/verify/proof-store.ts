/**
 * What `verify` proved, recorded for the next run (migration 040): the proof of each partition, the
 * auditor's own alert counts per window, the latest alerts-topic message per window it has read and
 * how far it read that topic, and the latest run of each job for the dashboard. See
 * src/verify/proof-plan.ts for when a proof is trusted. Every write here is idempotent (same key,
 * same values) and the proof and counts are monotonic (USING TIMESTAMP, see the migration), so two
 * audits running at once cannot leave a proof that claims more than either checked.
 */
import { fromLong, toLong, types, type Client, type Long } from '../cassandra/session.js';
import { alertKey } from '../jobs/events/alert-rule.js';
import { execute, inParallel } from './reads.js';
import { proofTimestamp, type PartitionStart, type StoredProof } from './proof-plan.js';

/** Statements in flight at once for the point reads and writes of windows and alert messages. */
const CONCURRENCY = 32;

/** A window: source and window end (epoch ms). */
export interface WindowId {
  readonly source: string;
  readonly end: number;
}

/** One partition's stored count in one window. */
export interface WindowRow {
  readonly partition: number;
  readonly lineage: string;
  readonly count: number;
  readonly through: bigint;
  readonly prevCount: number;
  readonly prevThrough: bigint;
}

/** The latest alerts-topic message of a window as last read (alert null: a tombstone). */
export interface AlertLatest {
  readonly partition: number;
  readonly offset: bigint;
  readonly count: number | null;
}


export class ProofStore {
  private readonly ks: string;

  constructor(
    private readonly session: Client,
    keyspace: string,
    /** The job whose proofs these are ('events' for the events job). */
    private readonly job: string,
    private readonly topic: string,
  ) {
    this.ks = keyspace;
  }

  /** Whether the keyspace has the proof tables (migration 040); an older one is audited in full and says so. */
  static async available(session: Client, keyspace: string): Promise<boolean> {
    const r = await execute(session, 'SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?', [keyspace, 'audit_proof']);
    return r.rowLength > 0;
  }

  async readProofs(): Promise<Map<number, StoredProof>> {
    const r = await execute(
      this.session,
      `SELECT partition, topic_id, epoch, config, lineage, lineage_seq, proved_offset, counted_offset, run_id, proved_at FROM ${this.ks}.audit_proof WHERE job = ? AND topic = ?`,
      [this.job, this.topic],
    );
    const out = new Map<number, StoredProof>();
    for (const row of r.rows) {
      if (row['proved_offset'] === null || row['lineage'] === null) continue;
      out.set(row['partition'] as number, {
        partition: row['partition'] as number,
        topicId: (row['topic_id'] as string | null) ?? null,
        epoch: (row['epoch'] as number | null) ?? 0,
        config: (row['config'] as string | null) ?? '',
        lineage: row['lineage'] as string,
        lineageSeq: (row['lineage_seq'] as number | null) ?? 0,
        proved: fromLong(row['proved_offset'] as Long),
        counted: row['counted_offset'] === null ? 0n : fromLong(row['counted_offset'] as Long),
        runId: row['run_id'] === null ? null : String(row['run_id']),
        provedAt: (row['proved_at'] as Date | null) ?? null,
      });
    }
    return out;
  }

  /** Records one partition's proof (idempotent; of two writes, the one that counted further wins). */
  async writeProof(start: PartitionStart, o: { topicId: string | null; epoch: number; config: string; proved: bigint; counted: bigint; runId: string }): Promise<void> {
    await execute(
      this.session,
      `UPDATE ${this.ks}.audit_proof USING TIMESTAMP ? SET topic_id = ?, epoch = ?, config = ?, lineage = ?, lineage_seq = ?, proved_offset = ?, counted_offset = ?, run_id = ?, proved_at = ? WHERE job = ? AND topic = ? AND partition = ?`,
      [toLong(proofTimestamp(start.lineageSeq, o.counted)), o.topicId, o.epoch, o.config, start.lineage, start.lineageSeq, toLong(o.proved), toLong(o.counted), types.TimeUuid.fromString(o.runId), new Date(), this.job, this.topic, start.partition],
    );
  }

  /** The stored count rows of each window (every partition and lineage; the caller picks). */
  async readWindows(windows: Iterable<WindowId>): Promise<Map<string, WindowRow[]>> {
    const out = new Map<string, WindowRow[]>();
    await inParallel(windows, CONCURRENCY, async (w) => {
      const r = await execute(
        this.session,
        `SELECT partition, lineage, event_count, through_offset, prev_count, prev_through FROM ${this.ks}.audit_windows WHERE job = ? AND topic = ? AND source = ? AND window_end = ?`,
        [this.job, this.topic, w.source, new Date(w.end)],
      );
      out.set(
        alertKey(w.source, w.end),
        r.rows.map((row) => ({
          partition: row['partition'] as number,
          lineage: row['lineage'] as string,
          count: (row['event_count'] as number | null) ?? 0,
          through: row['through_offset'] === null ? 0n : fromLong(row['through_offset'] as Long),
          prevCount: (row['prev_count'] as number | null) ?? 0,
          prevThrough: row['prev_through'] === null ? 0n : fromLong(row['prev_through'] as Long),
        })),
      );
    });
    return out;
  }

  /**
   * Stores counts: `count` counted events of the partition in the window below `through`, in the
   * partition's lineage, with the count it was computed from (`prev*`). `USING TIMESTAMP through`: the
   * row that includes more of the log wins whatever order writes land in.
   */
  async writeWindows(rows: Iterable<WindowId & { partition: number; lineage: string; count: number; through: bigint; prevCount: number; prevThrough: bigint }>): Promise<void> {
    await inParallel(rows, CONCURRENCY, async (w) => {
      await execute(
        this.session,
        `INSERT INTO ${this.ks}.audit_windows (job, topic, source, window_end, partition, lineage, event_count, through_offset, prev_count, prev_through) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) USING TIMESTAMP ?`,
        [this.job, this.topic, w.source, new Date(w.end), w.partition, w.lineage, w.count, toLong(w.through), w.prevCount, toLong(w.prevThrough), toLong(w.through)],
      );
    });
  }

  /** How far the alerts topic (of this ID) was read, per partition. */
  async readAlertPositions(alertsTopicId: string): Promise<Map<number, bigint>> {
    const r = await execute(this.session, `SELECT partition, next_offset FROM ${this.ks}.audit_alert_positions WHERE job = ? AND topic = ? AND alerts_topic_id = ?`, [this.job, this.topic, alertsTopicId]);
    return new Map(r.rows.map((row) => [row['partition'] as number, fromLong(row['next_offset'] as Long)]));
  }

  /** Monotonic: `USING TIMESTAMP next_offset`. */
  async writeAlertPositions(alertsTopicId: string, positions: ReadonlyMap<number, bigint>): Promise<void> {
    await inParallel(positions, CONCURRENCY, async ([partition, next]) => {
      await execute(
        this.session,
        `INSERT INTO ${this.ks}.audit_alert_positions (job, topic, alerts_topic_id, partition, next_offset) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?`,
        [this.job, this.topic, alertsTopicId, partition, toLong(next), toLong(next)],
      );
    });
  }

  async readAlertLatest(alertsTopicId: string, windows: Iterable<WindowId>): Promise<Map<string, AlertLatest>> {
    const out = new Map<string, AlertLatest>();
    await inParallel(windows, CONCURRENCY, async (w) => {
      const r = await execute(
        this.session,
        `SELECT partition, offset, alert_count FROM ${this.ks}.audit_alert_latest WHERE job = ? AND topic = ? AND alerts_topic_id = ? AND source = ? AND window_end = ?`,
        [this.job, this.topic, alertsTopicId, w.source, new Date(w.end)],
      );
      const row = r.first();
      if (row !== null) out.set(alertKey(w.source, w.end), { partition: row['partition'] as number, offset: fromLong(row['offset'] as Long), count: (row['alert_count'] as number | null) ?? null });
    });
    return out;
  }

  async writeAlertLatest(alertsTopicId: string, latest: Iterable<WindowId & AlertLatest>): Promise<void> {
    await inParallel(latest, CONCURRENCY, async (m) => {
      await execute(
        this.session,
        `INSERT INTO ${this.ks}.audit_alert_latest (job, topic, alerts_topic_id, source, window_end, partition, offset, alert_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        [this.job, this.topic, alertsTopicId, m.source, new Date(m.end), m.partition, toLong(m.offset), m.count],
      );
    });
  }

  /** The dashboard's view of the latest run (one row per job and topic). */
  async recordLatest(id: string, ok: boolean, summary: string): Promise<void> {
    await execute(this.session, `INSERT INTO ${this.ks}.audit_latest (job, topic, id, finished_at, ok, summary) VALUES (?, ?, ?, toTimestamp(now()), ?, ?)`, [
      this.job,
      this.topic,
      types.TimeUuid.fromString(id),
      ok,
      summary,
    ]);
  }
}
