/**
 * What `checkpoints list` and `checkpoints reset` do, for any job (src/operate/job-target.ts): where each
 * partition of the job's topic stands in the job's own tables, and moving its checkpoints on purpose,
 * safely while workers — and zombies — run: a reset writes the next reset epoch, whose write timestamps
 * are above every one an old owner can still send (src/engine/checkpoint-store.ts), and the owner moves
 * to it within a few seconds (src/engine/reset-watcher.ts).
 */
import { clearForRebind, rebindClears } from '../jobs/events/rebind.js';
import { consistencies, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore, partitionReports, type LogBounds, type PartitionReport, type ResetPlan } from '../engine/checkpoint-store.js';
import { engineTables } from '../engine/engine-tables.js';
import { JobBinding, topicRecreated, type BoundJob } from '../engine/job-binding.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Producer } from '../kafka/producer.js';
import type { JobTarget } from './job-target.js';
import { isTime, planTargets, type Target } from './reset-target.js';

/** The topic's log bounds and ID (EO_TOPIC_MISMATCH when it does not exist); with a time, its offsets (read first: the log end only grows). */
export async function readTopic(config: ConnectionConfig, topic: string, atMs?: number): Promise<{ marks: LogBounds[]; topicId: string | null; byTime?: Map<number, bigint> }> {
  const admin = new KafkaAdmin(config);
  try {
    if ((await admin.partitionCount(topic)) === null) {
      throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${topic} does not exist at ${config.brokers.join(',')} (--topic, or the job's topic)`);
    }
    const byTime = atMs === undefined ? undefined : await admin.offsetsForTime(topic, atMs);
    const [marks, topicId] = await Promise.all([admin.watermarks(topic), admin.topicId(topic)]);
    return { marks, topicId, ...(byTime === undefined ? {} : { byTime }) };
  } finally {
    await admin.close();
  }
}

/** Runs a read of the engine's tables; a keyspace without them says which command adds them. */
async function reading<T>(config: ConnectionConfig, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    const msg = e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e);
    if (/unconfigured table|undefined column|does not exist|keyspace .* not/i.test(msg)) {
      throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `keyspace ${config.keyspace} lacks the engine's tables (${msg}); run \`exactlyonce schema apply\``, { cause: e });
    }
    throw e;
  }
}

/** The job's row, checked against the topic: a job's checkpoints of another topic mean nothing here. */
async function boundJob(config: ConnectionConfig, session: Client, target: JobTarget): Promise<BoundJob | null> {
  const bound = await reading(config, () => new JobBinding(session, config.keyspace).read(target.name));
  if (bound !== null && bound.inputTopic !== target.topic) {
    throw new ExactlyOnceError(
      'EO_TOPIC_MISMATCH',
      `job ${target.name} of keyspace ${config.keyspace} reads topic ${bound.inputTopic}, not ${target.topic}: use --topic ${bound.inputTopic}, or the keyspace of ${target.topic} (--keyspace)`,
    );
  }
  return bound;
}

export interface CheckpointListing {
  rows: PartitionReport[];
  /** Set when the topic was deleted and re-created under the job (a warning to print). */
  recreated: string | null;
}

export async function listCheckpoints(config: ConnectionConfig, session: Client, target: JobTarget): Promise<CheckpointListing> {
  const { marks, topicId } = await readTopic(config, target.topic);
  const store = new CheckpointStore(session, config.keyspace, target.topic, target.tablesKey);
  const [stored, states, bound] = await reading(config, () => Promise.all([store.readStored(), store.readStates(), boundJob(config, session, target)]));
  const recreated = bound !== null && topicId !== null && bound.inputTopicId !== topicId ? topicRecreated(target.topic, bound.inputTopicId, topicId).message : null;
  return { rows: partitionReports(marks, stored, states), recreated };
}

export interface ResetRequest {
  partition?: number;
  all: boolean;
  to: Target;
  rebind: boolean;
  dryRun: boolean;
}

/** Refuses combinations that make no sense, naming the flag (EO_USAGE). */
export function checkResetRequest(r: { partition?: number; all: boolean; to?: Target; rebind: boolean }): void {
  if (r.partition === undefined && !r.all) throw new ExactlyOnceError('EO_USAGE', 'checkpoints reset: give --partition P or --all');
  if (r.partition !== undefined && r.all) throw new ExactlyOnceError('EO_USAGE', '--partition and --all: give one of them, not both');
  if (r.to === undefined) throw new ExactlyOnceError('EO_USAGE', '--to: required: earliest, latest, an offset or a time');
  if (r.all && typeof r.to === 'bigint') throw new ExactlyOnceError('EO_USAGE', '--to: an offset is for one --partition (a time is resolved for each partition); with --all use earliest or latest');
  if (r.rebind && !r.all) throw new ExactlyOnceError('EO_USAGE', '--rebind: resets every partition, so it goes with --all');
}

export interface ResetOutcome {
  plans: ResetPlan[];
  /** What a rebind clears (empty when it is no rebind). */
  clears: string[];
  /** The new topic ID the job is (or would be) bound to. */
  reboundTo: string | null;
  /** Alerts tombstoned (the events job's rebind). */
  alerts: number;
}

/**
 * Plans and (unless a dry run) writes the resets. Checkpoints first, then the old outputs, then the
 * binding: interrupted anywhere, the workers keep the partitions stopped (the job still names the old
 * topic) and running the command again finishes it.
 */
export async function resetCheckpoints(config: ConnectionConfig, session: Client, target: JobTarget, r: ResetRequest): Promise<ResetOutcome> {
  const { marks, topicId, byTime } = await readTopic(config, target.topic, isTime(r.to) ? r.to.atMs : undefined);
  const partitions = r.all ? marks.map((m) => m.partition) : [r.partition!];
  const store = new CheckpointStore(session, config.keyspace, target.topic, target.tablesKey);
  const [stored, bound] = await reading(config, () => Promise.all([store.readStored(), boundJob(config, session, target)]));
  const plans = planTargets(target.topic, partitions, r.to, marks, stored, byTime);
  const recreated = bound !== null && topicId !== null && bound.inputTopicId !== topicId;
  if (recreated && !r.rebind) {
    // Resetting some partitions of a re-created topic would leave the job bound to the old one, so the
    // workers would keep every partition stopped.
    throw new ExactlyOnceError('EO_TOPIC_RECREATED', `${topicRecreated(target.topic, bound.inputTopicId, topicId).message} (a reset without --rebind is refused)`);
  }
  const rebinding = r.rebind && recreated;
  const clears = rebinding ? rebindTargets(config, target, bound) : [];
  const outcome: ResetOutcome = { plans, clears, reboundTo: rebinding ? topicId : null, alerts: 0 };
  if (r.dryRun) return outcome;
  for (const plan of plans) await store.reset(plan.partition, plan.to.next, plan.from?.epoch ?? 0);
  if (rebinding) {
    outcome.alerts = await clearOldOutputs(config, session, target, bound, marks.length);
    await new JobBinding(session, config.keyspace).rebind(bound.name, topicId, marks.length);
  }
  return outcome;
}

/** What a rebind clears, in words: the events job's outputs (src/jobs/events/rebind.ts), else the job's quarantine and the tables it declares. */
function rebindTargets(config: ConnectionConfig, target: JobTarget, bound: BoundJob): string[] {
  if (target.tablesKey === undefined) return rebindClears(config.keyspace, bound);
  if (target.job === null) throw new ExactlyOnceError('EO_USAGE', `--rebind: give job ${target.name}'s module or sink config as --job (not its name): the rebind clears the tables it declares`);
  return [`${engineTables(config.keyspace, target.name).quarantine} (job ${target.name}'s rows)`, ...jobTables(target).map((t) => `${config.keyspace}.${t}`)];
}

const jobTables = (target: JobTarget) => [...new Set([...(target.job?.tables ?? []), ...(target.job?.audit === undefined ? [] : [target.job.audit.table])])];

/** Clears the old topic's outputs; returns the alerts tombstoned (the events job's only). */
async function clearOldOutputs(config: ConnectionConfig, session: Client, target: JobTarget, bound: BoundJob, partitions: number): Promise<number> {
  if (target.tablesKey === undefined) {
    const producer = new Producer(config);
    try {
      return await clearForRebind(session, config.keyspace, bound, (topic, records) => producer.send(topic, records));
    } finally {
      await producer.close();
    }
  }
  // The job's quarantine rows are keyed (job, partition): every partition the old or the new topic had.
  const q = engineTables(config.keyspace, target.name).quarantine;
  const count = Math.max(partitions, bound.inputPartitions ?? 0);
  for (let p = 0; p < count; p++) await session.execute(`DELETE FROM ${q} WHERE job = ? AND partition = ?`, [target.name, p], { prepare: true, consistency: consistencies.localQuorum });
  for (const t of jobTables(target)) await session.execute(`TRUNCATE ${config.keyspace}.${t}`);
  return 0;
}
