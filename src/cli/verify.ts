/**
 * `exactlyonce verify`: the auditor (src/verify). Proves, against the broker's log, that every
 * offset up to the stored checkpoints is in `events` or `quarantine` exactly once with the record's
 * values, and that the alerts equal their recomputation; runs on a live or a stopped pipeline. From
 * the second run on it checks only what came after the last recorded proof (`--full`: everything).
 * `--every`: again and again while the pipeline runs. Exit 0 only when everything holds;
 * EO_VERIFY_FAILED (exit 9) otherwise. The flags and the output are here; what runs is src/verify/command.ts.
 */
import { Command, Option, type CommandUnknownOpts } from '@commander-js/extra-typings';
import type { VerifyRun } from '../verify/run.js';
import { ExactlyOnceError } from '../errors.js';
import { durationOption, intOption } from './flags.js';
import { auditEvery, auditRunner, type AuditTarget } from '../verify/command.js';
import { formatReport, verifyFailed } from '../verify/report-text.js';
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

      const runOnce = await auditRunner(config, opts.job !== undefined ? { job: opts.job, jobOption: opts.jobOption } : eventsTarget(cmd, opts.skipAlerts !== true), {
        record: opts.record !== false,
        lanes: opts.lanes,
        memoryMb: opts.memoryMb,
      });
      const warnUnrecorded = (recorded: VerifyRun['recorded']) => {
        if (recorded !== null && 'error' in recorded) process.stderr.write(`warning: the run was not recorded: ${recorded.error}\n`);
      };

      if (every !== undefined) return auditEvery(runOnce, { everyMs: every, full: opts.full === true, json, metricsPort: opts.metricsPort, warnUnrecorded });

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

/** The events job as the target, with the settings its flags give. */
function eventsTarget(cmd: CommandUnknownOpts, checkAlerts: boolean): AuditTarget {
  const flags = settingFlags(cmd);
  // Validated inside verify(), once merged with the job's (a flag alone may only make sense with them).
  const given = unvalidatedSettings(flags.values);
  return { events: { checkAlerts, rule: given.rule, maxRecordBytes: given.maxRecordBytes, explicit: flags.explicit } };
}
