/**
 * `exactlyonce verify`: the auditor (src/app/audit). Proves, against the broker's log, that every
 * offset up to the stored checkpoints is in `events` or `quarantine` exactly once with the record's
 * values, and that the alerts equal their recomputation; runs on a live or a stopped pipeline.
 * Exit 0 only when everything holds; EO_VERIFY_FAILED (exit 9) otherwise.
 */
import { Command, Option } from 'commander';
import type { AlertRule } from '../app/alert-rule.js';
import { recordAuditRun } from '../app/audit/audit-runs.js';
import { Auditor } from '../app/audit/auditor.js';
import type { AuditReport } from '../app/audit/report.js';
import { checkNoRuleChange, EVENT_JOB_NAME, parseSettings, readJob, resolveSettings, storedSettings, type EventJobSettings } from '../app/event-job.js';
import { connect } from '../cassandra/session.js';
import { intOption, type ConnectionConfig } from '../config.js';
import { checkSame } from '../engine/job-binding.js';
import { ExactlyOnceError } from '../errors.js';
import { settingFlags, settingOption, unvalidatedSettings, withAlertRule } from './alert-flags.js';
import { formatTable } from '../format/table.js';
import { action, connection, withConnection } from './common.js';
import { Progress } from './progress.js';

export interface VerifyRun {
  report: AuditReport;
  /** The settings the audit used, and whether they are the job's stored ones (else: the flags; no worker ran yet). */
  settings: EventJobSettings & { from: 'job' | 'flags' };
  /** The audit_runs row, or why it could not be written. */
  recorded: { id: string } | { error: string } | null;
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
  o: { rule: AlertRule; checkAlerts: boolean; maxRecordBytes: number; explicit?: ReadonlySet<string>; record: boolean; progress: boolean },
): Promise<VerifyRun> {
  const session = await connect(config);
  let progress: Progress | undefined;
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
      onProgress: o.progress
        ? (done, total) => {
            progress ??= new Progress('verify', total);
            progress.update(done);
          }
        : undefined,
    }).run();
    progress?.update(report.totals.records, true);
    progress?.done();
    let recorded: VerifyRun['recorded'] = null;
    if (o.record) {
      recorded = await recordAuditRun(session, config.keyspace, report).then(
        (id) => ({ id }),
        (e: unknown) => ({ error: `${(e as Error).message.split('\n')[0]} (run \`exactlyonce schema apply\` to create ${config.keyspace}.audit_runs)` }),
      );
    }
    return { report, recorded, settings: { ...settings, from: job === null ? 'flags' : 'job' } };
  } finally {
    await session.shutdown();
  }
}

const n = (x: number | string) => (typeof x === 'number' ? x.toLocaleString('en-US') : BigInt(x).toLocaleString('en-US'));

/** The human summary: one line per partition, the alerts, the explained gaps, the first violations. */
export function formatReport(r: AuditReport, listed = 20): string {
  const out: string[] = [];
  out.push(`verify: topic ${r.topic} against keyspace ${r.keyspace}, from the log start up to the stored checkpoints`);
  const row = (p: { partition: number | string; logStart: string; checkpoint: string | null; logEnd: string; lag: string; records: number; stored: number; quarantined: number; missing: number; extra: number; mismatched: number; gapOffsets: number }) => [
    p.partition, p.logStart, p.checkpoint ?? '-', p.logEnd, n(p.lag), n(p.records), n(p.stored), n(p.quarantined), n(p.missing), n(p.extra), n(p.mismatched), n(p.gapOffsets),
  ];
  const rows = r.partitions.map((p) => row({ ...p, gapOffsets: p.gaps.offsets }));
  for (const u of r.unknownPartitions) rows.push([`${u.partition}?`, '-', u.checkpoint ?? '-', '-', '-', '0', '0', '0', '0', n(u.events + u.quarantine), '0', '0']);
  const t = r.totals;
  rows.push(['total', '', '', '', n(t.lag), n(t.records), n(t.stored), n(t.quarantined), n(t.missing), n(t.extra), n(t.mismatched), n(t.gapOffsets)]);
  out.push(formatTable(['partition', 'log start', 'checkpoint', 'log end', 'lag', 'records', 'stored', 'quarantined', 'missing', 'extra', 'mismatched', 'gaps'], rows));
  for (const u of r.unknownPartitions) out.push(`partition ${u.partition}?: not a partition of the topic, yet has ${u.events} events rows, ${u.quarantine} quarantine rows${u.checkpoint === null ? '' : `, checkpoint ${u.checkpoint}`}`);
  for (const p of r.partitions) {
    if (p.gaps.offsets > 0) {
      out.push(
        `partition ${p.partition}: ${n(p.gaps.offsets)} offset(s) in ${p.gaps.ranges} gap(s) the broker does not return (transaction markers, aborted transactions, compaction) — not a loss; e.g. ${p.gaps.examples.join(', ')}`,
      );
    }
    if (BigInt(p.logStart) > 0n) {
      out.push(`partition ${p.partition}: offsets 0..${BigInt(p.logStart) - 1n} were deleted by retention; ${n(p.belowLogStart)} row(s) stored for them are kept and not checked`);
    }
    if (p.aheadOfCheckpoint > 0) out.push(`partition ${p.partition}: ${n(p.aheadOfCheckpoint)} row(s) beyond the checkpoint (batches in flight; checked once checkpointed)`);
  }
  const a = r.alerts;
  if (a === null) {
    out.push('alerts: not checked (--skip-alerts)');
  } else {
    const side = (s: typeof a.table) =>
      s.exists ? `found ${n(s.found)}${s.messages === undefined ? '' : ` (latest of ${n(s.messages)} messages)`}, wrong ${n(s.missing + s.extra + s.count + s.malformed)} (missing ${s.missing}, extra ${s.extra}, count ${s.count}${s.malformed > 0 ? `, malformed ${s.malformed}` : ''})` : 'topic does not exist';
    out.push(
      `alerts (window ${a.rule.windowMs} ms, slide ${a.rule.slideMs} ms, threshold ${a.rule.threshold}, health ${a.rule.health}): expected ${n(a.expected)}`,
      `  table ${a.table.name}: ${side(a.table)}`,
      `  topic ${a.topic.name}: ${side(a.topic)}`,
    );
    if (!a.settled) {
      out.push(
        `  not settled: the pipeline has lag or batches in flight, so alerts may still change; ${n(a.unsettled)} difference(s) not counted as violations (run verify again once drained)`,
      );
    }
  }
  if (r.violationTotal > 0) {
    const kinds = Object.entries(r.violationCounts).filter(([, c]) => c > 0).map(([k, c]) => `${k} ${n(c)}`).join(', ');
    out.push(`VIOLATIONS: ${n(r.violationTotal)} (${kinds})`);
    for (const v of r.violations.slice(0, listed)) out.push(`  ${v.message}`);
    if (r.violationTotal > listed) out.push(`  … and ${n(r.violationTotal - listed)} more (--json lists the first ${r.violations.length})`);
  } else {
    out.push(
      `OK: every offset up to the checkpoints is stored exactly once with the record's values${a === null ? '' : a.settled ? '; the alerts equal their recomputation' : ''}`,
    );
  }
  out.push(`checked ${n(r.totals.records)} records in ${(r.durationMs / 1000).toFixed(1)} s (${n(r.recordsPerSecond)} records/s, peak RSS ${r.peakRssMb} MiB)`);
  return out.join('\n');
}

export function verifyFailed(r: AuditReport, extra = ''): ExactlyOnceError {
  const kinds = Object.entries(r.violationCounts).filter(([, c]) => c > 0).map(([k, c]) => `${k} ${c}`).join(', ');
  return new ExactlyOnceError('EO_VERIFY_FAILED', `${r.violationTotal} violation(s) of exactly-once (${kinds}); first: ${r.violations[0]?.message ?? '?'}${extra}`);
}

export function verifyCommand(): Command {
  return withConnection(
    withAlertRule(new Command('verify'))
      .description('audit the pipeline against the topic: every offset up to the checkpoints stored exactly once, alerts exact (exit 0 only if all holds)')
      .addOption(settingOption('max-record-bytes', "the workers' limit: larger records must be quarantined; left out: the job's stored value (a new job: the default)"))
      .option('--json', 'print the full report as JSON on stdout')
      .option('--skip-alerts', 'check the events ledger only')
      .option('--no-record', 'do not record the run in <keyspace>.audit_runs')
      .addOption(new Option('--list <n>', 'violations listed in the summary').default(20).argParser(intOption('--list', 0, 1000))),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'alertsTopic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts: Record<string, unknown>, cmd: Command) => {
      const config = connection(opts);
      const json = opts['json'] === true;
      const flags = settingFlags(cmd);
      // Validated inside verify(), once merged with the job's (a flag alone may only make sense with them).
      const given = unvalidatedSettings(flags.values);
      const { report, recorded, settings } = await verify(config, {
        rule: given.rule,
        checkAlerts: opts['skipAlerts'] !== true,
        maxRecordBytes: given.maxRecordBytes,
        explicit: flags.explicit,
        record: opts['record'] !== false,
        progress: !json,
      });
      if (json) process.stdout.write(JSON.stringify({ ...report, settings, auditRun: recorded }) + '\n');
      else {
        const from = settings.from === 'job' ? `the job's, stored in keyspace ${config.keyspace}` : 'from the flags (no worker has stored the job yet)';
        process.stdout.write(`settings: max record bytes ${settings.maxRecordBytes}, alert rule as below — ${from}\n`);
        process.stdout.write(formatReport(report, opts['list'] as number) + '\n');
      }
      if (recorded !== null && 'error' in recorded) process.stderr.write(`warning: the run was not recorded: ${recorded.error}\n`);
      if (!report.ok) throw verifyFailed(report);
      return 0;
    }),
  );
}
