/**
 * `exactlyonce verify`: the auditor (src/app/audit). Proves, against the broker's log, that every
 * offset up to the stored checkpoints is in `events` or `quarantine` exactly once with the record's
 * values, and that the alerts equal their recomputation; runs on a live or a stopped pipeline.
 * Exit 0 only when everything holds; EO_VERIFY_FAILED (exit 9) otherwise.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { verify, verifyJob } from '../app/verify.js';
import { loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger } from '../log.js';
import { intOption } from '../config.js';
import { formatReport, verifyFailed } from '../format/audit-report.js';
import { settingFlags, settingOption, unvalidatedSettings, withAlertRule } from './alert-flags.js';
import { action, connection, withConnection } from './common.js';
import { Progress } from './progress.js';

export function verifyCommand(): Command {
  return withConnection(
    withAlertRule(new Command('verify'))
      .description('audit the pipeline against the topic: every offset up to the checkpoints stored exactly once, alerts exact (exit 0 only if all holds)')
      .addOption(settingOption('max-record-bytes', "the workers' limit: larger records must be quarantined; left out: the job's stored value (a new job: the default)"))
      .option('--job <module>', "audit this job's table instead (a job module with `audit`, or a sink config): log mode offset by offset, upsert mode key by key against each key's last record")
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .option('--json', 'print the full report as JSON on stdout')
      .option('--skip-alerts', 'check the events ledger only')
      .option('--full', 'check every offset from the log start again (default: only what came after the last recorded proof)')
      .option('--no-record', 'do not record the run in <keyspace>.audit_runs, nor its proof for the next run')
      .addOption(new Option('--lanes <n>', 'partitions read at once, each with a Kafka reader of its own').default(4).argParser(intOption('--lanes', 1, 64)))
      .addOption(new Option('--memory-mb <n>', "--job in upsert mode: memory the keyed merge holds before it spills sorted runs to disk (MiB)").default(64).argParser(intOption('--memory-mb', 1, 65536)))
      .addOption(new Option('--list <n>', 'violations listed in the summary').default(20).argParser(intOption('--list', 0, 1000))),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'alertsTopic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const json = opts.json === true;
      if (opts.job !== undefined) {
        const job = await loadJobModule(opts.job, { config, options: parseJobOptions(opts.jobOption), log: createLogger('verify') });
        let bar: Progress | undefined;
        const { report, recorded } = await verifyJob(config, job, {
          record: opts.record !== false,
          full: opts.full === true,
          lanes: opts.lanes,
          memoryMb: opts.memoryMb,
          onProgress: json ? undefined : (done, total) => (bar ??= new Progress('verify', total)).update(done),
        });
        bar?.update(report.totals.records, true);
        bar?.done();
        if (json) process.stdout.write(JSON.stringify({ ...report, job: job.name, auditRun: recorded }) + '\n');
        else {
          const mode = job.audit?.mode === 'upsert' ? `upsert: table ${job.audit.table}, key by key against each key's last record` : `log: table ${job.audit?.table}, offset by offset`;
          process.stdout.write(`job ${job.name} (${mode})\n`);
          process.stdout.write(formatReport(report, opts.list).replace(/\nalerts: not checked \(--skip-alerts\)/, '') + '\n');
        }
        if (recorded !== null && 'error' in recorded) process.stderr.write(`warning: the run was not recorded: ${recorded.error}\n`);
        if (!report.ok) throw verifyFailed(report);
        return 0;
      }
      const flags = settingFlags(cmd);
      // Validated inside verify(), once merged with the job's (a flag alone may only make sense with them).
      const given = unvalidatedSettings(flags.values);
      let progress: Progress | undefined;
      const { report, recorded, settings } = await verify(config, {
        rule: given.rule,
        checkAlerts: opts.skipAlerts !== true,
        maxRecordBytes: given.maxRecordBytes,
        explicit: flags.explicit,
        record: opts.record !== false,
        full: opts.full === true,
        lanes: opts.lanes,
        onProgress: json
          ? undefined
          : (done, total) => {
              progress ??= new Progress('verify', total);
              progress.update(done);
            },
      });
      progress?.update(report.totals.records, true);
      progress?.done();
      if (json) process.stdout.write(JSON.stringify({ ...report, settings, auditRun: recorded }) + '\n');
      else {
        const from = settings.from === 'job' ? `the job's, stored in keyspace ${config.keyspace}` : 'from the flags (no worker has stored the job yet)';
        process.stdout.write(`settings: max record bytes ${settings.maxRecordBytes}, alert rule as below — ${from}\n`);
        process.stdout.write(formatReport(report, opts.list) + '\n');
      }
      if (recorded !== null && 'error' in recorded) process.stderr.write(`warning: the run was not recorded: ${recorded.error}\n`);
      if (!report.ok) throw verifyFailed(report);
      return 0;
    }),
  );
}
