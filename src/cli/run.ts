/** `exactlyonce run`: one worker of the consumer group, storing events exactly once. */
import { Command, Option } from '@commander-js/extra-typings';
import { checkNoRuleChange, EventJob, LAYOUT_SETTING, parseSettings, readJob, resolveSettings, storedSettings } from '../app/event-job.js';
import { formatLayout, ORIGINAL_LAYOUT, parseLayout } from '../app/events-layout.js';
import { alertMetrics } from '../app/metrics.js';
import { settingFlags, settingOption, withAlertRule } from './alert-flags.js';
import { connect } from '../cassandra/session.js';
import { intOption, type ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import type { BoundJob } from '../engine/job-binding.js';
import { EngineMetrics } from '../engine/metrics.js';
import { accessNotice } from '../engine/http-access.js';
import { metricsAccess, metricsBindHost, serveMetrics } from '../engine/metrics-server.js';
import { defaultRunnerOptions, Runner } from '../engine/runner.js';
import { AbortedError, isRetriable, retry } from '../engine/retry.js';
import { createLogger, type Logger } from '../log.js';
import { announceWorker } from '../dashboard/worker-registry.js';
import { action, connection, reportError, withConnection } from './common.js';

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

export function runCommand(): Command {
  const d = defaultRunnerOptions;
  return withConnection(
    withAlertRule(new Command('run'))
      .description('run a worker: join the group, resume every assigned partition from its Cassandra checkpoint, store events and alerts exactly once')
      .addOption(new Option('--max-batch <n>', 'most records per batch').default(d.maxBatchSize).argParser(intOption('--max-batch', 1, 100000)))
      .addOption(new Option('--concurrency <n>', 'partitions processed at once').default(d.concurrency).argParser(intOption('--concurrency', 1, 1024)))
      .addOption(new Option('--max-buffer-mb <n>', 'bound on prefetched data in MiB (backpressure)').default(d.maxBufferKb / 1024).argParser(intOption('--max-buffer-mb', 1, 65536)))
      .addOption(
        new Option('--max-heap-mb <n>', "V8 heap cap in MiB: with --max-buffer-mb, the bound on the worker's memory (bin/exactlyonce starts node with it; env EXACTLYONCE_WORKER_HEAP_MB)")
          .default(160)
          .argParser(intOption('--max-heap-mb', 64, 65536)),
      )
      .addOption(new Option('--session-timeout-ms <ms>', 'group session timeout').default(d.sessionTimeoutMs).argParser(intOption('--session-timeout-ms', 1000, 3600000)))
      .addOption(settingOption('max-record-bytes', "larger records are quarantined; left out: the job's stored value (a new job: the default)"))
      .addOption(
        new Option('--layout <layout>', "where events are stored: original (the events table, one Cassandra partition per Kafka partition) or bucketed[:N] (events_bucketed, N offsets per Cassandra partition, default 100000); left out: the job's stored value (a new job: original)"),
      )
      .addOption(
        new Option('--startup-timeout <s>', 'seconds the worker waits at start for Kafka and Cassandra to answer before it gives up (exit 4)')
          .default(d.startupTimeoutMs / 1000)
          .argParser(intOption('--startup-timeout', 1, 86_400)),
      )
      .addOption(new Option('--max-quarantine-bytes <n>', 'raw bytes kept per quarantined record').default(d.maxQuarantineBytes).argParser(intOption('--max-quarantine-bytes', 0, 1e9)))
      .addOption(new Option('--metrics-port <port>', 'serve /metrics, /healthz, /readyz on 127.0.0.1:PORT (0: off)').default(0).argParser(intOption('--metrics-port', 0, 65535))),
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const log = createLogger('worker');
      // The job's settings: the stored ones, except the flags given explicitly (the Runner then
      // refuses to start if they differ: EO_JOB_CONFIG_MISMATCH). The first worker of a keyspace
      // stores its own (flags or defaults).
      const flags = settingFlags(cmd);
      if (opts.layout !== undefined) {
        (flags.values as Record<string, string | number>)[LAYOUT_SETTING] = formatLayout(parseLayout(opts.layout));
        flags.explicit.add(LAYOUT_SETTING);
      }
      const job = await storedJob(config, log, opts.startupTimeout * 1000);
      checkNoRuleChange(job, config.keyspace, 'this worker');
      const settings = parseSettings(
        resolveSettings(job?.settings ?? null, flags.values, flags.explicit),
        job === null ? '' : `; the job stored in keyspace ${config.keyspace} or this flag`,
      );
      log.info(
        { settings: storedSettings(settings), explicit: [...flags.explicit] },
        job === null ? 'job settings: from the flags (the first worker of this keyspace stores them)' : `job settings: the job's, stored in keyspace ${config.keyspace}`,
      );
      const metrics = new EngineMetrics(true);
      const runner = new Runner(
        config,
        new EventJob({
          maxRecordBytes: settings.maxRecordBytes,
          rule: settings.rule,
          layout: settings.layout ?? ORIGINAL_LAYOUT,
          alertsTopic: config.alertsTopic,
          onAlerts: alertMetrics(metrics.registry),
        }),
        log,
        {
          ...d,
          maxBatchSize: opts.maxBatch,
          concurrency: opts.concurrency,
          maxBufferKb: opts.maxBufferMb * 1024,
          sessionTimeoutMs: opts.sessionTimeoutMs,
          maxQuarantineBytes: opts.maxQuarantineBytes,
          startupTimeoutMs: opts.startupTimeout * 1000,
        },
        metrics,
      );
      let running = false;
      const port = opts.metricsPort;
      const host = metricsBindHost();
      const access = port > 0 ? metricsAccess(host) : undefined;
      const server =
        access !== undefined
          ? await serveMetrics(metrics, port, () => running, host, access).catch((e: unknown) => {
              throw new ExactlyOnceError('EO_PORT_IN_USE', `--metrics-port: cannot listen on ${host}:${port} (${(e as Error).message})`, { cause: e });
            })
          : undefined;
      if (access !== undefined) log.info({ metrics: `${host}:${port}`, token: access.token !== undefined }, `serving /metrics, /healthz, /readyz on ${host}:${port}: ${accessNotice(access)}`);
      // Lets `exactlyonce dashboard` find this worker (a row of <keyspace>.workers with a TTL).
      const announcement = server && announceWorker(config, { workerId: metrics.workerId, port, log });
      let signals = 0;
      const done = new Promise<void>((resolve) => {
        const onSignal = (sig: NodeJS.Signals) => {
          if (++signals > 1) process.exit(130); // a second Ctrl-C: stop now
          log.info({ signal: sig }, 'stopping: finishing the batches in flight, then leaving the group');
          void runner.stop().then(resolve);
        };
        process.on('SIGINT', onSignal);
        process.on('SIGTERM', onSignal);
      });
      try {
        await runner.start();
      } catch (e) {
        await runner.stop();
        await announcement?.stop();
        server?.close();
        // Stopped by a signal while still starting (e.g. waiting for Kafka): a clean exit.
        if (signals > 0 && e instanceof AbortedError) process.exit(0);
        throw e;
      }
      running = true;
      // A refusal no retry can change (a missing ACL): stop, then report it as the command's error.
      const refusal = await Promise.race([done.then(() => undefined), runner.refusal]);
      if (refusal !== undefined) {
        log.error({ code: refusal.code }, refusal.message);
        await runner.stop();
        await announcement?.stop();
        server?.close();
        process.exitCode = reportError(refusal);
        process.exit();
      }
      await announcement?.stop();
      server?.close();
      // Everything that matters is closed (batches finished or abandoned before their checkpoint,
      // group left, producer flushed, sessions shut); a client library's leftover timer or socket must
      // not keep the process alive after it said "worker stopped".
      process.exit(0);
    }),
  );
}
