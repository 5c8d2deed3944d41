/** `exactlyonce run`: one worker of the consumer group — of the events job, or of any job module (`--job`). */
import { Command, Option } from '@commander-js/extra-typings';
import { checkNoRuleChange, EventJob, LAYOUT_SETTING, parseSettings, readJob, resolveSettings, storedSettings } from '../jobs/events/event-job.js';
import { formatLayout, ORIGINAL_LAYOUT, parseLayout } from '../jobs/events/events-layout.js';
import { alertMetrics } from '../jobs/events/metrics.js';
import { settingFlags, settingOption, withAlertRule } from './alert-flags.js';
import { connect } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import type { BoundJob } from '../engine/job-binding.js';
import { EngineMetrics } from '../engine/metrics.js';
import { isRetriable, retry } from '../engine/retry.js';
import { kafkaClientsClosed } from '../kafka/client.js';
import { loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger, type Logger } from '../log.js';
import { runWorker, type WorkerOptions } from '../worker.js';
import { action, connection, reportError, withConnection } from './common.js';
import { launcherEnded } from './launcher.js';
import { runnerOptions, withWorkerFlags, type WorkerFlags } from './worker-flags.js';

/** The job stored in the keyspace (null before its first worker), read once Cassandra answers. */
function storedJob(config: ConnectionConfig, log: Logger, deadlineMs: number): Promise<BoundJob | null> {
  return retry(
    async () => {
      const session = await connect(config);
      try {
        return await readJob(session, config.keyspace);
      } finally {
        await session.shutdown();
      }
    },
    { server: 'Cassandra', log, deadlineMs, isRetriable },
  );
}

/** runWorker for a command: an error (a refusal while running included) is one coded line, then the process exits. */
export async function runCliWorker(job: Parameters<typeof runWorker>[0], options: WorkerOptions): Promise<void> {
  const ended = launcherEnded(options.log ?? createLogger('worker'));
  const signal = ended === undefined ? options.signal : options.signal === undefined ? ended : AbortSignal.any([options.signal, ended]);
  await runWorker(job, { ...options, signal }).catch(async (e: unknown) => {
    process.exitCode = reportError(e);
    // Clients abandoned while connecting are closed first (src/kafka/client.ts, kafkaClientsClosed).
    await kafkaClientsClosed();
    process.exit();
  });
}

export function runCommand(): Command {
  const cmd = withWorkerFlags(
    withAlertRule(new Command('run'))
      .description('run a worker: join the group, resume every assigned partition from its Cassandra checkpoint, store events and alerts exactly once (or run your own job: --job)')
      .option('--job <module>', 'run the job this ES module (.js or .ts) makes: `export default function createJob(context)` returning a Job (see docs/library.md, "The job contract"); the alert flags then do not apply')
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .addOption(settingOption('max-record-bytes', "larger records are quarantined; left out: the job's stored value (a new job: the default)"))
      .addOption(
        new Option('--layout <layout>', "where events are stored: original (the events table, one Cassandra partition per Kafka partition) or bucketed[:N] (events_bucketed, N offsets per Cassandra partition, default 100000); left out: the job's stored value (a new job: original)"),
      ),
  );
  const withConn = withConnection(cmd);
  // With --job the group is the job's own (below): --help says both.
  const group = withConn.options.find((o) => o.attributeName() === 'group');
  if (group !== undefined) group.defaultValueDescription = `${String(group.defaultValue)}; with --job: exactlyonce.<the job's name>`;
  return withConn.action(
    action(async (opts, cmd) => {
      const log = createLogger('worker');
      const w = opts as unknown as WorkerFlags; // added by withWorkerFlags
      let config = connection(cmd);
      if (opts.job !== undefined) {
        const job = await loadJobModule(opts.job, { config, options: parseJobOptions(opts.jobOption), log });
        // Each job its own consumer group unless one is given: two jobs in one group would share partitions.
        if (cmd.getOptionValueSource('group') === 'default') config = Object.freeze({ ...config, group: `exactlyonce.${job.name}` });
        await runCliWorker(job, { connection: config, runner: runnerOptions(w), metricsPort: w.metricsPort, progressEveryMs: w.progressInterval * 1000, log });
        return;
      }
      // The job's settings: the stored ones, except the flags given explicitly (the Runner then
      // refuses to start if they differ: EO_JOB_CONFIG_MISMATCH). The first worker of a keyspace
      // stores its own (flags or defaults).
      const flags = settingFlags(cmd);
      if (opts.layout !== undefined) {
        (flags.values as Record<string, string | number>)[LAYOUT_SETTING] = formatLayout(parseLayout(opts.layout));
        flags.explicit.add(LAYOUT_SETTING);
      }
      const stored = await storedJob(config, log, w.startupTimeout * 1000);
      checkNoRuleChange(stored, config.keyspace, 'this worker');
      const settings = parseSettings(
        resolveSettings(stored?.settings ?? null, flags.values, flags.explicit),
        stored === null ? '' : `; the job stored in keyspace ${config.keyspace} or this flag`,
      );
      log.info(
        { settings: storedSettings(settings), explicit: [...flags.explicit] },
        stored === null ? 'job settings: from the flags (the first worker of this keyspace stores them)' : `job settings: the job's, stored in keyspace ${config.keyspace}`,
      );
      const metrics = new EngineMetrics(true);
      const job = new EventJob({
        maxRecordBytes: settings.maxRecordBytes,
        rule: settings.rule,
        layout: settings.layout ?? ORIGINAL_LAYOUT,
        alertsTopic: config.alertsTopic,
        onAlerts: alertMetrics(metrics.registry),
      });
      await runCliWorker(job, { connection: config, runner: runnerOptions(w), metricsPort: w.metricsPort, progressEveryMs: w.progressInterval * 1000, metrics, log });
    }),
  );
}
