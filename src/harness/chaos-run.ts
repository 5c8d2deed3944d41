/**
 * `exactlyonce chaos` from start to end: prints the seeded schedule and the command that replays it,
 * runs it (src/harness/chaos.ts) with Ctrl-C bringing the servers back, prints the auditor's report and
 * the run's figures (one JSON line too with `json`), and fails unless nothing was violated and the run
 * was clean.
 */
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { isCluster } from '../stack/cluster.js';
import type { StackOptions } from '../stack/index.js';
import { formatReport, verifyFailed } from '../verify/report-text.js';
import { chaosConfig, chaosRate, runChaos, type ChaosOptions } from './chaos.js';
import { describeFault, planChaos } from './chaos-schedule.js';
import { ruleArgs } from './cli-process.js';

function replayCommand(o: ChaosOptions): string {
  return (
    `exactlyonce chaos --seed ${o.seed} --events ${o.events} --duration ${o.durationMs / 1000} --workers ${o.workers} --partitions ${o.partitions} ` +
    `--kills ${o.kills} --zombies ${o.zombies} --cassandra-restarts ${o.cassandraRestarts} --kafka-restarts ${o.kafkaRestarts} ` +
    `${o.cassandraOutages ? `--cassandra-outages ${o.cassandraOutages} ` : ''}${o.transitionCrashes ? `--transition-crashes ${o.transitionCrashes} ` : ''}${o.registryRestarts ? `--registry-restarts ${o.registryRestarts} ` : ''}${o.layout !== undefined && o.layout !== 'original' ? `--layout ${o.layout} ` : ''}${o.transactional === true ? '--transactional ' : ''}--add-remove ${o.addRemove} --injections ${o.injections} --bad-ratio ${o.badRatio} --late-ratio ${o.lateRatio} --session-timeout-ms ${o.sessionTimeoutMs} ` +
    (o.job === undefined ? ruleArgs(o.rule).join(' ') : `--job ${o.job}`)
  );
}

/** Resolves to 0 after a clean run; throws EO_VERIFY_FAILED, naming the seed and the replay command, otherwise. */
export async function runChaosAndReport(base: ConnectionConfig, o: ChaosOptions, json: boolean, stack: StackOptions): Promise<number> {
  const t0 = Date.now();
  const out = (line: string) => process.stdout.write(`[chaos t+${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  const config = chaosConfig(base);
  const plan = planChaos(o);
  const cluster = isCluster(stack) ? { cassandraNodes: stack.cassandraNodes, partitions: o.partitions } : undefined;
  process.stdout.write(
    `chaos seed ${o.seed}: ${o.events.toLocaleString('en-US')} events at ${chaosRate(o)}/s over ${o.durationMs / 1000} s into topic ${config.topic} ` +
      `(${o.partitions} partitions) → keyspace ${config.keyspace}; ${o.workers} workers, session timeout ${o.sessionTimeoutMs} ms\n` +
      (cluster === undefined ? '' : `on the cluster stack at ${stack.dir}: ${stack.cassandraNodes} Cassandra nodes, ${stack.kafkaBrokers} Kafka brokers\n`) +
      `schedule (${plan.length} faults):\n${plan.map((f) => `  ${describeFault(f, cluster)}`).join('\n')}\n` +
      `replay: ${replayCommand(o)}\n`,
  );
  const interrupt = new AbortController();
  const onSignal = () => {
    interrupt.abort();
    out('interrupted: stopping the workers and bringing the servers back');
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  let r: Awaited<ReturnType<typeof runChaos>>;
  try {
    r = await runChaos(config, o, plan, stack, { t0, say: out, signal: interrupt.signal });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
  const { report, problems, warnings, checkpoints: watch } = r;
  process.stdout.write(formatReport(report) + '\n');
  const wallMs = Date.now() - t0;
  const { done, restarted } = r.faults;
  const figures = {
    seed: o.seed,
    events: r.generated,
    injected: r.faults.injected,
    records: report.totals.records,
    faults: {
      kills: done.kill,
      zombies: done.zombie,
      zombiesThatLostPartitions: r.faults.zombiesLost,
      cassandraRestarts: restarted.cassandra,
      kafkaRestarts: restarted.kafka,
      registryRestarts: restarted.registry,
      cassandraOutages: done.outage,
      transitionCrashes: done['crash-at'],
      workersAdded: done['add-worker'],
      workersRemoved: done['remove-worker'],
      malformedBursts: done.inject,
      skipped: done.skipped,
    },
    transitions: r.faults.transitions,
    recoveries: r.faults.recoveries,
    serverCrashes: r.faults.crashes,
    quorumLostLogLines: r.quorumLostLines,
    transactions: r.transactions ?? null,
    checkpointPolls: watch.polls,
    checkpointRegressions: watch.regressions,
    checkpointLosses: watch.losses,
    rewinds: watch.rewinds,
    violations: report.violationTotal,
    problems,
    warnings,
    wallMs,
    verify: { durationMs: report.durationMs, recordsPerSecond: report.recordsPerSecond, peakRssMb: report.peakRssMb, ok: report.ok },
    keyspace: config.keyspace,
    topic: config.topic,
    runDir: r.runDir,
  };
  const f = figures.faults;
  process.stdout.write(
    `chaos seed ${o.seed}: ${(wallMs / 1000).toFixed(1)} s wall time\n` +
      `  records: ${r.generated} generated + ${r.faults.injected} injected malformed; verify checked ${report.totals.records} (${report.totals.quarantined} quarantined)\n` +
      (r.transactions === undefined ? '' : `  transactions: ${r.transactions.committed} committed, ${r.transactions.aborted} aborted (the last one too), ${r.transactions.unknown} of unknown outcome\n`) +
      `  faults: ${f.kills} kills, ${f.zombies} zombies (${f.zombiesThatLostPartitions} lost their partitions), ${f.cassandraRestarts} Cassandra restarts, ${f.kafkaRestarts} Kafka restarts, ${f.registryRestarts > 0 ? `${f.registryRestarts} Schema Registry restarts, ` : ''}` +
      `${f.workersAdded} workers added, ${f.workersRemoved} removed, ${f.malformedBursts} malformed bursts (${f.skipped} skipped)\n` +
      r.faults.transitions.struck.map((x) => `  Cassandra SIGKILLed right after: ${x}\n`).join('') +
      r.faults.transitions.missed.map((x) => `  transition not seen, Cassandra SIGKILLed anyway: ${x}\n`).join('') +
      r.faults.recoveries.map((x) => `  after SIGKILL: ${x}\n`).join('') +
      r.faults.crashes
        .map((c) => `  ${c.what}: down ${(c.downMs / 1000).toFixed(1)} s, back in ${(c.backInMs / 1000).toFixed(1)} s; checkpoints advanced ${c.advancedWhileDown ?? '? (no quorum to read them)'} records meanwhile\n`)
        .join('') +
      (done.outage > 0 ? `  the workers logged EO_CASSANDRA_QUORUM_LOST ${r.quorumLostLines} times in ${done.outage} outages\n` : '') +
      `  checkpoints: ${watch.regressions.length} regressions in ${watch.polls} polls; ${watch.losses.length} went back with a Cassandra crash (acknowledged writes lost), the workers rewound ${watch.rewinds} times\n` +
      `  violations: ${report.violationTotal}; problems: ${problems.length}; warnings: ${warnings.length}\n` +
      problems.map((p) => `    problem: ${p}\n`).join('') +
      warnings.map((w) => `    warning: ${w}\n`).join('') +
      watch.regressions.map((x) => `    checkpoint moved backwards: ${x}\n`).join('') +
      watch.losses.map((x) => `    lost by Cassandra (written again): ${x}\n`).join(''),
  );
  if (json) process.stdout.write(JSON.stringify(figures) + '\n');
  const replay = `; replay: ${replayCommand(o)}; keyspace ${config.keyspace} and topic ${config.topic} kept, logs in ${r.runDir}`;
  if (!report.ok) throw verifyFailed(report, ` (chaos seed ${o.seed}${replay})`);
  if (watch.regressions.length > 0) {
    throw new ExactlyOnceError('EO_VERIFY_FAILED', `a checkpoint moved backwards: ${watch.regressions[0]} (chaos seed ${o.seed}${replay})`);
  }
  if (problems.length > 0) {
    throw new ExactlyOnceError('EO_VERIFY_FAILED', `no violation of exactly-once, but the run was not clean: ${problems[0]} (chaos seed ${o.seed}${replay})`);
  }
  out(`OK: no violation under chaos (seed ${o.seed})`);
  return 0;
}
