/**
 * `exactlyonce alerts rule`: the one way to change the job's alert rule (src/jobs/events/rule-change.ts). A
 * worker started with other rule flags refuses to run (EO_JOB_CONFIG_MISMATCH); this command
 * recomputes the alerts from the stored events under the new rule, rewrites the table and the alerts
 * topic (tombstones for the alerts that no longer hold), and stores the rule with the job.
 */
import { Command } from '@commander-js/extra-typings';
import { describeRule } from '../jobs/events/alert-rule.js';
import { EVENT_JOB_NAME, parseSettings, readJob, resolveSettings, RULE_CHANGE_MARK } from '../jobs/events/event-job.js';
import { RuleChange, type RuleChangeReport } from '../jobs/events/rule-change.js';
import { connect } from '../cassandra/session.js';
import { checkSame } from '../engine/job-binding.js';
import { ExactlyOnceError } from '../errors.js';
import { settingFlags, withAlertRule } from './alert-flags.js';
import { action, connection, withConnection } from './common.js';

const n = (x: number) => x.toLocaleString('en-US');

export function formatRuleChange(r: RuleChangeReport, topic: string): string {
  const would = r.dryRun ? 'would be ' : '';
  const t = r.table;
  const out = [
    `${r.dryRun ? 'DRY RUN (nothing written): ' : ''}alert rule of keyspace ${r.keyspace}`,
    `  from: ${describeRule(r.from)}`,
    `  to:   ${describeRule(r.to)}`,
    `events: ${n(r.events)} read, ${n(r.counted)} at health ${r.to.health}`,
  ];
  const c = r.counts;
  out.push(
    `counts ${r.keyspace}.alert_window_counts: ${n(c.rows)} row(s) of rule ${c.rule} (per window and partition); ${n(c.written)} ${would}written` +
      (c.truncated ? ` (the table ${r.dryRun ? 'would be' : 'was'} emptied with TRUNCATE first: ${n(c.stale)} row(s) of other rules or other counts, which no write can lower over the workers' monotonic timestamps)` : '') +
      (c.legacyIndexEmptied ? `; the per-event index ${r.keyspace}.alert_window_events of earlier versions ${r.dryRun ? 'would be' : 'was'} emptied` : ''),
  );
  out.push(
    `alerts table: ${n(t.alerts)} alert(s) under the new rule — ${n(t.unchanged)} unchanged, ${n(t.added)} new, ${n(t.raised)} raised, ${n(t.lowered)} lowered; ${n(t.deleted)} ${would}deleted` +
      (t.truncated ? ` (the table ${r.dryRun ? 'would be' : 'was'} emptied with TRUNCATE and written again: a count cannot be lowered or deleted over the workers' monotonic timestamps)` : ''),
    `alerts topic ${topic}: ${n(r.topic.published)} alert(s) ${would}published, ${n(r.topic.tombstones)} tombstone(s) ${would}published` +
      (r.topic.deleted.length > 0 ? ` (${r.topic.deleted.slice(0, 5).map((d) => d.key).join(', ')}${r.topic.deleted.length > 5 ? ', …' : ''})` : ''),
  );
  if (r.workers.length > 0) out.push(`${r.workers.length} worker(s) are registered: the change itself refuses to run until they are stopped`);
  out.push(r.dryRun ? `job settings that would be stored: ${JSON.stringify(r.settings)}` : `job settings stored: ${JSON.stringify(r.settings)}`);
  return out.join('\n');
}

export function alertsCommand(): Command {
  const alerts = new Command('alerts').description("the job's alerts");
  withConnection(
    withAlertRule(
      alerts
        .command('rule')
        .description(
          "change the job's alert rule: with its workers stopped, recompute the alerts from the stored events, rewrite the alerts table, " +
            'publish the changed alerts and tombstones for the deleted ones on the alerts topic, then store the rule (a flag left out keeps its value)',
        ),
      false,
    )
      .option('--dry-run', 'compute and report what would change; write nothing')
      .option('--json', 'print the report as JSON on stdout'),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'alertsTopic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const flags = settingFlags(cmd);
      const session = await connect(config);
      try {
        const job = await readJob(session, config.keyspace);
        if (job === null) {
          throw new ExactlyOnceError(
            'EO_USAGE',
            `keyspace ${config.keyspace} has no job yet (no worker has run on it): start the first worker with the rule flags wanted (\`exactlyonce run --window-ms …\`), it stores them`,
          );
        }
        // The topics must be the job's (its alerts topic is rewritten); the settings are compared below.
        checkSame(job, { name: EVENT_JOB_NAME, inputTopic: config.topic, outputTopics: [config.alertsTopic], settings: job.settings }, config.keyspace, 'alerts rule');
        const { [RULE_CHANGE_MARK]: _, ...stored } = job.settings;
        const to = parseSettings(resolveSettings(stored, flags.values, flags.explicit), `; the job stored in keyspace ${config.keyspace} or this flag`).rule;
        const report = await new RuleChange(config, session, job).run({
          to,
          dryRun: opts.dryRun === true,
          onStep: (s) => process.stderr.write(`… ${s}\n`),
        });
        if (opts.json === true) process.stdout.write(JSON.stringify(report) + '\n');
        else process.stdout.write(formatRuleChange(report, report.topic.name) + '\n');
        return 0;
      } finally {
        await session.shutdown();
      }
    }),
  );
  return alerts;
}
