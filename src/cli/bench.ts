/**
 * `exactlyonce bench`: what exactly-once costs, measured side by side in one run on the local stack
 * (issue 6). Its flags are here; the cases live in bench/, the run across commit log modes in
 * bench/commitlog-runs.ts. Results go as JSON and SVG under bench/results/ of the working directory.
 */
import path from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { runCommitlogModes } from '../../bench/commitlog-runs.js';
import { CASE_GROUPS, defaultBenchOptions as d, type BenchOptions, type CaseGroup } from '../../bench/options.js';
import { intOption } from './flags.js';
import { formatLayout, parseLayout } from '../jobs/events/events-layout.js';
import { ExactlyOnceError } from '../errors.js';
import { action, connection, healthMixOption, withConnection } from './common.js';
import { COMMITLOG_SYNCS, type CommitlogSync } from '../stack/index.js';
import { stackOptionsFrom } from './stack-flags.js';

/** `--commitlog`: the modes to measure, in order; `as-is` measures the servers as they run, once. */
function commitlogList(value: string): Array<CommitlogSync | 'as-is'> {
  if (value === 'both') return ['periodic', 'batch'];
  if (value === 'as-is' || (COMMITLOG_SYNCS as readonly string[]).includes(value)) return [value as CommitlogSync | 'as-is'];
  throw new ExactlyOnceError('EO_CONFIG_INVALID', `--commitlog: expected periodic, batch, both or as-is (got '${value}')`);
}

/** Results go under the working directory (in a clone, where `make bench` runs: the committed bench/results/). */
const RESULTS_DIR = path.join('bench', 'results');

/** `FLAG <list>`: comma-separated whole numbers from `min` to `max`, the default shown as its list. */
function intListOption<F extends string>(flag: F, help: string, def: number[], min: number, max: number) {
  const one = intOption(flag, min, max);
  return new Option(`${flag} <list>` as `${F} <list>`, help).default(def, def.join(',')).argParser((value: string): number[] => value.split(',').map((v) => one(v.trim())));
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
      .addOption(intListOption('--ceiling-concurrency', 'batches in flight the ceiling tries; the fastest is used', d.ceilingConcurrency, 1, 4096))
      .addOption(new Option('--ceiling-sweep-events <n>', 'rows written per level of the ceiling sweep').default(d.ceilingSweepEvents).argParser(int('--ceiling-sweep-events', 100, 1e9)))
      .addOption(new Option('--ceiling-batch-rows <n>', "rows per unlogged batch in the ceiling (default: EventJob's)").default(d.ceilingBatchRows).argParser(int('--ceiling-batch-rows', 1, 10000)))
      .addOption(intListOption('--latency-rates', 'latency case rates, in % of the 1-worker exactly-once events/s', d.latencyPercents, 1, 200))
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
      // In the order the results' JSON lists them.
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

      return runCommitlogModes(config, options, {
        commitlog: opts.commitlog,
        commitlogGiven: cmd.getOptionValueSource('commitlog') !== 'default',
        stack: () => stackOptionsFrom({}),
        command: `exactlyonce ${process.argv.slice(2).join(' ')}`,
      });
    }),
  );
}
