/**
 * Which job an operator command addresses (`--job`): left out (or `events`), the events job, which keeps
 * the engine's first tables; a job module or a sink config (the file `run --job` and `sink --config`
 * take), loaded as they load it; or the name of a job bound in the keyspace (its row of the `job`
 * table, src/engine/job-binding.ts), for the commands that need only its tables and its topic.
 */
import { existsSync } from 'node:fs';
import { EVENT_JOB_NAME } from '../jobs/events/event-job.js';
import { connect, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { JobBinding, type BoundJob } from '../engine/job-binding.js';
import type { Job } from '../engine/job.js';
import { ExactlyOnceError } from '../errors.js';
import { loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger } from '../log.js';

export interface JobTarget {
  /** The job's name (the key of its rows); `events` for the events job. */
  readonly name: string;
  /** Its input topic: the job's own (a sink's `topic:`), the bound one for a name, else `--topic`. */
  readonly topic: string;
  /** The key of its engine tables (src/engine/engine-tables.ts): undefined for the first tables (the events job's). */
  readonly tablesKey: string | undefined;
  /** The loaded job; null for the events job and for a job given by name. */
  readonly job: Job<unknown> | null;
  /** What `--job` said, for the commands printed back to the operator (`--job <name>`). */
  readonly flag: string;
}

/** The events job, at the connection's --topic. */
export function eventsTarget(config: ConnectionConfig): JobTarget {
  return { name: EVENT_JOB_NAME, topic: config.topic, tablesKey: undefined, job: null, flag: '' };
}

/** True when `spec` names a file (a module or a sink config) rather than a job. */
export function isJobFile(spec: string): boolean {
  return existsSync(spec) || /\.(ya?ml|json|[cm]?[jt]sx?)$/i.test(spec) || spec.includes('/');
}

/** The job a module or sink config makes (EO_CONFIG_INVALID naming --job when it cannot be loaded). */
export async function loadTarget(config: ConnectionConfig, spec: string, options: Record<string, string> = {}): Promise<JobTarget> {
  const job = await loadJobModule(spec, { config, options, log: createLogger('operate') });
  const legacy = job.legacyTables === true;
  return { name: job.name, topic: job.topic ?? config.topic, tablesKey: legacy ? undefined : job.name, job, flag: `--job ${spec}` };
}

/**
 * Resolves `--job`: undefined or `events` is the events job; a file is loaded; any other word is a job
 * bound in the keyspace, found by name (EO_CONFIG_INVALID listing the jobs there when none is).
 */
export async function resolveTarget(config: ConnectionConfig, session: Client, spec: string | undefined, options: Record<string, string> = {}): Promise<JobTarget> {
  if (spec === undefined || spec === EVENT_JOB_NAME) return eventsTarget(config);
  if (isJobFile(spec)) return loadTarget(config, spec, options);
  const bound = await new JobBinding(session, config.keyspace).read(spec);
  if (bound === null) {
    const names = (await listJobs(session, config.keyspace)).map((j) => j.name);
    throw new ExactlyOnceError(
      'EO_CONFIG_INVALID',
      `--job: no file ${spec}, and no job named ${spec} in keyspace ${config.keyspace} (${names.length === 0 ? 'no job has run there yet' : `its jobs: ${names.join(', ')}`}); give a job module, a sink config or a job's name`,
    );
  }
  return { name: bound.name, topic: bound.inputTopic, tablesKey: bound.name, job: null, flag: `--job ${bound.name}` };
}

/** Opens a session in the keyspace, resolves `--job` (with its `--job-option`s), runs `fn`, closes. */
export async function withJob<T>(config: ConnectionConfig, opts: { job?: string; jobOption?: string[] }, fn: (session: Client, target: JobTarget) => Promise<T>): Promise<T> {
  const session = await connect(config, { keyspace: config.keyspace });
  try {
    return await fn(session, await resolveTarget(config, session, opts.job, parseJobOptions(opts.jobOption)));
  } finally {
    await session.shutdown();
  }
}

/** Every job bound in the keyspace (the `job` table), by name. */
export async function listJobs(session: Client, keyspace: string): Promise<Array<Pick<BoundJob, 'name' | 'inputTopic' | 'inputTopicId'>>> {
  const r = await session.execute(`SELECT name, input_topic, input_topic_id FROM ${keyspace}.job`, [], { fetchSize: 10_000 });
  return r.rows
    .map((row) => ({ name: row['name'] as string, inputTopic: row['input_topic'] as string, inputTopicId: row['input_topic_id'] as string }))
    .filter((j) => typeof j.inputTopic === 'string')
    .sort((a, b) => a.name.localeCompare(b.name));
}
