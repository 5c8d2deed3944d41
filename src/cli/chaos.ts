/**
 * `exactlyonce chaos`: does its worst to a pipeline, then proves it with `verify`. On a fresh topic and
 * keyspace it runs the generator and W real worker processes (`exactlyonce run`) and applies a seeded
 * schedule of faults, printed first (src/harness/chaos-schedule.ts): SIGKILL + restart, workers
 * added and removed, a worker SIGSTOPped past its session timeout and SIGCONTed (a zombie), Cassandra
 * and Kafka restarted (through the local stack), bursts of malformed records. It watches that no
 * checkpoint ever moves backwards, waits for the workers to drain, stops them, and runs the auditor.
 * Exit 0 only when no violation was found and the run was clean; the seed is printed to replay it.
 * The flags are here; the run and its report are src/harness/chaos-run.ts.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { intOption, ratioOption } from './flags.js';
import { ExactlyOnceError } from '../errors.js';
import type { ChaosOptions } from '../harness/chaos.js';
import { runChaosAndReport } from '../harness/chaos-run.js';
import { defaultStackOptions } from '../stack/index.js';
import { alertRuleFrom, withAlertRule } from './alert-flags.js';
import { action, connection, withConnection } from './common.js';
import { stackOptionsFrom } from './stack-flags.js';
import { isCluster } from '../stack/cluster.js';
import { formatLayout, parseLayout } from '../jobs/events/events-layout.js';

export function chaosCommand(): Command {
  const count = <F extends string>(flag: F, def: number, help: string, max = 10_000) =>
    new Option(`${flag} <n>` as `${F} <n>`, help).default(def).argParser(intOption(flag, 0, max));
  return withConnection(
    withAlertRule(new Command('chaos'))
      .description('run the generator and workers on a fresh topic and keyspace under a seeded schedule of faults, then verify (exit 0 only if nothing was violated)')
      .addOption(new Option('--events <n>', 'events generated').default(50_000).argParser(intOption('--events', 1, 1e9)))
      .addOption(new Option('--duration <s>', 'seconds over which events and faults are spread (default: events / 400, at least 60)').argParser(intOption('--duration', 10, 86_400)))
      .addOption(new Option('--workers <n>', 'worker processes').default(3).argParser(intOption('--workers', 1, 64)))
      .addOption(new Option('--partitions <n>', 'partitions of the fresh topic').default(6).argParser(intOption('--partitions', 1, 1000)))
      .addOption(count('--kills', 10, 'SIGKILL a worker, then restart it'))
      .addOption(count('--zombies', 1, 'SIGSTOP a worker past the session timeout, then SIGCONT'))
      .addOption(count('--cassandra-restarts', 1, 'SIGKILL Cassandra (on a cluster stack: one node, down 10-25 s), start it again', 100))
      .addOption(count('--kafka-restarts', 1, 'SIGKILL the Kafka broker (on a cluster stack: in turn the leader of a partition being read and the active controller), start it again', 100))
      .addOption(count('--registry-restarts', 0, "SIGKILL the local stack's Schema Registry, start it again (for a --job reading Avro, Protobuf or JSON Schema)", 100))
      .addOption(count('--cassandra-outages', 0, 'on a 3-node cluster stack: SIGKILL two Cassandra nodes at once (no quorum), start them again', 100))
      .addOption(
        count(
          '--transition-crashes',
          0,
          'SIGKILL Cassandra right after an engine transition, in turn: an assignment, a clean stop, a hand-over, a reset picked up, a rewind (run it on a stack with a long commit log sync: stack up --commitlog-sync-period-ms 60000)',
          100,
        ),
      )
      .addOption(count('--add-remove', 2, 'workers added, and as many removed later', 100))
      .addOption(count('--injections', 3, 'bursts of malformed records', 1000))
      .addOption(new Option('--bad-ratio <r>', 'fraction of malformed records from the generator').default(0.005).argParser(ratioOption('--bad-ratio')))
      .addOption(new Option('--late-ratio <r>', 'fraction of late events (ts up to 30 s in the past)').default(0.02).argParser(ratioOption('--late-ratio')))
      .addOption(new Option('--seed <n>', 'seed of the schedule and the events (default: random, printed)').argParser(intOption('--seed', 0, 2 ** 32 - 1)))
      .addOption(new Option('--session-timeout-ms <ms>', "the workers' group session timeout").default(6000).argParser(intOption('--session-timeout-ms', 1000, 3_600_000)))
      .addOption(new Option('--drain-timeout <s>', 'seconds the workers may take to drain after the faults').default(300).argParser(intOption('--drain-timeout', 10, 86_400)))
      .addOption(new Option('--stack-dir <dir>', 'the local stack whose servers are restarted').env('EXACTLYONCE_STACK_DIR').default(defaultStackOptions().dir, './.stack of the working directory'))
      .addOption(new Option('--layout <layout>', "the workers' events layout: original or bucketed[:N] (run --layout)").default('original'))
      .option('--job <module>', "put this job under chaos instead of the events job: a sink config, or a job module whose audit has sample() (records are its samples; the proof is `verify --job`)")
      .option(
        '--transactional',
        'the generator writes in Kafka transactions (up to 100 records each), as Kafka Streams or Flink with exactly-once on do: two of every three committed, ' +
          'every third and the last one aborted, so the log holds aborted records and transaction markers the workers must step over',
      )
      .option('--keep', 'keep the keyspace, topics and logs after a successful run (a failed run always keeps them)')
      .option('--json', 'also print the figures as one JSON line at the end'),
    ['brokers', 'cassandra', 'datacenter', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const base = connection(cmd);
      const { events, workers, partitions, kills, zombies, cassandraRestarts, kafkaRestarts, cassandraOutages, registryRestarts, transitionCrashes, addRemove, injections, badRatio, lateRatio } = opts;
      // A crashed node replays its commit log; on a busy 2-core machine a cluster node can take over 3 minutes.
      const stack = { ...stackOptionsFrom({ stackDir: opts.stackDir }), startTimeoutMs: 900_000, ...(registryRestarts > 0 ? { schemaRegistry: true } : {}) };
      if (cassandraOutages > 0 && stack.cassandraNodes !== 3) {
        throw new ExactlyOnceError('EO_USAGE', `--cassandra-outages needs a stack of 3 Cassandra nodes (the one at ${stack.dir} has ${stack.cassandraNodes}): exactlyonce stack up --cassandra-nodes 3 --kafka-brokers 3`);
      }
      const o: ChaosOptions = {
        ...{ events, workers, partitions, kills, zombies, cassandraRestarts, kafkaRestarts, cassandraOutages, registryRestarts, transitionCrashes, addRemove, injections, badRatio, lateRatio },
        // A cluster's node is kept down long enough for the others to notice (~10 s) and work without it.
        serverDownMs: isCluster(stack) ? [10_000, 25_000] : [1000, 5000],
        seed: opts.seed ?? Math.floor(Math.random() * 2 ** 32),
        durationMs: (opts.duration ?? Math.max(60, Math.ceil(events / 400))) * 1000,
        sessionTimeoutMs: opts.sessionTimeoutMs,
        drainTimeoutMs: opts.drainTimeout * 1000,
        keep: opts.keep === true,
        rule: alertRuleFrom(opts),
        layout: formatLayout(parseLayout(opts.layout)),
        ...(opts.job === undefined ? {} : { job: opts.job }),
        transactional: opts.transactional === true,
      };
      try {
        return await runChaosAndReport(base, o, opts.json === true, stack);
      } finally {
        // Everything is closed by now; should a client library still hold the event loop open, say
        // what, and exit anyway: a harness that never ends is worse than one that ends abruptly.
        setTimeout(() => {
          process.stderr.write(`chaos: exiting although handles are still open: ${process.getActiveResourcesInfo().join(', ')}\n`);
          process.exit();
        }, 10_000).unref();
      }
    }),
  );
}
