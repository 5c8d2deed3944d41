/**
 * `exactlyonce verify`: the auditor (src/verify). Proves, against the broker's log, that every
 * offset up to the stored checkpoints is in `events` or `quarantine` exactly once with the record's
 * values, and that the alerts equal their recomputation; runs on a live or a stopped pipeline. From
 * the second run on it checks only what came after the last recorded proof (`--full`: everything).
 * `--every`: again and again while the pipeline runs. Exit 0 only when everything holds;
 * EO_VERIFY_FAILED (exit 9) otherwise.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { AuditMetrics } from '../verify/audit-metrics.js';
import { auditContinuously } from '../verify/continuous.js';
import type { AuditReport } from '../verify/report.js';
import { verify, verifyJob, type VerifyRun } from '../verify/run.js';
import { metricsAccess, metricsBindHost, serveMetrics } from '../engine/metrics-server.js';
import { ExactlyOnceError } from '../errors.js';
import { isSinkConfig, loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger } from '../log.js';
import { durationOption, intOption } from '../config.js';
import { formatReport, formatRound, verifyFailed } from '../verify/report-text.js';
import { settingFlags, settingOption, unvalidatedSettings, withAlertRule } from './alert-flags.js';
import { action, connection, withConnection } from './common.js';
import { Progress } from './progress.js';

export function verifyCommand(): Command {
  // The events job's alert flags come after the flags every job's audit takes (they apply without --job only).
  return withConnection(
    withAlertRule(
      new Command('verify')
        .description('audit the pipeline against the topic: every offset up to the checkpoints stored exactly once, alerts exact (exit 0 only if all holds); from the last recorded proof on')
        .option('--job <module>', "audit this job's table instead (a job module with `audit`, or a sink config): log mode offset by offset, upsert mode key by key against each key's last record")
        .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
        .option('--json', 'print the full report as JSON on stdout (with --every: one line per round)')
        .option('--skip-alerts', 'check the events ledger only')
        .option('--full', 'check every offset from the log start again (default: only what came after the last recorded proof; with --every: the first round)')
        .option('--no-record', 'do not record the run in <keyspace>.audit_runs, nor its proof for the next run')
        .addOption(
          new Option('--every <duration>', 'keep auditing while the pipeline runs: a round every DURATION (30s, 5m), each recorded and continuing the last proof; until SIGTERM/SIGINT')
            .argParser(durationOption('--every', 1000, 7 * 86_400_000)),
        )
        .addOption(new Option('--metrics-port <port>', 'with --every: serve /metrics (last verified offset per partition, proof lag, violations), /healthz, /readyz on this port').argParser(intOption('--metrics-port', 1, 65535)))
        .addOption(new Option('--lanes <n>', 'partitions read at once, each with a Kafka reader of its own').default(4).argParser(intOption('--lanes', 1, 64)))
        .addOption(new Option('--memory-mb <n>', '--job in upsert mode: MiB the keyed merge holds before it spills sorted runs to a temporary folder').default(64).argParser(intOption('--memory-mb', 1, 65536)))
        .addOption(new Option('--list <n>', 'violations listed in the summary').default(20).argParser(intOption('--list', 0, 1000)))
        .addOption(settingOption('max-record-bytes', "without --job: the events workers' limit, larger records must be quarantined; left out: the job's stored value (a new job: the default)")),
    ),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'alertsTopic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const json = opts.json === true;
      const every = opts.every;
      if (opts.metricsPort !== undefined && every === undefined) throw new ExactlyOnceError('EO_USAGE', '--metrics-port: only with --every (a single run exports nothing; its report is the output)');
      if (every !== undefined && opts.record === false) throw new ExactlyOnceError('EO_USAGE', '--every with --no-record: each round continues the proof the last one recorded; without recording every round would check everything again');

      // One run, as `verify` does it: the events job, or the job given with --job.
      let runOnce: (full: boolean, onProgress?: (done: number, total: number) => void) => Promise<Run>;
      if (opts.job !== undefined) {
        const job = await loadJobModule(opts.job, { config, options: parseJobOptions(opts.jobOption), log: createLogger('verify') });
        const mode = job.audit?.mode === 'upsert' ? `upsert: table ${job.audit.table}, key by key against each key's last record` : `log: table ${job.audit?.table}, offset by offset`;
        runOnce = async (full, onProgress) => {
          const r = await verifyJob(config, job, { record: opts.record !== false, full, lanes: opts.lanes, memoryMb: opts.memoryMb, onProgress }).catch((e: unknown) => {
            throw missingTable(e, config.keyspace, opts.job!) ?? e;
          });
          return { ...r, header: `job ${job.name} (${mode})`, json: { job: job.name } };
        };
      } else {
        const flags = settingFlags(cmd);
        // Validated inside verify(), once merged with the job's (a flag alone may only make sense with them).
        const given = unvalidatedSettings(flags.values);
        runOnce = async (full, onProgress) => {
          const r = await verify(config, {
            rule: given.rule,
            checkAlerts: opts.skipAlerts !== true,
            maxRecordBytes: given.maxRecordBytes,
            explicit: flags.explicit,
            record: opts.record !== false,
            full,
            lanes: opts.lanes,
            onProgress,
          });
          const from = r.settings.from === 'job' ? `the job's, stored in keyspace ${config.keyspace}` : 'from the flags (no worker has stored the job yet)';
          return { report: r.report, recorded: r.recorded, header: `settings: max record bytes ${r.settings.maxRecordBytes}, alert rule as below — ${from}`, json: { settings: r.settings } };
        };
      }
      const warnUnrecorded = (recorded: VerifyRun['recorded']) => {
        if (recorded !== null && 'error' in recorded) process.stderr.write(`warning: the run was not recorded: ${recorded.error}\n`);
      };

      if (every !== undefined) return continuous(runOnce, { everyMs: every, full: opts.full === true, json, metricsPort: opts.metricsPort, warnUnrecorded });

      let bar: Progress | undefined;
      const run = await runOnce(opts.full === true, json ? undefined : (done, total) => (bar ??= new Progress('verify', total)).update(done));
      bar?.update(run.report.totals.records, true);
      bar?.done();
      if (json) process.stdout.write(JSON.stringify({ ...run.report, ...run.json, auditRun: run.recorded }) + '\n');
      else {
        const text = formatReport(run.report, opts.list);
        // A job's audit has no alerts to skip.
        process.stdout.write(`${run.header}\n${opts.job === undefined ? text : text.replace(/\nalerts: not checked \(--skip-alerts\)/, '')}\n`);
      }
      warnUnrecorded(run.recorded);
      if (!run.report.ok) throw verifyFailed(run.report);
      return 0;
    }),
  );
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

/** One audit run: its report, its audit_runs row, what the summary starts with and what --json adds. */
interface Run {
  report: AuditReport;
  recorded: VerifyRun['recorded'];
  header: string;
  json: object;
}

/** `verify --every`: rounds until SIGTERM/SIGINT (a second one exits at once); one line (or JSON) per round. */
async function continuous(
  runOnce: (full: boolean) => Promise<Run>,
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
