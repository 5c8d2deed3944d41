/**
 * `exactlyonce bench`: what exactly-once costs, measured side by side in one run on the local stack
 * (issue 6; the cases live in bench/). Prints one table on stdout, progress on stderr, and writes the
 * results as JSON and SVG under bench/results/ of the working directory. Ctrl-C stops what it started and removes what it made.
 */
import path from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { CASE_GROUPS, defaultBenchOptions as d, type BenchOptions, type CaseGroup } from '../../bench/options.js';
import { formatGoals, formatResults, writeResults } from '../../bench/report.js';
import { runBench } from '../../bench/run.js';
import { BenchAborted } from '../../bench/context.js';
import { isLocalCassandra } from '../../bench/machine.js';
import { intOption, type ConnectionConfig } from '../config.js';
import { formatLayout, parseLayout } from '../jobs/events/events-layout.js';
import { ExactlyOnceError } from '../errors.js';
import { action, connection, healthMixOption, withConnection } from './common.js';
import type { BenchResults } from '../../bench/results.js';
import { isCluster } from '../stack/cluster.js';
import { COMMITLOG_SYNCS, isSecure, stackCommitlogSync, stackStatus, startServer, stopServer, type CommitlogSync, type StackOptions } from '../stack/index.js';
import { stackOptionsFrom } from './stack-flags.js';

/** `--commitlog`: the modes to measure, in order; `as-is` measures the servers as they run, once. */
function commitlogList(value: string): Array<CommitlogSync | 'as-is'> {
  if (value === 'both') return ['periodic', 'batch'];
  if (value === 'as-is' || (COMMITLOG_SYNCS as readonly string[]).includes(value)) return [value as CommitlogSync | 'as-is'];
  throw new ExactlyOnceError('EO_CONFIG_INVALID', `--commitlog: expected periodic, batch, both or as-is (got '${value}')`);
}

/**
 * The local single-node stack whose Cassandra the connection points at (not secured: restarting it
 * here would not know its secrets), with its commit log mode; null when the run uses other servers.
 */
async function localCassandra(config: ConnectionConfig, onProgress: (line: string) => void): Promise<{ o: StackOptions; mode: CommitlogSync } | null> {
  const o = { ...stackOptionsFrom({}), onProgress };
  if (isCluster(o) || isSecure(o)) return null;
  const node = (await stackStatus(o)).find((s) => s.id === 'cassandra' && s.running);
  return node === undefined || !config.cassandra.some((c) => isLocalCassandra(c, node.port)) ? null : { o, mode: stackCommitlogSync(o, 'cassandra') ?? 'periodic' };
}

/** Restarts the local Cassandra with `mode` unless it runs with it already. */
async function switchCommitlog(local: { o: StackOptions; mode: CommitlogSync }, mode: CommitlogSync): Promise<void> {
  if ((stackCommitlogSync(local.o, 'cassandra') ?? 'periodic') === mode) return;
  process.stderr.write(`restarting the local Cassandra with commitlog_sync: ${mode}…\n`);
  await stopServer(local.o, 'cassandra');
  await startServer({ ...local.o, commitlogSync: mode }, 'cassandra');
}

/** Results go under the working directory (in a clone, where `make bench` runs: the committed bench/results/). */
const RESULTS_DIR = path.join('bench', 'results');

function intList(flag: string, min: number, max: number) {
  const one = intOption(flag, min, max);
  return (value: string): number[] => value.split(',').map((v) => one(v.trim()));
}

function caseList(value: string): Set<CaseGroup> {
  const names = value.split(',').map((v) => v.trim());
  const bad = names.filter((n) => !(CASE_GROUPS as readonly string[]).includes(n));
  if (bad.length > 0 || names.length === 0) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--cases: expected a comma-separated list of ${CASE_GROUPS.join(', ')} (got '${value}')`);
  }
  return new Set(names as CaseGroup[]);
}

export function benchCommand(): Command {
  const int = (flag: string, min: number, max: number) => intOption(flag, min, max);
  return withConnection(
    new Command('bench')
      .description(
        'measure the exactly-once pipeline against an at-least-once baseline and the raw Cassandra write ceiling: ' +
          'throughput (1 and N workers), end-to-end latency at 25/50/75 % of the maximum, peak RSS',
      )
      .addOption(new Option('--events <n>', 'events pre-produced for the throughput cases').default(d.events).argParser(int('--events', 100, 1e9)))
      .addOption(new Option('--partitions <n>', 'partitions of every bench topic').default(d.partitions).argParser(int('--partitions', 1, 1000)))
      .addOption(
        new Option('--health-mix <mix>', 'weights of health 0,1,2 in the generated events (Critical ones feed the alerts)')
          .default(d.healthMix, '0:90,1:10: no Critical, so no alert work; see --cases alerts')
          .argParser(healthMixOption),
      )
      .addOption(new Option('--alerts-events <n>', 'events of the alerts case (all Critical, as the original generator)').default(d.alertsEvents).argParser(int('--alerts-events', 100, 1e9)))
      .addOption(new Option('--event-time-rate <n>', 'events per second of event time in the generated topics').default(d.eventTimeRate).argParser(int('--event-time-rate', 1, 1e9)))
      .addOption(new Option('--repeat <n>', 'runs of the baseline, the 1-worker and the alerts case, alternated; the best of each counts').default(d.repeat).argParser(int('--repeat', 1, 20)))
      .addOption(new Option('--workers <n>', 'worker processes of the multi-worker case').default(d.workers).argParser(int('--workers', 2, 64)))
      .addOption(new Option('--max-batch <n>', 'records per batch (workers and baseline)').default(d.maxBatch).argParser(int('--max-batch', 1, 100000)))
      .addOption(new Option('--concurrency <n>', 'partitions processed at once (workers and baseline)').default(d.concurrency).argParser(int('--concurrency', 1, 1024)))
      .addOption(new Option('--max-buffer-mb <n>', 'prefetch bound in MiB (workers and baseline)').default(d.maxBufferMb).argParser(int('--max-buffer-mb', 1, 65536)))
      .addOption(
        new Option('--ceiling-concurrency <list>', 'batches in flight the ceiling tries; the fastest is used')
          .default(d.ceilingConcurrency, d.ceilingConcurrency.join(','))
          .argParser(intList('--ceiling-concurrency', 1, 4096)),
      )
      .addOption(new Option('--ceiling-sweep-events <n>', 'rows written per level of the ceiling sweep').default(d.ceilingSweepEvents).argParser(int('--ceiling-sweep-events', 100, 1e9)))
      .addOption(new Option('--ceiling-batch-rows <n>', "rows per unlogged batch in the ceiling (default: EventJob's)").default(d.ceilingBatchRows).argParser(int('--ceiling-batch-rows', 1, 10000)))
      .addOption(
        new Option('--latency-rates <list>', 'latency case rates, in % of the 1-worker exactly-once events/s')
          .default(d.latencyPercents, d.latencyPercents.join(','))
          .argParser(intList('--latency-rates', 1, 200)),
      )
      .addOption(new Option('--latency-seconds <s>', 'measured seconds per latency rate').default(d.latencySeconds).argParser(int('--latency-seconds', 1, 3600)))
      .addOption(new Option('--latency-warmup-seconds <s>', 'seconds produced before measuring each rate').default(d.latencyWarmupSeconds).argParser(int('--latency-warmup-seconds', 0, 600)))
      .addOption(new Option('--latency-poll-ms <ms>', 'how often rows are read back (resolution of the latencies)').default(d.latencyPollMs).argParser(int('--latency-poll-ms', 1, 10000)))
      .addOption(new Option('--latency-max-rate <n>', 'events/s that 100 % stands for (default: the measured 1-worker rate)').argParser(int('--latency-max-rate', 1, 1e8)))
      .addOption(new Option('--behind-events <n>', 'events the memory case starts behind').default(d.behindEvents).argParser(int('--behind-events', 100, 1e10)))
      .addOption(new Option('--upsert-keys <n>', "distinct record keys of the pre-produced events (the upsert sink case's rows)").default(d.upsertKeys).argParser(int('--upsert-keys', 1, 1e9)))
      .addOption(new Option('--cases <list>', `cases to run: ${CASE_GROUPS.join(',')}`).default(d.cases, 'all').argParser(caseList))
      .addOption(new Option('--seed <n>', 'seed of the generated events').default(d.seed).argParser(int('--seed', 0, 2 ** 31)))
      .addOption(new Option('--case-timeout <s>', 'give up on a case after this many seconds').default(d.caseTimeoutSeconds).argParser(int('--case-timeout', 10, 86400)))
      .addOption(new Option('--out <dir>', 'where the JSON and SVG results go').default(RESULTS_DIR, 'bench/results of the working directory'))
      .addOption(new Option('--worker-node-options <flags>', 'NODE_OPTIONS for the workers, the baseline and the ceiling (e.g. --max-semi-space-size=64)'))
      .addOption(new Option('--layout <layout>', 'events layout of the exactly-once workers: original or bucketed[:N] (run --layout)').default(d.layout))
      .option('--keep', 'keep the bench topics and keyspaces for inspection')
      .addOption(
        new Option('--commitlog <mode>', "the local Cassandra's commit log sync to measure on: periodic (Cassandra's default), batch, both (each in turn, in one run), or as-is (the servers as they run); the node is restarted for each and left as it was found")
          .default(['periodic', 'batch'] as Array<CommitlogSync | 'as-is'>, 'both')
          .argParser(commitlogList),
      )
      .addOption(new Option('--cpu-prof <dir>', 'write a V8 CPU profile of every worker, the baseline and the ceiling into DIR/<process> (node --cpu-prof)')),
    ['brokers', 'cassandra', 'datacenter', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const { events, partitions, healthMix, alertsEvents, eventTimeRate, workers, repeat, maxBatch, concurrency, maxBufferMb, ceilingConcurrency } = opts;
      const { ceilingSweepEvents, ceilingBatchRows, latencySeconds, latencyWarmupSeconds, latencyPollMs, latencyMaxRate, behindEvents, cases, seed } = opts;
      // In the order the results' JSON has always listed them.
      const options: BenchOptions = {
        ...{ events, partitions, healthMix, alertsEvents, eventTimeRate, workers, repeat, maxBatch, concurrency, maxBufferMb, ceilingConcurrency, ceilingSweepEvents, ceilingBatchRows },
        latencyPercents: opts.latencyRates,
        ...{ latencySeconds, latencyWarmupSeconds, latencyPollMs, latencyMaxRate, behindEvents, upsertKeys: opts.upsertKeys, cases },
        outDir: path.resolve(opts.out),
        seed,
        caseTimeoutSeconds: opts.caseTimeout,
        keep: opts.keep === true,
        workerNodeOptions: opts.workerNodeOptions,
        profileDir: opts.cpuProf === undefined ? undefined : path.resolve(opts.cpuProf),
        layout: formatLayout(parseLayout(opts.layout)),
      };

      // A closed pipe (`bench | head`) must not kill the run before it has cleaned up.
      for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
      const abort = new AbortController();
      let kill: () => void = () => undefined;
      let interrupts = 0;
      const onSignal = () => {
        if (++interrupts === 1) {
          process.stderr.write('\ninterrupted: stopping the bench processes and removing its topics and keyspaces (Ctrl-C again to kill at once)…\n');
          abort.abort();
        } else {
          kill();
          process.exit(130);
        }
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      const local = opts.commitlog.includes('as-is') ? null : await localCassandra(config, (line) => process.stderr.write(`  ${line}\n`));
      if (local === null && !opts.commitlog.includes('as-is') && cmd.getOptionValueSource('commitlog') !== 'default') {
        throw new ExactlyOnceError('EO_USAGE', "--commitlog: the bench switches the commit log of the local single-node stack's Cassandra only (not a cluster, a secured stack or other servers); use --commitlog as-is");
      }
      const modes = local === null ? [undefined] : (opts.commitlog as CommitlogSync[]);
      if (local === null) process.stderr.write('(not the local single-node stack: measured on the servers as they run, commit log unknown)\n');
      const all: BenchResults[] = [];
      try {
        for (const mode of modes) {
          if (mode !== undefined) await switchCommitlog(local!, mode);
          if (abort.signal.aborted) throw new BenchAborted();
          if (modes.length > 1) process.stderr.write(`=== Cassandra's commit log: ${mode} ===\n`);
          const results = await runBench(config, options, {
            signal: abort.signal,
            onKill: (k) => (kill = k),
            command: `exactlyonce ${process.argv.slice(2).join(' ')}`,
            ...(mode === undefined ? {} : { commitlog: mode }),
          });
          const everyCase = CASE_GROUPS.every((g) => options.cases.has(g));
          const files = writeResults(results, options.outDir, everyCase);
          process.stdout.write(`${mode === undefined ? '' : `Cassandra commit log: ${mode}\n`}${formatResults(results)}\n\n`);
          process.stderr.write(`results: ${files.json}\nchart:   ${files.svg}\n`);
          if (!everyCase) process.stderr.write('(not every case ran: the latest results are left as they were)\n');
          all.push(results);
        }
        process.stdout.write(`${formatGoals(all)}\n`);
        return 0;
      } catch (e) {
        if (e instanceof BenchAborted || abort.signal.aborted) {
          process.stderr.write('bench interrupted; everything it started is stopped and removed\n');
          return 130;
        }
        throw e;
      } finally {
        // The node as it was found (a failed restart is reported, not hidden behind the bench's own error).
        if (local !== null) await switchCommitlog(local, local.mode).catch((e: unknown) => process.stderr.write(`could not restart the local Cassandra with its commit log ${local.mode}: ${String(e)}\n`));
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
    }),
  );
}
