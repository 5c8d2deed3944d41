/**
 * `exactlyonce status`: one screen for an operator — every job bound in the keyspace (the `job` table,
 * src/engine/job-binding.ts), its workers (the partitions' owners), lag per partition, stopped
 * partitions with their code and the command that gets them going, quarantine counts by reason, and the
 * last verify (`audit_latest`, src/verify/audit-runs.ts). Reads only; safe while everything runs.
 * The one gatherer of that screen: `exactlyonce status` (src/cli/status.ts) prints it, and the
 * dashboard (src/dashboard/collector.ts) shows it per job, both in the JSON form jobStatusJson makes.
 */
import { EVENT_JOB_NAME } from '../jobs/events/event-job.js';
import type { Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore, partitionReports, type PartitionReport } from '../engine/checkpoint-store.js';
import { engineTables } from '../engine/engine-tables.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { listJobs } from './job-target.js';

export interface StoppedPartition {
  partition: number;
  code: string;
  message: string;
  /** The command that gets it going (after fixing the cause the message names). */
  fix: string;
}

export interface LastVerify {
  at: Date | null;
  ok: boolean;
  summary: Record<string, unknown>;
}

export interface JobStatus {
  name: string;
  topic: string;
  /** Why the topic cannot be read, when it cannot (missing, or re-created under the job). */
  topicProblem: string | null;
  partitions: PartitionReport[];
  /** Sum of the partitions' lag (records left to read). */
  lag: bigint;
  workers: string[];
  stopped: StoppedPartition[];
  quarantine: Record<string, number>;
  /** True when a count stopped at StatusOptions.quarantineLimit: the counts are then lower bounds. */
  quarantineCapped: boolean;
  lastVerify: LastVerify | null;
}

export interface StatusOptions {
  /** The Kafka admin client to use, left open (the dashboard's); default: one of its own, closed after. */
  admin?: KafkaAdmin;
  /**
   * Quarantine rows counted per read at most (per partition of a job; the events job's whole table);
   * default: every row. The dashboard, which reads again every few seconds, bounds it.
   */
  quarantineLimit?: number;
}

/** A stopped partition's record, as JSON. */
export interface StopJson {
  code: string;
  message: string;
  epoch: number | null;
  at: string | null;
  by: string | null;
}

/** A partition's report, as JSON: offsets as strings (exact beyond 2^53). */
export interface PartitionStatusJson {
  partition: number;
  checkpoint: string | null;
  epoch: number | null;
  logStart: string | null;
  logEnd: string | null;
  lag: string | null;
  held: string | null;
  owner: string | null;
  stopped: StopJson | null;
}

/** A job's status as JSON: what `status --json` prints for each job and the dashboard sends for each. */
export interface JobStatusJson extends Omit<JobStatus, 'lag' | 'partitions' | 'lastVerify'> {
  lag: string;
  partitions: PartitionStatusJson[];
  lastVerify: { at: string | null; ok: boolean; summary: Record<string, unknown> } | null;
}

const str = (v: bigint | null) => (v === null ? null : String(v));

export function jobStatusJson(s: JobStatus): JobStatusJson {
  return {
    ...s,
    lag: String(s.lag),
    partitions: s.partitions.map((r) => ({
      partition: r.partition,
      checkpoint: str(r.checkpoint),
      epoch: r.epoch,
      logStart: str(r.logStart),
      logEnd: str(r.logEnd),
      lag: str(r.lag),
      held: str(r.held),
      owner: r.owner,
      stopped: r.stopped === null ? null : { ...r.stopped, at: r.stopped.at?.toISOString() ?? null },
    })),
    lastVerify: s.lastVerify === null ? null : { ...s.lastVerify, at: s.lastVerify.at?.toISOString() ?? null },
  };
}

/**
 * The command that gets a stopped partition going, for job `job` (`events`: no --job). Pure: the code
 * and where the checkpoint stands decide (docs/operations.md, "Error codes and stop codes").
 */
export function stopFix(job: string, r: Pick<PartitionReport, 'partition' | 'checkpoint' | 'logStart' | 'logEnd'>, code: string): string {
  const cmd = `exactlyonce checkpoints reset${job === EVENT_JOB_NAME ? '' : ` --job ${job}`}`;
  const here = r.checkpoint ?? r.logStart ?? 0n;
  switch (code) {
    case 'EO_TOPIC_RECREATED':
      return `${cmd} --all --to earliest --rebind`;
    case 'EO_CHECKPOINT_OUT_OF_RANGE':
    case 'EO_POSITION_OUT_OF_RANGE':
      // Below the log start: retention deleted unread records; accepting the loss means the log start.
      return r.logEnd !== null && here > r.logEnd ? `${cmd} --partition ${r.partition} --to latest` : `${cmd} --partition ${r.partition} --to earliest`;
    case 'EO_PARTITIONS_ADDED':
      return 'see docs/guarantees.md, "When the topic gains partitions"';
    case 'EO_OFFSET_GAP':
      return `restart the worker, or ${cmd} --partition ${r.partition} --to ${here}`;
    default:
      // A reset in place (same offset, next epoch) restarts the partition once the cause is fixed.
      return `fix the cause above, then ${cmd} --partition ${r.partition} --to ${here}`;
  }
}

/** The status of every job of the keyspace (EO_CASSANDRA_QUERY when the keyspace has no engine tables). */
export async function readStatus(config: ConnectionConfig, session: Client, options: StatusOptions = {}): Promise<JobStatus[]> {
  let jobs;
  try {
    jobs = await listJobs(session, config.keyspace);
  } catch (e) {
    const msg = e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e);
    throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `cannot read ${config.keyspace}.job, where the keyspace's jobs are stored (${msg}); run \`exactlyonce schema apply\``, { cause: e });
  }
  const admin = options.admin ?? new KafkaAdmin(config);
  try {
    const out: JobStatus[] = [];
    for (const job of jobs) out.push(await jobStatus(config, session, admin, job, options.quarantineLimit));
    return out;
  } finally {
    if (options.admin === undefined) await admin.close();
  }
}

async function jobStatus(config: ConnectionConfig, session: Client, admin: KafkaAdmin, job: { name: string; inputTopic: string; inputTopicId: string }, quarantineLimit: number | undefined): Promise<JobStatus> {
  const key = job.name === EVENT_JOB_NAME ? undefined : job.name;
  const store = new CheckpointStore(session, config.keyspace, job.inputTopic, key);
  const exists = (await admin.partitionCount(job.inputTopic)) !== null;
  const [marks, topicId] = exists ? await Promise.all([admin.watermarks(job.inputTopic), admin.topicId(job.inputTopic)]) : [[], null];
  const [stored, states] = await Promise.all([store.readStored(), store.readStates()]);
  const partitions = partitionReports(marks, stored, states);
  const quarantine = await quarantineCounts(session, config.keyspace, key, partitions.map((r) => r.partition), quarantineLimit);
  const topicProblem = !exists ? `topic ${job.inputTopic} does not exist` : topicId !== null && topicId !== job.inputTopicId ? `topic ${job.inputTopic} was deleted and re-created (ID ${job.inputTopicId} then, ${topicId} now)` : null;
  return {
    name: job.name,
    topic: job.inputTopic,
    topicProblem,
    partitions,
    lag: partitions.reduce((n, r) => n + (r.lag ?? 0n), 0n),
    workers: [...new Set(partitions.flatMap((r) => (r.owner === null ? [] : [r.owner])))].sort(),
    stopped: partitions.flatMap((r) => (r.stopped === null ? [] : [{ partition: r.partition, code: r.stopped.code, message: r.stopped.message, fix: stopFix(job.name, r, r.stopped.code) }])),
    quarantine: quarantine.counts,
    quarantineCapped: quarantine.capped,
    lastVerify: await lastVerify(session, config.keyspace, job.name, job.inputTopic),
  };
}

/**
 * Quarantined records by reason, read page by page (one small column each): a job's rows partition by
 * partition of its topic (its Cassandra partitions, (job, partition)); the events job's whole table.
 * With `limit`, each read stops after that many rows (`capped`: the counts are then lower bounds).
 */
async function quarantineCounts(session: Client, keyspace: string, key: string | undefined, partitions: readonly number[], limit: number | undefined): Promise<{ counts: Record<string, number>; capped: boolean }> {
  const t = engineTables(keyspace, key);
  const counts: Record<string, number> = {};
  let capped = false;
  const reads = key === undefined ? [{ where: '', params: [] as unknown[] }] : partitions.map((p) => ({ where: ` WHERE ${t.jobWhere}partition = ?`, params: [...t.jobParams, p] }));
  for (const { where, params } of reads) {
    let pageState: string | undefined;
    let n = 0;
    let full = false;
    do {
      const r = await session.execute(`SELECT reason FROM ${t.quarantine}${where}${limit === undefined ? '' : ` LIMIT ${limit + 1}`}`, params, { prepare: true, fetchSize: 5000, pageState });
      for (const row of r.rows) {
        if (limit !== undefined && n === limit) {
          full = capped = true;
          break;
        }
        n++;
        const reason = (row['reason'] as string | null) ?? 'unknown';
        counts[reason] = (counts[reason] ?? 0) + 1;
      }
      pageState = full ? undefined : (r.pageState ?? undefined);
    } while (pageState !== undefined);
  }
  return { counts, capped };
}

/** The latest recorded verify of the job on its topic (null: none, or a keyspace without audit_latest). */
async function lastVerify(session: Client, keyspace: string, job: string, topic: string): Promise<LastVerify | null> {
  try {
    const row = (await session.execute(`SELECT finished_at, ok, summary FROM ${keyspace}.audit_latest WHERE job = ? AND topic = ?`, [job, topic], { prepare: true })).first();
    if (row === null) return null;
    return { at: (row['finished_at'] as Date | null) ?? null, ok: row['ok'] === true, summary: JSON.parse((row['summary'] as string | null) ?? '{}') as Record<string, unknown> };
  } catch (e) {
    if (/unconfigured table|audit_latest/i.test((e as Error).message)) return null;
    throw e;
  }
}
