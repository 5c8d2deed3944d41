/**
 * One chaos run (`exactlyonce chaos`): on a fresh topic and keyspace, the seeded generator and W real
 * worker processes under a schedule of faults (src/harness/chaos-faults.ts), a live watch that no
 * checkpoint moves backwards, the wait for the workers to drain, and the auditor. What it finds is
 * returned for the command to print; what it made is removed only after a clean run (unless `keep`).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AlertRule } from '../jobs/events/alert-rule.js';
import type { ChaosPlanOptions, Fault } from './chaos-schedule.js';
import { DEFAULT_MAX_RECORD_BYTES } from '../jobs/events/event.js';
import { generate } from '../jobs/events/generator.js';
import { verify, verifyJob, type VerifyRun } from '../verify/run.js';
import { applyJobMigrations, applySchema } from '../cassandra/migrate.js';
import { connect } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import type { Job } from '../engine/job.js';
import { ExactlyOnceError } from '../errors.js';
import { isSinkConfig, loadJobModule } from '../job-loader.js';
import { createLogger } from '../log.js';
import { readSinkConfigFile, sinkConfig } from '../jobs/sink/sink-config.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Producer, TransactionalProducer } from '../kafka/producer.js';
import { stackStatus, type StackOptions } from '../stack/index.js';
import { FaultRunner } from './chaos-faults.js';
import { connectionArgs, connectionEnv, ruleArgs } from './cli-process.js';
import { AckedLedger } from './acked-ledger.js';
import { CheckpointWatch, isDrained, waitDrained, type CheckpointLoss } from './drain.js';
import { producePaced } from './paced-producer.js';
import { sleep } from './sleep.js';
import { TransactionMix } from './transaction-mix.js';
import { WorkerFleet } from './worker-fleet.js';

/** Records per transaction of `chaos --transactional` (at most: the paced producer sends what is due). */
const TRANSACTION_RECORDS = 100;

/** The schedule's counts (seed, duration, workers, faults) and what the run itself needs. */
export interface ChaosOptions extends ChaosPlanOptions {
  events: number;
  partitions: number;
  badRatio: number;
  lateRatio: number;
  drainTimeoutMs: number;
  keep: boolean;
  rule: AlertRule;
  /** The workers' `--layout` (original or bucketed[:N]). */
  layout?: string;
  /**
   * Put this job under chaos instead of the events job (`chaos --job`): a job module whose `audit` has
   * a `sample`, or a sink config. Its workers run on the run's fresh topic (a sink config is copied
   * with that topic; a module gets `--job-option topic=<topic>`).
   */
  job?: string;
  /**
   * The generator writes in transactions (`chaos --transactional`, src/harness/transaction-mix.ts): two
   * of every three committed, every third and the last aborted.
   */
  transactional?: boolean;
}

export interface ChaosOutcome extends Omit<VerifyRun, 'settings'> {
  /** The events job's settings (none for `--job`). */
  settings?: VerifyRun['settings'];
  generated: number;
  faults: FaultRunner;
  /** losses: checkpoints that went back across a Cassandra crash; rewinds: the workers' EO_WRITES_LOST lines. */
  checkpoints: { polls: number; regressions: readonly string[]; losses: readonly string[]; rewinds: number };
  /** What makes the run unclean although nothing was violated (a worker that died, a fault that failed, …). */
  problems: string[];
  /** Lines in which the workers said EO_CASSANDRA_QUORUM_LOST (a cluster's outages: at most one per worker and outage). */
  quorumLostLines: number;
  /** `--transactional`: the generator's transactions by outcome. */
  transactions?: TransactionMix['transactions'];
  /** Worth fixing, but about shutdown, not what was stored: they do not fail the run. */
  warnings: string[];
  runDir: string;
  /** True when nothing was violated and the run was clean (what it made is then removed, unless kept). */
  clean: boolean;
}

/** The base connection with a fresh keyspace, topics and group of the run's own. */
export function chaosConfig(base: ConnectionConfig): ConnectionConfig {
  const s = randomBytes(4).toString('hex');
  return Object.freeze({ ...base, keyspace: `eo_chaos_${s}`, topic: `eo-chaos-${s}`, alertsTopic: `eo-chaos-${s}.alerts`, group: `eo-chaos-${s}` });
}

/**
 * Counts the lines in which the workers said they lost a Cassandra quorum. Each worker must say so
 * at most once per outage (its retries are silent), and some worker must have said so in each run
 * that had outages; otherwise it is a problem of the run. Returns the count.
 */
/** How often the workers rewound a partition after Cassandra lost acknowledged writes (src/engine/lost-writes.ts). */
function lostWritesLines(runDir: string): number {
  let total = 0;
  for (const f of readdirSync(runDir).filter((n) => /^worker-\d+\.log$/.test(n))) {
    total += readFileSync(path.join(runDir, f), 'utf8').split('\n').filter((l) => l.includes('"code":"EO_WRITES_LOST"')).length;
  }
  return total;
}

/**
 * The checkpoints that went back with a Cassandra crash (CheckpointWatch.lossDetails) whose partition
 * no worker rewound or read again after (EO_WRITES_LOST, or a replay after a node went down), nor was
 * assigned from the lowered checkpoint or below.
 */
function undetectedLosses(runDir: string, losses: readonly CheckpointLoss[]): CheckpointLoss[] {
  // After the crash, per partition: the rewinds and replays, and the offsets assignments started at.
  const lines: Array<{ time: number; text: string }> = [];
  for (const f of readdirSync(runDir).filter((n) => /^worker-\d+\.log$/.test(n))) {
    for (const text of readFileSync(path.join(runDir, f), 'utf8').split('\n')) {
      const time = Number(/"time":(\d+)/.exec(text)?.[1] ?? NaN);
      if (Number.isFinite(time)) lines.push({ time, text });
    }
  }
  return losses.filter((loss) =>
    !lines.some(({ time, text }) => {
      if (time < loss.crashAt) return false;
      if (text.includes('"code":"EO_WRITES_LOST"') || text.includes('a Cassandra node went down, and may have forgotten')) return text.includes(`"partition":${loss.partition},`);
      // A worker assigned the partition after the crash started from the lowered checkpoint or below
      // it (`beginning`: the log start, when the crash took the checkpoint row itself): it wrote every
      // record from there, nothing to find.
      const assigned = /"msg":"assigned partitions/.test(text) ? (JSON.parse(text) as { assigned?: Record<string, string> }).assigned?.[String(loss.partition)] : undefined;
      return assigned === 'beginning' || (assigned !== undefined && /^\d+$/.test(assigned) && BigInt(assigned) <= loss.to);
    }),
  );
}

function sayQuorumLost(runDir: string, outages: number, problems: string[]): number {
  let total = 0;
  for (const f of readdirSync(runDir).filter((n) => /^worker-\d+\.log$/.test(n))) {
    const n = readFileSync(path.join(runDir, f), 'utf8').split('\n').filter((l) => l.includes('"code":"EO_CASSANDRA_QUORUM_LOST"')).length;
    if (n > outages) problems.push(`${f} said EO_CASSANDRA_QUORUM_LOST ${n} times in ${outages} outages (once per outage expected)`);
    total += n;
  }
  if (outages > 0 && total === 0) problems.push(`no worker said EO_CASSANDRA_QUORUM_LOST in ${outages} outages`);
  return total;
}

/** Every failure nothing handled (EO_INTERNAL) a worker logged and survived: a bug, as a worker's death would be. */
function internalErrors(runDir: string): string[] {
  return readdirSync(runDir)
    .filter((n) => /^worker-\d+\.log$/.test(n))
    .flatMap((f) =>
      readFileSync(path.join(runDir, f), 'utf8')
        .split('\n')
        .filter((l) => l.includes('"code":"EO_INTERNAL"'))
        .map((l) => `${f}: ${l.slice(0, 1500)}`),
    );
}

/** A sink config as a chaos run uses it: on the run's topic (an aggregate's closed windows on a topic of the run too). */
function runSinkConfig(sink: object, topic: string): object {
  return { ...sink, topic, ...('closeAfter' in sink ? { closedTopic: `${topic}.closed` } : {}) };
}

/** Events per second that spread the events over the run. */
export function chaosRate(o: Pick<ChaosOptions, 'events' | 'durationMs'>): number {
  return Math.max(1, Math.ceil(o.events / (o.durationMs / 1000)));
}

/**
 * Runs `plan`: its faults fall at atMs after the workers were started (the set-up before, a keyspace
 * and two topics, takes ~25 s on a busy 3-node cluster: counted from `t0`, the first faults would fall
 * on workers still starting). `say` gets the progress lines; `signal` interrupts it.
 */
export async function runChaos(
  config: ConnectionConfig,
  o: ChaosOptions,
  plan: readonly Fault[],
  stack: StackOptions,
  run: { t0: number; say: (line: string) => void; signal: AbortSignal },
): Promise<ChaosOutcome> {
  const { say, signal } = run;
  let t0 = run.t0;
  const aborted = () => signal.aborted;
  if (o.cassandraRestarts + o.kafkaRestarts + (o.cassandraOutages ?? 0) + (o.registryRestarts ?? 0) + (o.transitionCrashes ?? 0) > 0) {
    const down = (await stackStatus(stack)).filter((s) => !s.running || !s.ready);
    if (down.length > 0) {
      throw new ExactlyOnceError('EO_USAGE', `chaos restarts the servers of the local stack at ${stack.dir}, but ${down.map((s) => s.name).join(' and ')} is not running there; run \`exactlyonce stack up\`, or pass --cassandra-restarts 0 --kafka-restarts 0`);
    }
  }

  // A sink config with a mistake is refused before anything is made, as the run will use it (below;
  // columns left out are derived later, from the run topic's registered schema).
  if (o.job !== undefined && isSinkConfig(path.resolve(o.job))) {
    const raw = readSinkConfigFile(path.resolve(o.job));
    if (typeof raw === 'object' && raw !== null && 'columns' in raw) sinkConfig(runSinkConfig(raw, config.topic), o.job);
  }

  const runDir = mkdtempSync(path.join(os.tmpdir(), `exactlyonce-chaos-${o.seed}-`));
  const session = await connect(config);
  const admin = new KafkaAdmin(config);
  // On a cluster stack, replicated as widely as it allows (up to 3), so that a node can be lost.
  const rf = { cassandra: Math.min(stack.cassandraNodes, 3), kafka: Math.min(stack.kafkaBrokers, 3) };
  await applySchema(session, config.keyspace, rf.cassandra > 1 ? { class: 'NetworkTopologyStrategy', dataCenters: { [config.datacenter]: rf.cassandra } } : { class: 'SimpleStrategy', replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.topic, partitions: o.partitions, replicationFactor: rf.kafka });
  await admin.ensureTopic({ topic: config.alertsTopic, partitions: o.partitions, replicationFactor: rf.kafka, configs: { 'cleanup.policy': 'compact' } });
  // Admin clients live only as long as one step: none is left connected across the broker restarts.
  await admin.close();
  say(`created keyspace ${config.keyspace}, topics ${config.topic} and ${config.alertsTopic}; logs in ${runDir}`);

  // `--job`: the job, bound to the run's topic, and its own tables.
  let job: Job<unknown> | undefined;
  let workerArgs = [...ruleArgs(o.rule), ...(o.layout === undefined ? [] : ['--layout', o.layout])];
  if (o.job !== undefined) {
    let spec = path.resolve(o.job);
    if (isSinkConfig(spec)) {
      // As written (columns left out are derived again, from the run topic's registered schema).
      const sink = readSinkConfigFile(spec) as object;
      spec = path.join(runDir, 'sink.json');
      writeFileSync(spec, JSON.stringify(runSinkConfig(sink, config.topic), null, 2));
    }
    job = await loadJobModule(spec, { config, options: { topic: config.topic }, log: createLogger('chaos') });
    if (job.audit?.sample === undefined) throw new ExactlyOnceError('EO_USAGE', `--job: job ${job.name} has no audit.sample(): chaos cannot make records for it (it can still be verified)`);
    // What the samples need first (a sink of Avro records registers its schema for the run's topic).
    await job.audit.prepareSample?.();
    const applied = await applyJobMigrations(session, config.keyspace, job.name, job.migrations ?? []);
    // The topics the job publishes to (an aggregate sink's closed windows: compacted, its latest message per key the state).
    if ((job.outputTopics ?? []).length > 0) {
      const outputs = new KafkaAdmin(config);
      try {
        for (const topic of job.outputTopics!) await outputs.ensureTopic({ topic, partitions: o.partitions, replicationFactor: rf.kafka, configs: { 'cleanup.policy': 'compact' } });
      } finally {
        await outputs.close();
      }
    }
    workerArgs = ['--job', spec, '--job-option', `topic=${config.topic}`];
    say(`job ${job.name} (${job.audit.mode} into table ${job.audit.table}); applied ${applied.applied.join(', ') || 'no migration'}`);
  }

  const store = new CheckpointStore(session, config.keyspace, config.topic, job === undefined || job.legacyTables === true ? undefined : job.name);
  const watch = new CheckpointWatch(() => store.readStored(), 250);
  const problems: string[] = [];
  const fleet: WorkerFleet = new WorkerFleet({
    // A worker started while a crashed server replays its log (minutes on a busy machine) waits for it.
    args: [...connectionArgs(config), '--session-timeout-ms', String(o.sessionTimeoutMs), '--max-batch', '500', '--startup-timeout', '900', ...workerArgs],
    env: connectionEnv(config),
    logFile: (id) => path.join(runDir, `worker-${id}.log`),
    say,
    // A worker must survive every fault we inject; one that dies by itself is a finding.
    onUnexpectedExit: (w, how) => {
      say(`worker#${w.id} exited by itself (${how}); starting a replacement — see ${w.logFile}`);
      void fleet.startAfter(1000);
    },
  });
  // No delivery timeout short of 10 minutes: records wait through broker restarts. (The malformed
  // bursts are sent with it also when the generator writes in transactions: records of a plain producer
  // between transactional ones.)
  const producer = new Producer(config, { 'message.timeout.ms': 600_000 });
  const transactional = o.transactional === true ? new TransactionalProducer(config, `${config.topic}-generator`) : undefined;
  const mix = transactional === undefined ? undefined : new TransactionMix(transactional);
  // Every record acknowledged, by partition and offset: a shortfall in the log is then named (see below).
  const acked = new AckedLedger();
  producer.onDelivered = (topic, partition, offset) => {
    if (topic === config.topic) acked.add(partition, offset);
  };
  const progress = async (): Promise<number | null> => {
    try {
      return [...(await store.readAll()).values()].reduce((a, b) => a + Number(b), 0);
    } catch {
      return null;
    }
  };
  let generating = true;
  // The `reset` transition: a partition reset in place (same offset, next epoch), as `checkpoints reset` writes it.
  // The harness's session may still be reconnecting to a Cassandra just started again: retried for a minute.
  const resetInPlace = async (): Promise<number | null> => {
    for (let tries = 1; ; tries++) {
      try {
        const stored = await store.readStored();
        const [p, c] = [...stored].sort(([a], [b]) => a - b)[Math.floor(stored.size / 2)] ?? [];
        if (p === undefined || c === undefined) return null;
        await store.reset(p, c.next, c.epoch);
        return p;
      } catch (e) {
        if (tries >= 60 || aborted()) throw e;
        await sleep(1000, signal);
      }
    }
  };
  const faults = new FaultRunner({ fleet, stack, producer, topic: config.topic, seed: o.seed, problems, say, aborted, config, partitions: o.partitions, progress, producing: () => generating, onCassandraKilled: () => watch.storeCrashed(), resetInPlace });
  let clean = false;
  try {
    for (let i = 0; i < o.workers; i++) fleet.start();
    t0 = Date.now();
    await producer.connect();
    let generated = 0;
    // The generator's seeded stream, produced in-process rather than by `exactlyonce generate` so that
    // a record waits through a long broker restart (over a minute on a 2-core machine) instead of
    // timing out after 60 s. The producer is idempotent, so its retries add no duplicates.
    const stream = (seed: number, count: number) =>
      job?.audit?.sample !== undefined
        ? job.audit.sample({ seed, count, badRatio: o.badRatio })
        : generate({ eventsPerKey: 0, count, clients: 12, sources: 3, healthMix: [50, 20, 30], badRatio: o.badRatio, lateRatio: o.lateRatio, lateByMs: 20_000, seed });
    const records = stream(o.seed, o.events);
    // In transactions: one at a time, each what is due (up to TRANSACTION_RECORDS records).
    const paced = mix === undefined ? { chunk: 500, inFlight: 8 } : { chunk: TRANSACTION_RECORDS, inFlight: 1 };
    const generator = async () => {
      const n = await producePaced(mix ?? producer, records, { topic: config.topic, rate: chaosRate(o), ...paced, signal });
      if (mix !== undefined && !aborted()) await mix.endAborted(config.topic, [...stream(o.seed + 1, TRANSACTION_RECORDS)]);
      return n;
    };
    const producing = generator().then(
      (n) => {
        if (mix !== undefined) {
          const t = mix.transactions;
          say(`generator finished: ${mix.committedRecords} events committed in ${t.committed} transactions; ${t.aborted} transactions aborted (the last one too), ${t.unknown} of unknown outcome`);
          n = mix.committedRecords;
        } else {
          say(`generator finished: ${n} events acknowledged`);
        }
        generating = false;
        generated = n;
      },
      (e: unknown) => {
        generating = false;
        problems.push(`the generator failed: ${(e as Error).message}`);
        say(`generator failed: ${(e as Error).message}`);
      },
    );

    for (const f of plan) {
      await sleep(t0 + f.atMs - Date.now(), signal);
      if (aborted()) break;
      faults.apply(f);
    }
    await producing;
    await faults.settled();
    await producer.close();
    await transactional?.close();

    const admin = new KafkaAdmin(config);
    const drain = () => waitDrained(() => admin.watermarks(config.topic), () => store.readAll(), { timeoutMs: o.drainTimeoutMs, intervalMs: 1000 });
    let drained: Awaited<ReturnType<typeof drain>>;
    try {
      if (!aborted()) {
        if (fleet.running().length === 0) fleet.start();
        say('faults done; waiting for the workers to drain');
        drained = await drain();
        if (drained === undefined) problems.push(`the workers did not drain within ${o.drainTimeoutMs / 1000} s (verify reports the lag)`);
        else say('drained: every checkpoint is at the end of what can be read (the last stable offset)');
      }
      await fleet.close(aborted());
      // Stopping the workers hands partitions over among them; a worker given one just before its own
      // SIGTERM may move its checkpoint back to replay what a recent Cassandra crash could have taken
      // (LostWrites.resume) and stop before reading it again (a worker already stopping plans nothing).
      // The rows stay and the next owner reads them again, so one worker, stopped alone (no
      // hand-over), drains what is left before verify.
      if (!aborted() && drained !== undefined) {
        const marks = await admin.watermarks(config.topic);
        if (!isDrained(marks, await store.readAll())) {
          say('a checkpoint moved back while the workers stopped (a crash replay at a hand-over); one worker drains it');
          fleet.start();
          if ((await drain()) === undefined) problems.push(`the last worker did not drain within ${o.drainTimeoutMs / 1000} s (verify reports the lag)`);
          await fleet.close(aborted());
        }
      }
    } finally {
      await admin.close();
    }
    await watch.stop();
    if (aborted()) throw new ExactlyOnceError('EO_USAGE', `chaos interrupted (seed ${o.seed}); keyspace ${config.keyspace} and topic ${config.topic} kept`);

    say('running verify');
    const audit: Omit<VerifyRun, 'settings'> =
      job !== undefined ? await verifyJob(config, job, { record: true, full: true }) : await verify(config, { rule: o.rule, checkAlerts: true, maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, record: true, full: true });
    if (audit.recorded !== null && 'error' in audit.recorded) problems.push(`the audit run was not recorded: ${audit.recorded.error}`);
    const produced = generated + faults.injected;
    // A transaction whose commit was cut short may or may not have been committed.
    const uncertain = mix?.uncertainRecords ?? 0;
    if (audit.report.totals.records < produced || audit.report.totals.records > produced + uncertain) {
      problems.push(`the topic holds ${audit.report.totals.records} records below the checkpoints, ${produced} were produced${uncertain > 0 ? ` (and ${uncertain} in transactions of unknown outcome)` : ''}`);
    }
    // Which count is wrong: the delivery reports against the harness's count, then partition by
    // partition against the log (an acknowledged offset the log lacks is Kafka's loss, with evidence).
    // Not with --transactional: the generator's records go through the transactional producer, whose
    // delivery reports include the aborted ones; the range check above is the account then.
    if (mix === undefined) {
      if (acked.total !== produced) problems.push(`the brokers acknowledged ${acked.total} records by delivery report, the harness counted ${produced}`);
      const held = new Map(audit.report.partitions.map((p) => [p.partition, { records: p.records, end: BigInt(p.logEnd) }]));
      if (audit.report.partitions.every((p) => p.checkpoint === p.logEnd)) problems.push(...acked.compare(held));
    }
    problems.push(...fleet.unexpectedExits);
    problems.push(...internalErrors(runDir));
    const quorumLostLines = sayQuorumLost(runDir, o.cassandraOutages ?? 0, problems);
    const checkpoints = { polls: watch.polls, regressions: watch.regressions, losses: watch.losses, rewinds: lostWritesLines(runDir) };
    // Not every loss needs finding: a worker that held nothing beyond the lowered checkpoint when the
    // crash came (its batches still retrying) simply goes on from it, and verify is the judge of that.
    // One that nobody rewound nor planned from is worth a look all the same.
    const unexplained = undetectedLosses(runDir, watch.lossDetails).map(
      (l) => `a checkpoint went back with a Cassandra crash (partition ${l.partition} to ${l.to}) and no worker rewound the partition or was assigned it from there (verify judges whether anything went missing)`,
    );
    clean = audit.report.ok && watch.regressions.length === 0 && problems.length === 0;
    return { ...audit, generated, faults, checkpoints, quorumLostLines, ...(mix === undefined ? {} : { transactions: mix.transactions }), problems, warnings: [...fleet.badStops, ...unexplained], runDir, clean };
  } finally {
    await fleet.close(true);
    await watch.stop();
    await faults.bringBack();
    await producer.close().catch(() => undefined);
    await transactional?.close().catch(() => undefined);
    if (clean && !o.keep) {
      await session.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
      const cleanup = new KafkaAdmin(config);
      await cleanup.deleteTopic(config.topic).catch(() => undefined);
      await cleanup.deleteTopic(config.alertsTopic).catch(() => undefined);
      for (const topic of job?.outputTopics ?? []) await cleanup.deleteTopic(topic).catch(() => undefined);
      await cleanup.close();
      rmSync(runDir, { recursive: true, force: true });
    }
    await session.shutdown().catch(() => undefined);
  }
}
