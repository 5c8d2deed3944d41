/**
 * One audit of the pipeline (src/verify) under the job's settings, recorded in audit_runs: what
 * `exactlyonce verify` and `exactlyonce chaos` run.
 */
import type { AlertRule } from '../jobs/events/alert-rule.js';
import { recordAuditRun } from './audit-runs.js';
import { Auditor } from './auditor.js';
import { configFingerprint } from './proof-plan.js';
import type { AuditReport } from './report.js';
import { checkNoRuleChange, EVENT_JOB_NAME, parseSettings, readJob, resolveSettings, storedSettings, type EventJobSettings } from '../jobs/events/event-job.js';
import { connect } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { checkSame, JobBinding } from '../engine/job-binding.js';
import { SinkJob } from '../jobs/sink/sink-job.js';
import type { Job } from '../engine/job.js';
import { JobAuditor } from './job-auditor.js';

export interface VerifyRun {
  report: AuditReport;
  /** The settings the audit used, and whether they are the job's stored ones (else: the flags; no worker ran yet). */
  settings: EventJobSettings & { from: 'job' | 'flags' };
  /** The audit_runs row, or why it could not be written. */
  recorded: { id: string } | { error: string } | null;
}

/** How an audit runs, whichever job it audits. */
export interface AuditRunOptions {
  /** Record the run in audit_runs and its proof for the next run (`--no-record`: false). */
  record: boolean;
  /** Check everything from the log start again, not from the last recorded proof (`--full`). */
  full?: boolean;
  /** Partitions read at once (`--lanes`). */
  lanes?: number;
  /** Records checked so far, of `total` (for a progress bar). */
  onProgress?: (done: number, total: number) => void;
}

/**
 * Runs one audit and records it in audit_runs (unless `record` is false). Used by `verify` and `chaos`.
 * The audit uses the job's settings stored in the keyspace (the workers' own): `rule` and
 * `maxRecordBytes` only where the job is not set up yet, or where named in `explicit` (default: all of
 * them, as `chaos` passes what its workers were started with) — then they must equal the job's, and
 * so must the topic and alerts topic: EO_JOB_CONFIG_MISMATCH / EO_TOPIC_MISMATCH otherwise.
 */
export async function verify(
  config: ConnectionConfig,
  o: AuditRunOptions & {
    rule: AlertRule;
    checkAlerts: boolean;
    maxRecordBytes: number;
    explicit?: ReadonlySet<string>;
  },
): Promise<VerifyRun> {
  const session = await connect(config);
  try {
    const job = await readJob(session, config.keyspace);
    checkNoRuleChange(job, config.keyspace, 'verify');
    const flags = storedSettings({ maxRecordBytes: o.maxRecordBytes, rule: o.rule });
    const settings = parseSettings(
      resolveSettings(job?.settings ?? null, flags, o.explicit ?? new Set(Object.keys(flags))),
      job === null ? '' : `; the job stored in keyspace ${config.keyspace} or this flag`,
    );
    if (job !== null) {
      checkSame(
        job,
        // With --skip-alerts the alerts topic is not read, so any --alerts-topic will do.
        { name: EVENT_JOB_NAME, inputTopic: config.topic, outputTopics: o.checkAlerts ? [config.alertsTopic] : job.outputTopics, settings: storedSettings(settings) },
        config.keyspace,
        'verify',
      );
    }
    const report = await new Auditor(config, session, {
      rule: settings.rule,
      checkAlerts: o.checkAlerts,
      maxRecordBytes: settings.maxRecordBytes,
      layout: settings.layout,
      lanes: o.lanes,
      onProgress: o.onProgress,
      proofs: { full: o.full === true, record: o.record, config: configFingerprint(storedSettings(settings)) },
    }).run();
    let recorded: VerifyRun['recorded'] = null;
    if (o.record) {
      recorded = await recordAuditRun(session, config.keyspace, report, EVENT_JOB_NAME).then(
        (id) => ({ id }),
        (e: unknown) => ({ error: `${(e as Error).message.split('\n')[0]} (run \`exactlyonce schema apply\` to create ${config.keyspace}.audit_runs)` }),
      );
    }
    return { report, recorded, settings: { ...settings, from: job === null ? 'flags' : 'job' } };
  } finally {
    await session.shutdown();
  }
}

/**
 * Audits any job that describes its output (`Job.audit`): `verify --job` and `chaos --job`. The job must
 * be the one stored in the keyspace (same topic, same settings: EO_TOPIC_MISMATCH /
 * EO_JOB_CONFIG_MISMATCH otherwise), so the audit judges with the workers' own rules.
 */
export async function verifyJob(
  config: ConnectionConfig,
  job: Job<unknown>,
  o: AuditRunOptions & { memoryMb?: number },
): Promise<Omit<VerifyRun, 'settings'>> {
  const topic = job.topic ?? config.topic;
  const cfg: ConnectionConfig = Object.freeze({ ...config, topic });
  const session = await connect(cfg);
  try {
    const bound = await new JobBinding(session, cfg.keyspace).read(job.name);
    // A sink whose columns are derived judges with the columns its workers derived at start (stored).
    if (bound !== null && job instanceof SinkJob) job = job.withStoredColumns(bound.settings) as Job<unknown>;
    if (bound !== null) checkSame(bound, { name: job.name, inputTopic: topic, outputTopics: job.outputTopics ?? [], settings: job.settings ?? {} }, cfg.keyspace, 'verify');
    const report = await new JobAuditor(cfg, session, job, {
      onProgress: o.onProgress,
      lanes: o.lanes,
      memoryMb: o.memoryMb,
      proofs: { full: o.full === true, record: o.record, config: configFingerprint({ ...(job.settings ?? {}), topic }) },
    }).run();
    let recorded: VerifyRun['recorded'] = null;
    if (o.record) {
      recorded = await recordAuditRun(session, cfg.keyspace, report, job.name).then(
        (id) => ({ id }),
        (e: unknown) => ({ error: (e as Error).message.split('\n')[0]! }),
      );
    }
    return { report, recorded };
  } finally {
    await session.shutdown();
  }
}
