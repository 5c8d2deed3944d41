/**
 * Applies the faults of a chaos schedule (src/harness/chaos-schedule.ts) to a worker fleet and the
 * local stack, and counts what was done. A fault that takes time (a restart, a zombie, a delayed
 * replacement) runs as an episode in the background; server restarts and zombies run one at a time,
 * in schedule order. A fault that fails is a problem of the run, not a crash of the harness.
 */
import { statSync, readFileSync } from 'node:fs';
import { malformedRecords, type Fault, type ServerName } from './chaos-schedule.js';
import type { ConnectionConfig } from '../config.js';
import type { Producer } from '../kafka/producer.js';
import { crashRecovery, killServer, logEnd, startServer, type StackOptions } from '../stack/index.js';
import { faultTargets } from './cluster-faults.js';
import { sleep } from './sleep.js';
import type { FleetWorker, WorkerFleet } from './worker-fleet.js';

export interface FaultContext {
  fleet: WorkerFleet;
  stack: StackOptions;
  producer: Producer;
  topic: string;
  seed: number;
  problems: string[];
  say: (line: string) => void;
  aborted: () => boolean;
  /** For a cluster's server faults: where the leaders of the topic's partitions are asked for. */
  config: ConnectionConfig;
  partitions: number;
  /** Records below the checkpoints, summed over the partitions (null when Cassandra cannot say). */
  progress: () => Promise<number | null>;
  /** True while the generator is still producing (a stalled pipeline then shows as checkpoints that do not move). */
  producing: () => boolean;
  /** A Cassandra node was SIGKILLed (the checkpoint watch then tells a loss from a regression). */
  onCassandraKilled?: () => void;
  /**
   * Resets a partition in place (its stored offset, the next epoch), as `checkpoints reset` would;
   * returns which, or null when none has a checkpoint yet. For the `reset` transition.
   */
  resetInPlace?: () => Promise<number | null>;
}

/** What a worker logs at each transition (src/engine): an assignment, a reset picked up, a rewind or replay. */
const ASSIGNED = /"msg":"assigned partitions \d/;
const RESET = /"msg":"partition \d+ was reset to/;
const REWOUND = /"code":"EO_WRITES_LOST"|a Cassandra node went down, and may have forgotten/;
/** How long a transition may take to show in a worker's log before the crash falls anyway. */
const TRANSITION_WAIT_MS = 60_000;

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** A log's text from byte `from` on ('' while it does not exist). */
function readFrom(file: string, from: number): string {
  try {
    return readFileSync(file).subarray(from).toString('utf8');
  } catch {
    return '';
  }
}

/** One server fault as it happened: what was SIGKILLed, for how long, and how far the checkpoints moved meanwhile. */
export interface ServerCrash {
  what: string;
  kind: 'restart' | 'outage';
  downMs: number;
  /** Records the workers checkpointed while the servers were down (null: the checkpoints could not be read). */
  advancedWhileDown: number | null;
  /** From the start of the JVMs until they answered again. */
  backInMs: number;
}

export class FaultRunner {
  readonly done: Record<Fault['kind'] | 'skipped', number> = { kill: 0, 'add-worker': 0, 'remove-worker': 0, zombie: 0, restart: 0, outage: 0, inject: 0, 'crash-at': 0, skipped: 0 };
  /** The transitions Cassandra was SIGKILLed right after, and those that did not show in time (it was SIGKILLed anyway). */
  readonly transitions: { struck: string[]; missed: string[] } = { struck: [], missed: [] };
  readonly restarted: Record<ServerName, number> = { kafka: 0, cassandra: 0, registry: 0 };
  /** Zombies whose log said, after waking, that they had lost their partitions. */
  zombiesLost = 0;
  injected = 0;
  /** What each server SIGKILLed and started again logged about its recovery. */
  readonly recoveries: string[] = [];
  readonly crashes: ServerCrash[] = [];
  /** Servers (ids, see stackNodes) down right now (brought back by `bringBack`, whatever happened). */
  private readonly stopped = new Set<string>();
  private readonly episodes = new Set<Promise<void>>();
  /** Server restarts and zombies run one at a time, in schedule order. */
  private steady: Promise<void> = Promise.resolve();

  constructor(private readonly c: FaultContext) {}

  private episode(p: Promise<void>): void {
    const e = p.catch((err: unknown) => void this.c.problems.push(`fault failed: ${(err as Error).message}`)).finally(() => this.episodes.delete(e));
    this.episodes.add(e);
  }

  private inTurn(run: () => Promise<void>): void {
    const p = this.steady.then(run);
    this.steady = p.catch(() => undefined);
    this.episode(p);
  }

  apply(f: Fault): void {
    const { fleet, say } = this.c;
    switch (f.kind) {
      // The schedule leaves a kill a running worker and a removal two (planChaos); should the fleet
      // be short at the moment all the same (timers drift, a zombie is frozen), the fault waits for
      // the workers on their way back rather than being skipped.
      case 'kill':
        return this.onWorkers(1, 'no running worker to kill yet; waiting for one to come back', 'no running worker to kill; skipped', () => {
          const w = fleet.pick(f.pick)!;
          fleet.kill(w);
          say(`SIGKILL worker#${w.id} (pid ${w.child.pid})`);
          this.done.kill++;
          this.episode(fleet.startAfter(f.restartAfterMs, this.c.aborted));
        });
      case 'add-worker':
        fleet.start();
        this.done['add-worker']++;
        return;
      case 'remove-worker':
        return this.onWorkers(2, 'only one worker running; the remove waits for another to come back', 'only one worker running; remove skipped', () => {
          const w = fleet.pick(f.pick, true)!;
          say(`SIGTERM worker#${w.id} (a clean leave)`);
          this.done['remove-worker']++;
          this.episode(fleet.stop(w).then(() => undefined));
        });
      case 'zombie':
        this.done.zombie++;
        // A zombie proves something only if it owns partitions when it freezes (so wait for such a
        // worker) and if the broker is up to expire its session (so never during a server restart).
        return this.inTurn(async () => {
          const w = await fleet.pickOwner(f.pick, 60_000);
          if (w === undefined) {
            this.done.zombie--;
            this.done.skipped++;
            say('no worker owns partitions; zombie skipped');
            return;
          }
          await this.zombie(w, f.pauseMs);
        });
      case 'restart':
        this.done.restart++;
        // A crash, not a clean stop: SIGKILL, so Cassandra must replay its commit log and Kafka
        // recover its log; verify then proves that nothing acknowledged was lost.
        return this.inTurn(async () => {
          await this.crash(f);
          this.restarted[f.server]++;
        });
      case 'outage':
        this.done.outage++;
        return this.inTurn(() => this.crash(f));
      case 'crash-at':
        this.done['crash-at']++;
        return this.inTurn(async () => {
          await this.bringAbout(f);
          this.restarted.cassandra++;
        });
      case 'inject': {
        const records = malformedRecords(f.count, this.c.seed + f.atMs);
        this.done.inject++;
        return this.episode(
          (async () => {
            await this.c.producer.connect();
            await this.c.producer.send(this.c.topic, records);
            this.injected += records.length;
            say(`injected ${records.length} malformed records`);
          })(),
        );
      }
    }
  }

  /** SIGKILLs the fault's servers, keeps them down, starts them again (together: restarting nodes of a ring rejoin it, they do not bootstrap). */
  private async crash(f: Extract<Fault, { kind: 'restart' | 'outage' }>): Promise<void> {
    const { stack } = this.c;
    const { ids, what } = await faultTargets(stack, f, this.c.config, this.c.partitions);
    const before = await this.c.progress();
    const logFrom = new Map(ids.map((id) => [id, logEnd(stack, id)]));
    for (const id of ids) {
      this.stopped.add(id);
      if (!(await killServer(stack, id))) throw new Error(`${id} was not running in the stack at ${stack.dir}`);
      if (id.startsWith('cassandra')) this.c.onCassandraKilled?.();
    }
    this.c.say(`SIGKILL ${what}; down for ${(f.downMs / 1000).toFixed(1)} s`);
    if (ids.some((id) => id.startsWith('kafka'))) this.episode(this.leaveDuringOutage(f.pick));
    await sleep(f.downMs);
    const during = await this.c.progress();
    const advancedWhileDown = before === null || during === null ? null : during - before;
    // The cluster's promise: with RF 3 one Cassandra node down costs nothing, the workers keep writing at LOCAL_QUORUM.
    if (f.kind === 'restart' && f.server === 'cassandra' && stack.cassandraNodes >= 3 && this.c.producing() && advancedWhileDown === 0) {
      this.c.problems.push(`while ${what} was down ${(f.downMs / 1000).toFixed(1)} s and events were produced, the checkpoints did not move (one node of ${stack.cassandraNodes} should cost nothing)`);
    }
    const t = Date.now();
    await Promise.all(
      ids.map(async (id) => {
        await startServer(stack, id);
        this.stopped.delete(id);
        const recovered = await crashRecovery(stack, id, logFrom.get(id)!);
        if (recovered !== null) this.recoveries.push(`${id}: ${recovered}`);
        this.c.say(`${id} is back after ${((Date.now() - t) / 1000).toFixed(1)} s (${recovered ?? 'no crash recovery in its log'})`);
      }),
    );
    const backInMs = Date.now() - t;
    this.crashes.push({ what, kind: f.kind, downMs: f.downMs, advancedWhileDown, backInMs });
    this.c.say(
      `${what}: back after ${(backInMs / 1000).toFixed(1)} s; while down the checkpoints advanced by ${advancedWhileDown === null ? 'an unknown number of (unreadable without a quorum)' : advancedWhileDown} records`,
    );
  }

  /**
   * A clean leave while a broker is down (a rolling update of the workers meeting a broker's crash):
   * a worker that owns partitions is SIGTERMed a second into the outage, and must stop by itself, exit 0, within its stop
   * deadline — a stop once waited out the Kafka client's timeouts and held its partitions for minutes.
   * A new worker replaces it.
   */
  private async leaveDuringOutage(pick: number): Promise<void> {
    const { fleet, say } = this.c;
    await sleep(1000);
    if (this.c.aborted() || fleet.running().length < 2) return;
    // One that owns partitions: its batches and its group membership are what a stop must not hold.
    const w = await fleet.pickOwner(pick, 1000);
    if (w === undefined) return say('no worker owns partitions while the broker is down; no leave then');
    say(`SIGTERM worker#${w.id} while a broker is down (its stop must not wait for the brokers)`);
    const started = Date.now();
    // A grace beyond the worker's stop deadline (30 s): a stop that overruns it exits 4 by itself.
    const { code, signal } = await fleet.stop(w, 90_000);
    const tookMs = Date.now() - started;
    if (code !== 0) this.c.problems.push(`worker#${w.id}, SIGTERMed while a broker was down, ended with ${signal ?? `code ${code}`} after ${(tookMs / 1000).toFixed(1)} s, not a clean stop; see ${w.logFile}`);
    else say(`worker#${w.id} stopped in ${(tookMs / 1000).toFixed(1)} s with a broker down`);
    if (!this.c.aborted()) fleet.start();
  }

  /**
   * Brings about `f.transition` and SIGKILLs Cassandra as soon as a worker's log shows it (or the
   * worker exits, for a stop): what the transition planned from was acknowledged a moment before, well
   * inside the commit log's sync period, so the crash takes it back and the workers must find that.
   */
  private async bringAbout(f: Extract<Fault, { kind: 'crash-at' }>): Promise<void> {
    const { fleet, say } = this.c;
    const crash = () => this.crash({ atMs: f.atMs, kind: 'restart', server: 'cassandra', downMs: f.downMs, pick: f.pick, role: 'leader' });
    const struck = (what: string) => void this.transitions.struck.push(what);
    switch (f.transition) {
      case 'assignment': {
        const mark = this.logMarks();
        const w = fleet.start();
        say(`transition: worker#${w.id} joins`);
        await this.strikeOn(mark, ASSIGNED, `worker#${w.id} joins: an assignment`, crash);
        return;
      }
      case 'stop':
      case 'hand-over': {
        if (fleet.running().length < (f.transition === 'stop' ? 1 : 2)) await fleet.awaitRunning(2, 120_000);
        const w = fleet.pick(f.pick, true);
        if (w === undefined) {
          this.transitions.missed.push(`${f.transition}: no running worker to stop`);
          return crash();
        }
        say(`transition: worker#${w.id} stops cleanly (SIGTERM), a new one replaces it`);
        const exited = fleet.stop(w);
        if (f.transition === 'stop') {
          await exited;
          struck(`worker#${w.id} stopped`);
          fleet.start();
          return crash();
        }
        await exited;
        const mark = this.logMarks();
        fleet.start();
        await this.strikeOn(mark, ASSIGNED, `worker#${w.id} stopped: its partitions handed over`, crash);
        return;
      }
      case 'reset': {
        const mark = this.logMarks();
        const p = await this.c.resetInPlace?.();
        if (p === undefined || p === null) {
          this.transitions.missed.push('reset: no partition has a checkpoint yet');
          return crash();
        }
        say(`transition: partition ${p} reset in place (same offset, next epoch)`);
        await this.strikeOn(mark, RESET, `partition ${p} reset and picked up`, crash);
        return;
      }
      case 'rewind': {
        const mark = this.logMarks();
        await crash();
        await this.strikeOn(mark, REWOUND, 'a rewind after a Cassandra crash', crash);
        return;
      }
    }
  }

  /** Where each worker's log ends now. */
  private logMarks(): Map<string, number> {
    return new Map(this.c.fleet.logs().map((f) => [f, fileSize(f)]));
  }

  /** Waits for a line matching `pattern` in any worker's log past `mark` (new workers from their start), then runs `then`. */
  private async strikeOn(mark: Map<string, number>, pattern: RegExp, what: string, then: () => Promise<void>): Promise<void> {
    const deadline = Date.now() + TRANSITION_WAIT_MS;
    for (;;) {
      const seen = this.c.fleet.logs().some((f) => pattern.test(readFrom(f, mark.get(f) ?? 0)));
      if (seen) {
        this.transitions.struck.push(what);
        break;
      }
      if (Date.now() > deadline || this.c.aborted()) {
        this.transitions.missed.push(`${what}: not in any worker's log within ${TRANSITION_WAIT_MS / 1000} s`);
        this.c.say(`transition not seen (${what}); SIGKILL Cassandra anyway`);
        break;
      }
      await sleep(20);
    }
    await then();
  }

  /** Runs `act` now if `n` workers run, else once they are back (or counts it skipped). */
  private onWorkers(n: number, waiting: string, skipped: string, act: () => void): void {
    if (this.c.fleet.running().length >= n) return act();
    this.c.say(waiting);
    this.episode(
      this.c.fleet.awaitRunning(n, 120_000).then((ok) => {
        if (ok && !this.c.aborted()) return act();
        this.done.skipped++;
        this.c.say(skipped);
      }),
    );
  }

  private async zombie(w: FleetWorker, pauseMs: number): Promise<void> {
    const { fleet, say } = this.c;
    const logFrom = statSync(w.logFile).size;
    fleet.freeze(w);
    say(`SIGSTOP worker#${w.id} for ${(pauseMs / 1000).toFixed(1)} s (a zombie)`);
    await sleep(pauseMs);
    if (w.state !== 'paused') return;
    fleet.thaw(w);
    say(`SIGCONT worker#${w.id}: it wakes with batches in flight for partitions it lost`);
    // Left alone (no kill, no SIGTERM) until it noticed; its log must say it lost them.
    const deadline = Date.now() + 120_000;
    const waking = () => w.state === 'waking';
    let lost = false;
    while (!lost && Date.now() < deadline && waking()) {
      await sleep(500);
      lost = /"msg":"(lost|revoked) partitions/.test(readFileSync(w.logFile).subarray(logFrom).toString('utf8'));
    }
    if (lost) this.zombiesLost++;
    else this.c.problems.push(`zombie worker#${w.id} did not report losing its partitions within 120 s of waking; see ${w.logFile}`);
    say(`worker#${w.id} ${lost ? 'found its partitions gone' : 'did NOT report losing its partitions'}`);
    fleet.settle(w);
  }

  /** Waits for every episode, including those that episodes start. */
  async settled(): Promise<void> {
    while (this.episodes.size > 0) await Promise.all([...this.episodes]);
  }

  /** Never leave the shared stack down, whatever happened. */
  async bringBack(): Promise<void> {
    await Promise.all([...this.episodes]).catch(() => undefined);
    for (const s of this.stopped) await startServer(this.c.stack, s).catch((e: unknown) => this.c.say(`could not start ${s} again: ${(e as Error).message}`));
  }
}
