/**
 * `runWorker(job, options)`: runs one worker of a job as a process — what `exactlyonce run` and
 * `exactlyonce sink` do, and what a user's own program calls. It owns what every worker needs beside
 * the engine's Runner: the connection settings (validated once), the metrics server (/metrics,
 * /healthz, /readyz), the worker's registration for `exactlyonce dashboard`, SIGINT/SIGTERM (finish
 * the batches in flight, leave the group; a second signal exits at once) and the process exit.
 */
import { loadConnectionConfig, type ConnectionConfig, type RawOptions } from './config.js';
import { announceWorker } from './dashboard/worker-registry.js';
import type { Job } from './engine/job.js';
import { EngineMetrics } from './engine/metrics.js';
import { accessNotice } from './engine/http-access.js';
import { metricsAccess, metricsBindHost, serveMetrics } from './engine/metrics-server.js';
import { AbortedError } from './engine/retry.js';
import { defaultRunnerOptions, Runner, type RunnerOptions } from './engine/runner.js';
import { ExactlyOnceError } from './errors.js';
import { kafkaClientsClosed } from './kafka/client.js';
import { createLogger, type Logger } from './log.js';
import { reportProgress } from './engine/progress-report.js';

export interface WorkerOptions {
  /**
   * Where Kafka and Cassandra are, the keyspace and the consumer group: a validated config, or raw
   * values as flags would give them (`{ brokers: 'localhost:9092', keyspace: 'shop' }`), completed
   * from the EXACTLYONCE_* environment and the defaults. The job's `topic`, when it has one, wins over
   * the config's.
   */
  connection?: ConnectionConfig | RawOptions;
  /** Batch size, concurrency, prefetch bound, timeouts (defaults: `defaultRunnerOptions`). */
  runner?: Partial<RunnerOptions>;
  /** Serve /metrics, /healthz and /readyz on this port (0 or left out: no server, no registration). */
  metricsPort?: number;
  /** Log a one-line progress (records stored, quarantined, lag, partitions) this often, in ms (0 or left out: never). */
  progressEveryMs?: number;
  /** The worker's metrics (e.g. with a job's own collectors registered); a new set by default. */
  metrics?: EngineMetrics;
  log?: Logger;
  /**
   * Exit the process once stopped (default true: a client library's leftover timer or socket must
   * not keep it alive). False: `runWorker` resolves instead, and signals still stop the worker.
   */
  exit?: boolean;
  /** Stops the worker when aborted (besides SIGINT/SIGTERM). */
  signal?: AbortSignal;
}

function isConfig(c: ConnectionConfig | RawOptions): c is ConnectionConfig {
  return Object.isFrozen(c) && Array.isArray((c as ConnectionConfig).brokers);
}

/**
 * Runs `job` until SIGINT/SIGTERM (or `options.signal`). Rejects with an ExactlyOnceError when it
 * cannot start (a missing topic, a job whose settings differ from the stored ones, servers that do
 * not answer within the start-up timeout) or is refused for good while running (a missing ACL: the
 * worker stops first); the CLI prints such an error as one coded line.
 */
export async function runWorker(job: Job<any>, options: WorkerOptions = {}): Promise<void> {
  const base = options.connection === undefined ? loadConnectionConfig({}) : isConfig(options.connection) ? options.connection : loadConnectionConfig(options.connection);
  const config: ConnectionConfig = Object.freeze({ ...base, topic: job.topic ?? base.topic });
  const log = options.log ?? createLogger('worker');
  const metrics = options.metrics ?? new EngineMetrics(true);
  const runner = new Runner(config, job, log, { ...defaultRunnerOptions, ...options.runner }, metrics);
  let running = false;
  const port = options.metricsPort ?? 0;
  // Bound beyond loopback (EXACTLYONCE_METRICS_HOST), the server requires a token and says so.
  const host = metricsBindHost();
  const access = port > 0 ? metricsAccess(host) : undefined;
  const server =
    access !== undefined
      ? await serveMetrics(metrics, port, () => running, host, access, log).catch((e: unknown) => {
          throw new ExactlyOnceError('EO_PORT_IN_USE', `--metrics-port: cannot listen on ${host}:${port} (${(e as Error).message})`, { cause: e });
        })
      : undefined;
  if (access !== undefined) log.info({ metrics: `${host}:${port}`, token: access.token !== undefined }, `serving /metrics, /healthz, /readyz on ${host}:${port}: ${accessNotice(access)}`);
  // Lets `exactlyonce dashboard` find this worker (a row of <keyspace>.workers with a TTL).
  const announcement = server && announceWorker(config, { workerId: metrics.workerId, port, log, job: job.name });
  let signals = 0;
  /** Why stopping on a signal failed: the worker then exits with it, not as if all were closed. */
  let stopFailure: unknown;
  let onSignal: (sig: NodeJS.Signals) => void = () => undefined;
  let stopProgress: () => void = () => undefined;
  const done = new Promise<void>((resolve) => {
    onSignal = (sig: NodeJS.Signals) => {
      if (++signals > 1) process.exit(130); // a second Ctrl-C: stop now
      log.info({ signal: sig }, 'stopping: finishing the batches in flight, then leaving the group');
      void runner.stop().then(resolve, (e: unknown) => {
        stopFailure = e;
        resolve();
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    options.signal?.addEventListener('abort', () => onSignal('SIGTERM'), { once: true });
  });
  // The last resort, in a process the worker owns: a rejection nothing handled (a bug, ours or a
  // library's: the Cassandra driver's control connection once raced itself into one) is logged with
  // a code at error level and counted (errors_total, on the dashboards), and the worker goes on —
  // Node's default would end it. Going on is safe: what is stored is checked against the stored
  // checkpoints, never against this process's memory, and a partition that stalls meanwhile is
  // reported as stalled.
  const onUnhandled = (reason: unknown) => {
    metrics.errors.inc({ server: 'worker', error: 'EO_INTERNAL' });
    const what = reason instanceof Error ? (reason.stack ?? `${reason.name}: ${reason.message}`) : String(reason);
    log.error({ code: 'EO_INTERNAL' }, `a failure nothing handled (a bug: please report it, with this line): ${what}; the worker goes on`);
  };
  if (options.exit !== false) process.on('unhandledRejection', onUnhandled);
  const cleanUp = async () => {
    stopProgress();
    process.off('unhandledRejection', onUnhandled);
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await announcement?.stop();
    server?.close();
  };
  try {
    await runner.start();
  } catch (e) {
    // Stopped by a signal while still starting (e.g. waiting for Kafka): a clean exit, whatever the
    // start then threw (a call abandoned, or a client closed under it), said in a line of its own. A
    // signal that comes only while the failed start is cleaned up changes nothing: the failure stands.
    const signalled = signals > 0;
    await runner.stop().catch(() => undefined); // (a stop past its deadline logged EO_STOP_TIMEOUT: the start's error is the one to say)
    await cleanUp();
    if (signalled) {
      if (!(e instanceof AbortedError)) log.warn({ err: e }, `stopped while starting; the start ended with: ${e instanceof Error ? e.message : String(e)}`);
      if (options.exit !== false) await exit(0);
      return;
    }
    throw e;
  }
  running = true;
  stopProgress = reportProgress(metrics, options.progressEveryMs ?? 0, (line) => log.info(line));
  // A refusal no retry can change (a missing ACL, a revoked login): stop, then reject with it.
  const refusal = await Promise.race([done.then(() => undefined), runner.refusal]);
  if (refusal !== undefined) {
    log.error({ code: refusal.code }, refusal.message);
    await runner.stop().catch(() => undefined);
    await cleanUp();
    throw refusal;
  }
  await cleanUp();
  if (stopFailure !== undefined) throw stopFailure;
  // Everything that matters is closed (batches finished or abandoned before their checkpoint, group
  // left, producer flushed, sessions shut, the job closed).
  if (options.exit !== false) await exit(0);
}

/** Exits once the Kafka clients given up while connecting are closed (src/kafka/client.ts, kafkaClientsClosed). */
async function exit(code: number): Promise<never> {
  await kafkaClientsClosed();
  process.exit(code);
}
