/**
 * `exactlyonce chaos`: does its worst to a pipeline, then proves it with `verify`. On a fresh topic and
 * keyspace it runs the generator and W real worker processes (`exactlyonce run`) and applies a seeded
 * schedule of faults, printed first (src/app/audit/chaos-schedule.ts): SIGKILL + restart, workers
 * added and removed, a worker SIGSTOPped past its session timeout and SIGCONTed (a zombie), Cassandra
 * and Kafka restarted (through the local stack), bursts of malformed records. It watches that no
 * checkpoint ever moves backwards, waits for the workers to drain, stops them, and runs the auditor.
 * Exit 0 only when no violation was found and the run was clean; the seed is printed to replay it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import type { AlertRule } from '../app/alert-rule.js';
import { describeFault, malformedRecords, planChaos, type Fault, type ServerName } from '../app/audit/chaos-schedule.js';
import { DEFAULT_MAX_RECORD_BYTES } from '../app/event.js';
import { verify } from '../app/verify.js';
import { formatReport, verifyFailed } from '../format/audit-report.js';
import { generate } from '../app/generator.js';
import { applySchema } from '../cassandra/migrate.js';
import { connect, type Client } from '../cassandra/session.js';
import { intOption, loadConnectionConfig, type ConnectionConfig } from '../config.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Producer, type OutgoingRecord } from '../kafka/producer.js';
import { startServer, stackStatus, stopServer, type StackOptions } from '../stack/index.js';
import { alertRuleFrom, withAlertRule } from './alert-flags.js';
import { action, withConnection } from './common.js';
import { stackOptionsFrom } from './stack-flags.js';

const cliPath = fileURLToPath(new URL('../../bin/exactlyonce', import.meta.url));
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

interface ChaosOptions {
  events: number;
  workers: number;
  partitions: number;
  kills: number;
  zombies: number;
  cassandraRestarts: number;
  kafkaRestarts: number;
  addRemove: number;
  injections: number;
  badRatio: number;
  lateRatio: number;
  seed: number;
  durationMs: number;
  sessionTimeoutMs: number;
  drainTimeoutMs: number;
  keep: boolean;
  json: boolean;
  rule: AlertRule;
}

// ---------------------------------------------------------------------------------------------
// Worker processes

/** `waking`: a zombie just resumed, left alone for a while so that we see it find its partitions gone. */
type WorkerState = 'running' | 'paused' | 'waking' | 'killed' | 'stopping' | 'exited';

interface WorkerProc {
  readonly id: number;
  readonly child: ChildProcess;
  readonly logFile: string;
  state: WorkerState;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

class WorkerPool {
  private readonly workers = new Map<number, WorkerProc>();
  private nextId = 1;
  private closing = false;
  /** Replacements still to start (after a kill, or after a worker exited by itself). */
  private restarting = 0;
  readonly unexpectedExits: string[] = [];
  readonly badStops: string[] = [];

  constructor(
    private readonly args: string[],
    private readonly runDir: string,
    private readonly say: (line: string) => void,
  ) {}

  start(): WorkerProc {
    const id = this.nextId++;
    const logFile = path.join(this.runDir, `worker-${id}.log`);
    const fd = openSync(logFile, 'a');
    const child = spawn(cliPath, ['run', ...this.args], { stdio: ['ignore', fd, fd], env: { ...process.env, EXACTLYONCE_LOG_FORMAT: 'json' } });
    closeSync(fd);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const w: WorkerProc = { id, child, logFile, state: 'running', exited };
    this.workers.set(id, w);
    void exited.then(({ code, signal }) => {
      const was = w.state;
      w.state = 'exited';
      this.workers.delete(id);
      if (was === 'running' || was === 'paused' || was === 'waking') {
        // A worker must survive every fault we inject; one that dies by itself is a finding.
        const tail = readFileSync(logFile, 'utf8').trim().split('\n').slice(-3).join(' | ');
        this.unexpectedExits.push(`worker#${id} (pid ${child.pid}) exited by itself with ${signal ?? `code ${code}`}: ${tail.slice(0, 600)}`);
        this.say(`worker#${id} exited by itself (${signal ?? `code ${code}`}); starting a replacement — see ${logFile}`);
        if (!this.closing) void this.startAfter(1000);
      } else if (was === 'stopping' && code !== 0) {
        this.badStops.push(`worker#${id} (pid ${child.pid}) stopped with ${signal ?? `code ${code}`} after SIGTERM; see ${logFile}`);
      }
    });
    this.say(`started worker#${id} (pid ${child.pid})`);
    return w;
  }

  /** Starts a replacement worker `ms` from now (not if `cancelled` by then, nor once the pool closes); counted meanwhile. */
  async startAfter(ms: number, cancelled: () => boolean = () => false): Promise<void> {
    this.restarting++;
    try {
      await sleep(ms);
    } finally {
      this.restarting--;
    }
    if (!this.closing && !cancelled()) this.start();
  }

  running(): WorkerProc[] {
    return [...this.workers.values()].filter((w) => w.state === 'running');
  }

  /**
   * Waits until at least `n` workers run while others are on their way back (a replacement still to
   * start, a zombie frozen or waking), so that a fault planned for a worker finds one; false when no
   * more are coming, at the deadline, or when the pool closes.
   */
  async awaitRunning(n: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.running().length >= n) return true;
      const coming = this.restarting > 0 || [...this.workers.values()].some((w) => w.state === 'paused' || w.state === 'waking');
      if (!coming || this.closing || Date.now() > deadline) return false;
      await sleep(100);
    }
  }

  /** A running worker drawn by `p` (0..1); with `started`, preferably one that has joined the group. */
  pick(p: number, started = false): WorkerProc | undefined {
    let r = this.running();
    if (started) {
      const joined = r.filter((w) => readFileSync(w.logFile, 'utf8').includes('"msg":"worker started"'));
      if (joined.length > 0) r = joined;
    }
    return r[Math.min(r.length - 1, Math.floor(p * r.length))];
  }

  /** A running worker that owns partitions (its log says so), drawn by `p`; waits up to `timeoutMs` for one. */
  async pickOwner(p: number, timeoutMs: number): Promise<WorkerProc | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const owners = this.running().filter((w) => readFileSync(w.logFile, 'utf8').includes('"msg":"assigned partitions'));
      if (owners.length > 0) return owners[Math.min(owners.length - 1, Math.floor(p * owners.length))];
      if (Date.now() > deadline || this.closing) return undefined;
      await sleep(500);
    }
  }

  kill(w: WorkerProc): void {
    w.state = 'killed';
    w.child.kill('SIGKILL');
  }

  /**
   * SIGTERM, then SIGKILL if it has not left after `graceMs`. A worker still starting (no signal
   * handler yet on a loaded machine) is first given up to a minute to join, as a user would wait.
   */
  async stop(w: WorkerProc, graceMs = 30_000): Promise<void> {
    if (w.state === 'exited') return;
    if (w.state === 'paused') w.child.kill('SIGCONT');
    w.state = 'stopping';
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && !readFileSync(w.logFile, 'utf8').includes('"msg":"worker started"')) {
      if ((await Promise.race([w.exited.then(() => true), sleep(250).then(() => false)])) === true) return;
    }
    w.child.kill('SIGTERM');
    const timer = setTimeout(() => w.child.kill('SIGKILL'), graceMs);
    await w.exited;
    clearTimeout(timer);
  }

  /** Stops every worker (SIGTERM, in parallel); `kill` for an abort. */
  async close(kill = false): Promise<void> {
    this.closing = true;
    const all = [...this.workers.values()];
    if (kill) {
      for (const w of all) {
        w.state = 'killed';
        w.child.kill('SIGCONT');
        w.child.kill('SIGKILL');
      }
      await Promise.all(all.map((w) => w.exited));
    } else {
      await Promise.all(all.map((w) => this.stop(w)));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Invariant 2, watched live: no checkpoint ever moves backwards.

class CheckpointWatch {
  private readonly highest = new Map<number, bigint>();
  readonly regressions: string[] = [];
  polls = 0;
  private running = true;
  private readonly loop: Promise<void>;

  constructor(store: CheckpointStore) {
    this.loop = (async () => {
      while (this.running) {
        try {
          for (const [p, o] of await store.readAll()) {
            const prev = this.highest.get(p);
            if (prev !== undefined && o < prev) this.regressions.push(`partition ${p}: checkpoint ${prev} -> ${o}`);
            if (prev === undefined || o > prev) this.highest.set(p, o);
          }
          this.polls++;
        } catch {
          // Cassandra may be restarting.
        }
        await sleep(250);
      }
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

// ---------------------------------------------------------------------------------------------

function chaosNames(): Pick<ConnectionConfig, 'keyspace' | 'topic' | 'alertsTopic' | 'group'> {
  const s = randomBytes(4).toString('hex');
  return { keyspace: `eo_chaos_${s}`, topic: `eo-chaos-${s}`, alertsTopic: `eo-chaos-${s}.alerts`, group: `eo-chaos-${s}` };
}

function connectionArgs(c: ConnectionConfig): string[] {
  const args = ['--brokers', c.brokers.join(','), '--cassandra', c.cassandra.join(','), '--datacenter', c.datacenter, '--keyspace', c.keyspace, '--topic', c.topic, '--alerts-topic', c.alertsTopic, '--group', c.group];
  for (const [k, v] of Object.entries(c.kafkaConfig)) args.push('--kafka-config', `${k}=${v}`);
  if (c.cassandraUsername !== undefined) args.push('--cassandra-username', c.cassandraUsername, '--cassandra-password', c.cassandraPassword ?? '');
  return args;
}

function ruleArgs(r: AlertRule): string[] {
  return ['--window-ms', String(r.windows.sizeMs), '--slide-ms', String(r.windows.slideMs), '--threshold', String(r.threshold), '--alert-health', String(r.health)];
}

function replayCommand(o: ChaosOptions): string {
  return (
    `exactlyonce chaos --seed ${o.seed} --events ${o.events} --duration ${o.durationMs / 1000} --workers ${o.workers} --partitions ${o.partitions} ` +
    `--kills ${o.kills} --zombies ${o.zombies} --cassandra-restarts ${o.cassandraRestarts} --kafka-restarts ${o.kafkaRestarts} ` +
    `--add-remove ${o.addRemove} --injections ${o.injections} --bad-ratio ${o.badRatio} --late-ratio ${o.lateRatio} --session-timeout-ms ${o.sessionTimeoutMs} ${ruleArgs(o.rule).join(' ')}`
  );
}

/**
 * The generator's seeded stream (src/app/generator.ts), paced at `rate` events/s. Produced in-process
 * rather than by `exactlyonce generate` so that a record waits through a long broker restart (a
 * Kafka restart on this 2-core machine can take over a minute) instead of timing out after 60 s.
 * The producer is idempotent, so its retries add no duplicates. Resolves with the records acknowledged.
 */
async function produceEvents(producer: Producer, topic: string, o: ChaosOptions, rate: number, aborted: () => boolean): Promise<number> {
  const records = generate({
    eventsPerKey: 0,
    count: o.events,
    clients: 12,
    sources: 3,
    healthMix: [50, 20, 30],
    badRatio: o.badRatio,
    lateRatio: o.lateRatio,
    lateByMs: 20_000,
    seed: o.seed,
  });
  const started = Date.now();
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  let acked = 0;
  let chunk: OutgoingRecord[] = [];
  const flush = async () => {
    if (chunk.length === 0) return;
    const batch = chunk;
    chunk = [];
    const p = producer.send(topic, batch).then(
      () => void (acked += batch.length),
      (e: unknown) => void (failure ??= e),
    );
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    if (inFlight.size >= 8) await Promise.race(inFlight);
  };
  let i = 0;
  for (const r of records) {
    if (failure !== undefined || aborted()) break;
    chunk.push({ key: r.key, value: r.value });
    i++;
    const due = started + (i / rate) * 1000;
    if (chunk.length >= 500 || due - Date.now() > 20) {
      await flush();
      await sleep(due - Date.now());
    }
  }
  await flush();
  await Promise.all([...inFlight]);
  if (failure !== undefined) throw failure;
  return acked;
}

/** Waits until every partition's checkpoint is at its log end; false at the deadline. */
async function waitDrained(config: ConnectionConfig, store: CheckpointStore, timeoutMs: number): Promise<boolean> {
  const admin = new KafkaAdmin(config);
  const deadline = Date.now() + timeoutMs;
  try {
    while (Date.now() < deadline) {
      try {
        const marks = await admin.watermarks(config.topic);
        const cps = await store.readAll();
        if (marks.every((w) => w.high === w.low || cps.get(w.partition) === w.high)) return true;
      } catch {
        // a server still coming back
      }
      await sleep(1000);
    }
    return false;
  } finally {
    await admin.close();
  }
}

async function runChaos(base: ConnectionConfig, o: ChaosOptions, stack: StackOptions): Promise<number> {
  const t0 = Date.now();
  const out = (line: string) => process.stdout.write(`[chaos t+${((Date.now() - t0) / 1000).toFixed(1).padStart(6)}s] ${line}\n`);
  const config = loadConnectionConfig({
    brokers: base.brokers.join(','),
    cassandra: base.cassandra.join(','),
    datacenter: base.datacenter,
    kafkaConfig: Object.entries(base.kafkaConfig).map(([k, v]) => `${k}=${v}`),
    cassandraUsername: base.cassandraUsername,
    cassandraPassword: base.cassandraPassword,
    ...chaosNames(),
  });
  const plan = planChaos({ ...o, durationMs: o.durationMs });
  const rate = Math.max(1, Math.ceil(o.events / (o.durationMs / 1000)));
  process.stdout.write(
    `chaos seed ${o.seed}: ${o.events.toLocaleString('en-US')} events at ${rate}/s over ${o.durationMs / 1000} s into topic ${config.topic} ` +
      `(${o.partitions} partitions) → keyspace ${config.keyspace}; ${o.workers} workers, session timeout ${o.sessionTimeoutMs} ms\n` +
      `schedule (${plan.length} faults):\n${plan.map((f) => `  ${describeFault(f)}`).join('\n')}\n` +
      `replay: ${replayCommand(o)}\n`,
  );

  if (o.cassandraRestarts + o.kafkaRestarts > 0) {
    const status = await stackStatus(stack);
    const down = status.filter((s) => !s.running || !s.ready);
    if (down.length > 0) {
      throw new ExactlyOnceError('EO_USAGE', `chaos restarts the servers of the local stack at ${stack.dir}, but ${down.map((s) => s.name).join(' and ')} is not running there; run \`exactlyonce stack up\`, or pass --cassandra-restarts 0 --kafka-restarts 0`);
    }
  }

  const runDir = mkdtempSync(path.join(os.tmpdir(), `exactlyonce-chaos-${o.seed}-`));
  const session: Client = await connect(config);
  const admin = new KafkaAdmin(config);
  await applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.topic, partitions: o.partitions, replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.alertsTopic, partitions: o.partitions, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } });
  await admin.close();
  out(`created keyspace ${config.keyspace}, topics ${config.topic} and ${config.alertsTopic}; logs in ${runDir}`);

  const store = new CheckpointStore(session, config.keyspace, config.topic);
  const watch = new CheckpointWatch(store);
  const pool = new WorkerPool([...connectionArgs(config), '--session-timeout-ms', String(o.sessionTimeoutMs), '--max-batch', '500', ...ruleArgs(o.rule)], runDir, out);
  const stopped = new Set<ServerName>();
  const problems: string[] = [];
  const done: Record<Fault['kind'] | 'skipped', number> = { kill: 0, 'add-worker': 0, 'remove-worker': 0, zombie: 0, restart: 0, inject: 0, skipped: 0 };
  const restarted: Record<ServerName, number> = { kafka: 0, cassandra: 0 };
  let injected = 0;
  let aborted = false;
  let zombiesLost = 0;
  const onSignal = () => {
    aborted = true;
    out('interrupted: stopping the workers and bringing the servers back');
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const episodes = new Set<Promise<void>>();
  const episode = (p: Promise<void>) => {
    const e = p.catch((err: unknown) => void problems.push(`fault failed: ${(err as Error).message}`)).finally(() => episodes.delete(e));
    episodes.add(e);
  };
  /** Server restarts and zombies run one at a time, in schedule order. */
  let steady: Promise<void> = Promise.resolve();
  let ok = false;

  try {
    for (let i = 0; i < o.workers; i++) pool.start();
    // No delivery timeout short of 10 minutes: records wait through broker restarts.
    const producer = new Producer(config, { 'message.timeout.ms': 600_000 });
    await producer.connect();
    let generated = 0;
    const producing = produceEvents(producer, config.topic, o, rate, () => aborted).then(
      (n) => {
        generated = n;
        out(`generator finished: ${n} events acknowledged`);
      },
      (e: unknown) => {
        problems.push(`the generator failed: ${(e as Error).message}`);
        out(`generator failed: ${(e as Error).message}`);
      },
    );

    // The schedule.
    for (const f of plan) {
      await sleep(t0 + f.atMs - Date.now());
      if (aborted) break;
      switch (f.kind) {
        // The schedule leaves a kill a running worker and a removal two (planChaos); should the pool
        // be short at the moment all the same (timers drift, a zombie is frozen), the fault waits for
        // the workers on their way back rather than being skipped.
        case 'kill': {
          const kill = (w: WorkerProc) => {
            pool.kill(w);
            out(`SIGKILL worker#${w.id} (pid ${w.child.pid})`);
            done.kill++;
            episode(pool.startAfter(f.restartAfterMs, () => aborted));
          };
          if (pool.running().length > 0) {
            kill(pool.pick(f.pick)!);
            break;
          }
          out('no running worker to kill yet; waiting for one to come back');
          episode(
            pool.awaitRunning(1, 120_000).then((ok) => {
              if (ok && !aborted) return kill(pool.pick(f.pick)!);
              done.skipped++;
              out('no running worker to kill; skipped');
            }),
          );
          break;
        }
        case 'add-worker':
          pool.start();
          done['add-worker']++;
          break;
        case 'remove-worker': {
          const remove = (w: WorkerProc) => {
            out(`SIGTERM worker#${w.id} (a clean leave)`);
            done['remove-worker']++;
            episode(pool.stop(w));
          };
          if (pool.running().length > 1) {
            remove(pool.pick(f.pick, true)!);
            break;
          }
          out('only one worker running; the remove waits for another to come back');
          episode(
            pool.awaitRunning(2, 120_000).then((ok) => {
              if (ok && !aborted) return remove(pool.pick(f.pick, true)!);
              done.skipped++;
              out('only one worker running; remove skipped');
            }),
          );
          break;
        }
        case 'zombie': {
          done.zombie++;
          // A zombie proves something only if it owns partitions when it freezes (so wait for such a
          // worker) and if the broker is up to expire its session (so never during a server restart).
          const run = steady.then(async () => {
            const w = await pool.pickOwner(f.pick, 60_000);
            if (w === undefined) {
              done.zombie--;
              done.skipped++;
              out('no worker owns partitions; zombie skipped');
              return;
            }
            const logFrom = statSync(w.logFile).size;
            w.state = 'paused';
            w.child.kill('SIGSTOP');
            out(`SIGSTOP worker#${w.id} for ${(f.pauseMs / 1000).toFixed(1)} s (a zombie)`);
            await sleep(f.pauseMs);
            if (w.state !== 'paused') return;
            w.state = 'waking';
            w.child.kill('SIGCONT');
            out(`SIGCONT worker#${w.id}: it wakes with batches in flight for partitions it lost`);
            // Left alone (no kill, no SIGTERM) until it noticed; its log must say it lost them.
            const deadline = Date.now() + 30_000;
            let lost = false;
            while (!lost && Date.now() < deadline && w.state === 'waking') {
              await sleep(500);
              const log = readFileSync(w.logFile).subarray(logFrom).toString('utf8');
              lost = /"msg":"(lost|revoked) partitions/.test(log);
            }
            if (lost) zombiesLost++;
            else problems.push(`zombie worker#${w.id} did not report losing its partitions within 30 s of waking; see ${w.logFile}`);
            out(`worker#${w.id} ${lost ? 'found its partitions gone' : 'did NOT report losing its partitions'}`);
            if (w.state === 'waking') w.state = 'running';
          });
          steady = run.catch(() => undefined);
          episode(run);
          break;
        }
        case 'restart': {
          done.restart++;
          const run = steady.then(async () => {
            out(`stopping ${f.server}`);
            stopped.add(f.server);
            if (!(await stopServer(stack, f.server))) throw new Error(`${f.server} was not running in the stack at ${stack.dir}`);
            out(`${f.server} stopped; down for ${(f.downMs / 1000).toFixed(1)} s`);
            await sleep(f.downMs);
            await startServer(stack, f.server);
            stopped.delete(f.server);
            restarted[f.server]++;
            out(`${f.server} is back`);
          });
          steady = run.catch(() => undefined);
          episode(run);
          break;
        }
        case 'inject': {
          const records = malformedRecords(f.count, o.seed + f.atMs);
          done.inject++;
          episode(
            (async () => {
              await producer.connect();
              await producer.send(config.topic, records);
              injected += records.length;
              out(`injected ${records.length} malformed records`);
            })(),
          );
          break;
        }
      }
    }
    await producing;
    while (episodes.size > 0) await Promise.all([...episodes]);
    await producer.close();

    if (!aborted) {
      if (pool.running().length === 0) pool.start();
      out('faults done; waiting for the workers to drain');
      const drained = await waitDrained(config, store, o.drainTimeoutMs);
      if (!drained) problems.push(`the workers did not drain within ${o.drainTimeoutMs / 1000} s (verify reports the lag)`);
      else out('drained: every checkpoint is at its log end');
    }
    await pool.close(aborted);
    await watch.stop();
    if (aborted) throw new ExactlyOnceError('EO_USAGE', `chaos interrupted (seed ${o.seed}); keyspace ${config.keyspace} and topic ${config.topic} kept`);

    out('running verify');
    const { report, recorded } = await verify(config, { rule: o.rule, checkAlerts: true, maxRecordBytes: DEFAULT_MAX_RECORD_BYTES, record: true });
    process.stdout.write(formatReport(report) + '\n');
    if (recorded !== null && 'error' in recorded) problems.push(`the audit run was not recorded: ${recorded.error}`);
    const produced = generated + injected;
    if (report.totals.records !== produced) {
      problems.push(`the topic holds ${report.totals.records} records below the checkpoints, ${produced} were produced`);
    }
    problems.push(...pool.unexpectedExits);
    // A worker that needs SIGKILL to leave after SIGTERM, or leaves with an error, is worth fixing
    // (listed), but it concerns shutdown, not what was stored, so it does not fail the run.
    const warnings = [...pool.badStops];
    const wallMs = Date.now() - t0;
    const figures = {
      seed: o.seed,
      events: generated,
      injected,
      records: report.totals.records,
      faults: {
        kills: done.kill,
        zombies: done.zombie,
        zombiesThatLostPartitions: zombiesLost,
        cassandraRestarts: restarted.cassandra,
        kafkaRestarts: restarted.kafka,
        workersAdded: done['add-worker'],
        workersRemoved: done['remove-worker'],
        malformedBursts: done.inject,
        skipped: done.skipped,
      },
      checkpointPolls: watch.polls,
      checkpointRegressions: watch.regressions,
      violations: report.violationTotal,
      problems,
      warnings,
      wallMs,
      verify: { durationMs: report.durationMs, recordsPerSecond: report.recordsPerSecond, peakRssMb: report.peakRssMb, ok: report.ok },
      keyspace: config.keyspace,
      topic: config.topic,
      runDir,
    };
    const f = figures.faults;
    process.stdout.write(
      `chaos seed ${o.seed}: ${(wallMs / 1000).toFixed(1)} s wall time\n` +
        `  records: ${generated} generated + ${injected} injected malformed; verify checked ${report.totals.records} (${report.totals.quarantined} quarantined)\n` +
        `  faults: ${f.kills} kills, ${f.zombies} zombies (${f.zombiesThatLostPartitions} lost their partitions), ${f.cassandraRestarts} Cassandra restarts, ${f.kafkaRestarts} Kafka restarts, ` +
        `${f.workersAdded} workers added, ${f.workersRemoved} removed, ${f.malformedBursts} malformed bursts (${f.skipped} skipped)\n` +
        `  checkpoints: ${watch.regressions.length} regressions in ${watch.polls} polls\n` +
        `  violations: ${report.violationTotal}; problems: ${problems.length}; warnings: ${warnings.length}\n` +
        problems.map((p) => `    problem: ${p}\n`).join('') +
        warnings.map((w) => `    warning: ${w}\n`).join('') +
        watch.regressions.map((r) => `    checkpoint moved backwards: ${r}\n`).join(''),
    );
    if (o.json) process.stdout.write(JSON.stringify(figures) + '\n');
    const replay = `; replay: ${replayCommand(o)}; keyspace ${config.keyspace} and topic ${config.topic} kept, logs in ${runDir}`;
    if (!report.ok) throw verifyFailed(report, ` (chaos seed ${o.seed}${replay})`);
    if (watch.regressions.length > 0) {
      throw new ExactlyOnceError('EO_VERIFY_FAILED', `a checkpoint moved backwards: ${watch.regressions[0]} (chaos seed ${o.seed}${replay})`);
    }
    if (problems.length > 0) {
      throw new ExactlyOnceError('EO_VERIFY_FAILED', `no violation of exactly-once, but the run was not clean: ${problems[0]} (chaos seed ${o.seed}${replay})`);
    }
    ok = true;
    out(`OK: no violation under chaos (seed ${o.seed})`);
    return 0;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await pool.close(true);
    await watch.stop();
    await Promise.all([...episodes]).catch(() => undefined);
    // Never leave the shared stack down, whatever happened.
    for (const s of stopped) await startServer(stack, s).catch((e: unknown) => out(`could not start ${s} again: ${(e as Error).message}`));
    if (ok && !o.keep) {
      await session.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
      const cleanup = new KafkaAdmin(config);
      await cleanup.deleteTopic(config.topic).catch(() => undefined);
      await cleanup.deleteTopic(config.alertsTopic).catch(() => undefined);
      await cleanup.close();
      rmSync(runDir, { recursive: true, force: true });
    }
    await session.shutdown().catch(() => undefined);
  }
}

function ratio(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a number from 0 to 1 (got '${value}')`);
    return n;
  };
}

export function chaosCommand(): Command {
  const count = (flag: string, def: number, help: string, max = 10_000) => new Option(`${flag} <n>`, help).default(def).argParser(intOption(flag, 0, max));
  return withConnection(
    withAlertRule(new Command('chaos'))
      .description('run the generator and workers on a fresh topic and keyspace under a seeded schedule of faults, then verify (exit 0 only if nothing was violated)')
      .addOption(new Option('--events <n>', 'events generated').default(50_000).argParser(intOption('--events', 1, 1e9)))
      .addOption(new Option('--duration <s>', 'seconds over which events and faults are spread (default: events / 400, at least 60)').argParser(intOption('--duration', 10, 86_400)))
      .addOption(new Option('--workers <n>', 'worker processes').default(3).argParser(intOption('--workers', 1, 64)))
      .addOption(new Option('--partitions <n>', 'partitions of the fresh topic').default(6).argParser(intOption('--partitions', 1, 1000)))
      .addOption(count('--kills', 10, 'SIGKILL a worker, then restart it'))
      .addOption(count('--zombies', 1, 'SIGSTOP a worker past the session timeout, then SIGCONT'))
      .addOption(count('--cassandra-restarts', 1, 'restart Cassandra (the local stack)', 100))
      .addOption(count('--kafka-restarts', 1, 'restart the Kafka broker (the local stack)', 100))
      .addOption(count('--add-remove', 2, 'workers added, and as many removed later', 100))
      .addOption(count('--injections', 3, 'bursts of malformed records', 1000))
      .addOption(new Option('--bad-ratio <r>', 'fraction of malformed records from the generator').default(0.005).argParser(ratio('--bad-ratio')))
      .addOption(new Option('--late-ratio <r>', 'fraction of late events (ts up to 30 s in the past)').default(0.02).argParser(ratio('--late-ratio')))
      .addOption(new Option('--seed <n>', 'seed of the schedule and the events (default: random, printed)').argParser(intOption('--seed', 0, 2 ** 32 - 1)))
      .addOption(new Option('--session-timeout-ms <ms>', "the workers' group session timeout").default(6000).argParser(intOption('--session-timeout-ms', 1000, 3_600_000)))
      .addOption(new Option('--drain-timeout <s>', 'how long the workers may take to drain after the faults').default(300).argParser(intOption('--drain-timeout', 10, 86_400)))
      .addOption(new Option('--stack-dir <dir>', 'the local stack whose servers are restarted (env EXACTLYONCE_STACK_DIR, default <repo>/.stack)'))
      .option('--keep', 'keep the keyspace, topics and logs after a successful run (a failed run always keeps them)')
      .option('--json', 'also print the figures as one JSON line at the end'),
    ['brokers', 'cassandra', 'datacenter', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts: Record<string, unknown>) => {
      const base = loadConnectionConfig(opts);
      const events = opts['events'] as number;
      const o: ChaosOptions = {
        events,
        workers: opts['workers'] as number,
        partitions: opts['partitions'] as number,
        kills: opts['kills'] as number,
        zombies: opts['zombies'] as number,
        cassandraRestarts: opts['cassandraRestarts'] as number,
        kafkaRestarts: opts['kafkaRestarts'] as number,
        addRemove: opts['addRemove'] as number,
        injections: opts['injections'] as number,
        badRatio: opts['badRatio'] as number,
        lateRatio: opts['lateRatio'] as number,
        seed: (opts['seed'] as number | undefined) ?? Math.floor(Math.random() * 2 ** 32),
        durationMs: ((opts['duration'] as number | undefined) ?? Math.max(60, Math.ceil(events / 400))) * 1000,
        sessionTimeoutMs: opts['sessionTimeoutMs'] as number,
        drainTimeoutMs: (opts['drainTimeout'] as number) * 1000,
        keep: opts['keep'] === true,
        json: opts['json'] === true,
        rule: alertRuleFrom(opts),
      };
      try {
        return await runChaos(base, o, stackOptionsFrom({ stackDir: opts['stackDir'] }));
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
