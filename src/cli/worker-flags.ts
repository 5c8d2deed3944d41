/** The worker flags every job's worker takes (`run`, `sink`), and the runner options they give. */
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { defaultRunnerOptions, type RunnerOptions } from '../engine/runner.js';

/** Adds the worker flags to `cmd`. */
export function withWorkerFlags<C extends Command<any, any, any>>(cmd: C): C {
  const d = defaultRunnerOptions;
  cmd
    .addOption(new Option('--max-batch <n>', 'most records per batch').default(d.maxBatchSize).argParser(intOption('--max-batch', 1, 100000)))
    .addOption(new Option('--concurrency <n>', 'partitions processed at once').default(d.concurrency).argParser(intOption('--concurrency', 1, 1024)))
    .addOption(new Option('--max-buffer-mb <n>', 'bound on prefetched data in MiB (backpressure)').default(d.maxBufferKb / 1024).argParser(intOption('--max-buffer-mb', 1, 65536)))
    .addOption(
      new Option('--max-heap-mb <n>', "V8 heap cap in MiB: with --max-buffer-mb, the bound on the worker's memory (bin/exactlyonce starts node with it; env EXACTLYONCE_WORKER_HEAP_MB)")
        .default(160)
        .argParser(intOption('--max-heap-mb', 64, 65536)),
    )
    .addOption(new Option('--session-timeout-ms <ms>', 'group session timeout').default(d.sessionTimeoutMs).argParser(intOption('--session-timeout-ms', 1000, 3600000)))
    .addOption(
      new Option('--startup-timeout <s>', 'seconds the worker waits at start for Kafka and Cassandra to answer before it gives up (exit 4)')
        .default(d.startupTimeoutMs / 1000)
        .argParser(intOption('--startup-timeout', 1, 86_400)),
    )
    .addOption(
      new Option('--stop-timeout <s>', 'seconds a stopping worker (SIGTERM, Ctrl-C) waits for its batches in flight and the group leave before it exits all the same with EO_STOP_TIMEOUT (exit 4; nothing is lost)')
        .default(d.stopTimeoutMs / 1000)
        .argParser(intOption('--stop-timeout', 1, 86_400)),
    )
    .addOption(new Option('--max-quarantine-bytes <n>', 'raw bytes kept per quarantined record').default(d.maxQuarantineBytes).argParser(intOption('--max-quarantine-bytes', 0, 1e9)))
    .addOption(
      new Option('--lost-writes-window-ms <ms>', "when a Cassandra node goes down, each partition is read again from the first batch acknowledged this long before (the nodes' commitlog_sync_period plus a margin; 0: off)")
        .default(d.lostWritesWindowMs)
        .argParser(intOption('--lost-writes-window-ms', 0, 3_600_000)),
    )
    .addOption(new Option('--metrics-port <port>', 'serve /metrics, /healthz, /readyz on 127.0.0.1:PORT (0: off); each worker on a machine needs its own').default(0).argParser(intOption('--metrics-port', 0, 65535)))
    .addOption(new Option('--progress-interval <s>', 'log a progress line (records stored, quarantined, lag, partitions) every this many seconds (0: off)').default(10).argParser(intOption('--progress-interval', 0, 86_400)));
  return cmd;
}

export interface WorkerFlags {
  maxBatch: number;
  concurrency: number;
  maxBufferMb: number;
  sessionTimeoutMs: number;
  startupTimeout: number;
  stopTimeout: number;
  maxQuarantineBytes: number;
  lostWritesWindowMs: number;
  metricsPort: number;
  /** Seconds between progress lines (0: none). */
  progressInterval: number;
}

export function runnerOptions(opts: WorkerFlags): RunnerOptions {
  return {
    ...defaultRunnerOptions,
    maxBatchSize: opts.maxBatch,
    concurrency: opts.concurrency,
    maxBufferKb: opts.maxBufferMb * 1024,
    sessionTimeoutMs: opts.sessionTimeoutMs,
    maxQuarantineBytes: opts.maxQuarantineBytes,
    startupTimeoutMs: opts.startupTimeout * 1000,
    stopTimeoutMs: opts.stopTimeout * 1000,
    lostWritesWindowMs: opts.lostWritesWindowMs,
  };
}
