/**
 * What `exactlyonce verify` runs once its flags are checked (src/verify/run.ts does the audit itself):
 * one audit of the events job or of the job `--job` gives, with the line its summary starts with and
 * what its JSON adds; and, with `--every`, rounds of it until SIGTERM/SIGINT, exported on a metrics
 * port when one is given.
 */
import type { AlertRule } from '../jobs/events/alert-rule.js';
import type { ConnectionConfig } from '../config.js';
import { metricsAccess, metricsBindHost, serveMetrics } from '../engine/metrics-server.js';
import { ExactlyOnceError } from '../errors.js';
import { isSinkConfig, loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger } from '../log.js';
import { AuditMetrics } from './audit-metrics.js';
import { auditContinuously } from './continuous.js';
import type { AuditReport } from './report.js';
import { formatRound } from './report-text.js';
import { verify, verifyJob, type VerifyRun } from './run.js';

/** One audit run: its report, its audit_runs row, what the summary starts with and what --json adds. */
export interface Run {
  report: AuditReport;
  recorded: VerifyRun['recorded'];
  header: string;
  json: object;
}

export type RunOnce = (full: boolean, onProgress?: (done: number, total: number) => void) => Promise<Run>;

/** What is audited: the job `--job` gives (a job module or a sink config), or the events job with the settings its flags give. */
export type AuditTarget =
  | { job: string; jobOption: string[] | undefined }
  | {
      job?: undefined;
      /** Its alerts checked too, and the settings the flags give (validated once merged with the job's). */
      events: { checkAlerts: boolean; rule: AlertRule; maxRecordBytes: number; explicit: ReadonlySet<string> };
    };

export interface AuditFlags {
  record: boolean;
  lanes: number;
  memoryMb: number;
}

/** One run, as `verify` does it: the events job, or the job given with --job (loaded here, once). */
export async function auditRunner(config: ConnectionConfig, target: AuditTarget, o: AuditFlags): Promise<RunOnce> {
  if (target.job !== undefined) {
    const spec = target.job;
    const job = await loadJobModule(spec, { config, options: parseJobOptions(target.jobOption), log: createLogger('verify') });
    const a = job.audit;
    const mode =
      a?.mode === 'upsert'
        ? `upsert: table ${a.table}, key by key against each key's last record`
        : a?.mode === 'aggregate'
          ? `aggregate: table ${a.table} and ${a.aggregate?.partialsTable}, every partial and row from the log start`
          : `log: table ${a?.table}, offset by offset`;
    return async (full, onProgress) => {
      const r = await verifyJob(config, job, { record: o.record, full, lanes: o.lanes, memoryMb: o.memoryMb, onProgress }).catch((e: unknown) => {
        throw missingTable(e, config.keyspace, spec) ?? e;
      });
      return { ...r, header: `job ${job.name} (${mode})`, json: { job: job.name } };
    };
  }
  const { checkAlerts, rule, maxRecordBytes, explicit } = target.events;
  return async (full, onProgress) => {
    const r = await verify(config, { rule, checkAlerts, maxRecordBytes, explicit, record: o.record, full, lanes: o.lanes, onProgress });
    const from = r.settings.from === 'job' ? `the job's, stored in keyspace ${config.keyspace}` : 'from the flags (no worker has stored the job yet)';
    return { report: r.report, recorded: r.recorded, header: `settings: max record bytes ${r.settings.maxRecordBytes}, alert rule as below — ${from}`, json: { settings: r.settings } };
  };
}

/**
 * Cassandra's answer for a table that is not there (the job's own, or the engine's before `schema
 * apply`), as one line naming the command that creates it; undefined for any other error.
 */
function missingTable(e: unknown, keyspace: string, job: string): ExactlyOnceError | undefined {
  const message = e instanceof Error && e.name === 'ResponseError' ? e.message : '';
  const table = /^table (\S+) does not exist|^unconfigured table (\S+)/.exec(message);
  if (table === null) return undefined;
  const name = (table[1] ?? table[2])!;
  return new ExactlyOnceError(
    isSinkConfig(job) ? 'EO_SINK_TABLE_INVALID' : 'EO_CASSANDRA_QUERY',
    `table ${name.includes('.') ? name : `${keyspace}.${name}`} does not exist: nothing to verify; run \`exactlyonce schema apply --job ${job} --keyspace ${keyspace}\` (and the job's workers) first`,
    { cause: e },
  );
}

/** `verify --every`: rounds until SIGTERM/SIGINT (a second one exits at once); one line (or JSON) per round. */
export async function auditEvery(
  runOnce: RunOnce,
  o: { everyMs: number; full: boolean; json: boolean; metricsPort: number | undefined; warnUnrecorded: (r: VerifyRun['recorded']) => void },
): Promise<number> {
  const log = createLogger('verify');
  const metrics = new AuditMetrics();
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    if (stop.signal.aborted) process.exit(130);
    log.info(`${sig}: stopping after the round in progress`);
    stop.abort();
  };
  process.on('SIGTERM', onSignal).on('SIGINT', onSignal);
  const host = metricsBindHost();
  const server = o.metricsPort === undefined ? undefined : await serveMetrics(metrics, o.metricsPort, () => true, host, metricsAccess(host));
  log.info({ everyMs: o.everyMs, metricsPort: o.metricsPort ?? null }, `continuous audit: a round every ${o.everyMs / 1000} s${o.metricsPort === undefined ? '' : `, metrics on ${host}:${o.metricsPort}`}`);
  try {
    let last: Run | undefined;
    await auditContinuously(
      async (n) => {
        last = await runOnce(o.full && n === 1);
        o.warnUnrecorded(last.recorded);
        return last.report;
      },
      {
        everyMs: o.everyMs,
        log,
        metrics,
        signal: stop.signal,
        onReport: (r: AuditReport, n) => process.stdout.write(o.json ? JSON.stringify({ round: n, ...r, ...last?.json, auditRun: last?.recorded }) + '\n' : `${formatRound(r, n)}\n`),
      },
    );
    return 0;
  } finally {
    process.off('SIGTERM', onSignal).off('SIGINT', onSignal);
    await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  }
}
