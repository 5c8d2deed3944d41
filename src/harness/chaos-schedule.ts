/**
 * The chaos harness's fault schedule: a pure function of the seed and the fault counts, printed before
 * the run so that a failing run can be replayed with the same faults at the same moments. Which worker
 * a fault hits is drawn here too (`pick`, 0..1, applied to the workers alive at that moment).
 */
import { prng } from '../prng.js';

export type ServerName = 'kafka' | 'cassandra' | 'registry';

export type Fault =
  /** SIGKILL a worker, start a new one `restartAfterMs` later. */
  | { atMs: number; kind: 'kill'; pick: number; restartAfterMs: number }
  /** Start one more worker (a rebalance). */
  | { atMs: number; kind: 'add-worker' }
  /** SIGTERM a worker (a clean leave, a rebalance). */
  | { atMs: number; kind: 'remove-worker'; pick: number }
  /** SIGSTOP a worker for `pauseMs` (> the session timeout: it loses its partitions), then SIGCONT. */
  | { atMs: number; kind: 'zombie'; pick: number; pauseMs: number }
  /**
   * SIGKILL a server (a crash), keep it down `downMs`, start it again. On a cluster stack, which one:
   * Cassandra node 1 + ⌊pick·N⌋; for Kafka, `role` says the broker leading partition ⌊pick·P⌋ of the
   * topic being read, or the active KRaft controller.
   */
  | { atMs: number; kind: 'restart'; server: ServerName; downMs: number; pick: number; role: 'leader' | 'controller' }
  /** Cluster only: SIGKILL two Cassandra nodes (all but node 1 + ⌊pick·N⌋ of 3), a lost quorum, for `downMs`; start them again. */
  | { atMs: number; kind: 'outage'; downMs: number; pick: number }
  /** Publish `count` malformed records of every kind into the topic. */
  | { atMs: number; kind: 'inject'; count: number }
  /**
   * SIGKILL Cassandra right after an engine transition, which the harness brings about (see
   * Transition), while what the transition planned from is still inside the commit log's sync period;
   * keep it down `downMs`, start it again.
   */
  | { atMs: number; kind: 'crash-at'; transition: Transition; downMs: number; pick: number };

/**
 * The transitions `crash-at` strikes right after: a worker's assignment (a worker joins), a clean stop
 * (a worker leaves: SIGKILL as it exits), the hand-over that follows a stop (another worker's
 * assignment of its partitions), a checkpoint reset picked up while running (an in-place reset: same
 * offset, next epoch), and a rewind (Cassandra SIGKILLed, and SIGKILLed again as soon as a worker
 * rewinds or replays after it).
 */
export type Transition = 'assignment' | 'stop' | 'hand-over' | 'reset' | 'rewind';
export const TRANSITIONS: readonly Transition[] = ['assignment', 'stop', 'hand-over', 'reset', 'rewind'];

export interface ChaosPlanOptions {
  seed: number;
  durationMs: number;
  /** Workers running at the start. */
  workers: number;
  kills: number;
  zombies: number;
  cassandraRestarts: number;
  kafkaRestarts: number;
  /** SIGKILLs of the Schema Registry (for a job reading a registry format; default 0). */
  registryRestarts?: number;
  /** Workers added, and as many removed later. */
  addRemove: number;
  /** Bursts of malformed records. */
  injections: number;
  sessionTimeoutMs: number;
  /** Cluster only: times two of three Cassandra nodes are SIGKILLed together (default 0). */
  cassandraOutages?: number;
  /** How long a server stays down, in ms: [min, max] (default [1000, 5000]; a cluster's node is kept down longer). */
  serverDownMs?: readonly [number, number];
  /** Cassandra SIGKILLs right after engine transitions, each transition in turn (default 0). */
  transitionCrashes?: number;
}

export function planChaos(o: ChaosPlanOptions): Fault[] {
  const rand = prng(o.seed ^ 0x5eed);
  const D = o.durationMs;
  // Faults fall between 5% and 90% of the run, so the pipeline has load before and after them.
  const at = () => Math.round(D * (0.05 + 0.85 * rand()));
  const faults: Fault[] = [];
  for (let i = 0; i < o.kills; i++) faults.push({ atMs: at(), kind: 'kill', pick: rand(), restartAfterMs: Math.round(3000 * rand()) });
  for (let i = 0; i < o.addRemove; i++) {
    const a = at();
    const b = at();
    faults.push({ atMs: Math.min(a, b), kind: 'add-worker' }, { atMs: Math.max(a, b), kind: 'remove-worker', pick: rand() });
  }
  for (let i = 0; i < o.zombies; i++) {
    faults.push({ atMs: at(), kind: 'zombie', pick: rand(), pauseMs: o.sessionTimeoutMs + 4000 + Math.round(4000 * rand()) });
  }
  for (let i = 0; i < o.injections; i++) faults.push({ atMs: at(), kind: 'inject', count: 5 + Math.floor(20 * rand()) });
  // Server restarts get slots of their own, spread over the run, so that two never overlap and the
  // pipeline runs between them; the order of the servers is drawn.
  const servers: Array<ServerName | 'outage' | Transition> = [
    ...Array<ServerName>(o.cassandraRestarts).fill('cassandra'),
    ...Array<ServerName>(o.kafkaRestarts).fill('kafka'),
    ...Array<'outage'>(o.cassandraOutages ?? 0).fill('outage'),
    ...Array<ServerName>(o.registryRestarts ?? 0).fill('registry'),
    ...Array.from({ length: o.transitionCrashes ?? 0 }, (_, i) => TRANSITIONS[i % TRANSITIONS.length]!),
  ];
  for (let i = servers.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [servers[i], servers[j]] = [servers[j]!, servers[i]!];
  }
  // Which node a fault hits comes from a generator of its own: drawn from `rand`, it would shift every
  // later draw, and a seed's fault times, kinds and durations would depend on the picks — a seed
  // recorded from a plan without them would no longer plan the same faults.
  const pickRand = prng(o.seed ^ 0xc1a5);
  const [downMin, downMax] = o.serverDownMs ?? [1000, 5000];
  let kafkaKills = 0;
  servers.forEach((server, i) => {
    const slot = D * (0.1 + (0.75 * (i + 0.25 + 0.5 * rand())) / servers.length);
    const downMs = downMin + Math.round((downMax - downMin) * rand());
    const pick = pickRand();
    if (server === 'outage') faults.push({ atMs: Math.round(slot), kind: 'outage', downMs, pick });
    else if ((TRANSITIONS as readonly string[]).includes(server)) faults.push({ atMs: Math.round(slot), kind: 'crash-at', transition: server as Transition, downMs, pick });
    else faults.push({ atMs: Math.round(slot), kind: 'restart', server: server as ServerName, downMs, pick, role: server === 'kafka' && kafkaKills++ % 2 === 1 ? 'controller' : 'leader' });
  });
  return keepWorkersForFaults(faults.sort((a, b) => a.atMs - b.atMs), o.workers);
}

/** A replacement worker counts as running only this long after it is due (the pool's timers are not exact). */
const RESTART_MARGIN_MS = 1000;

/**
 * Makes every planned kill find a running worker and every removal two (a removal never takes the
 * last one), so that no fault is skipped: the workers are replayed on paper (`workers` at the start,
 * one more per add, one fewer per remove, a killed worker down until its replacement starts), and where
 * kills would leave too few running, the replacements of the earliest of them start sooner, at the
 * latest a second before the fault that needs them (at once if the kill is that close). Adds come
 * before their removes, so there are always enough workers once every replacement is back. The times
 * and the number of faults do not change. (Seed 2703006044, for one, plans three kills with 2-2.4 s
 * restarts just before a removal, which without this would find one worker of four running and be
 * skipped.) A zombie's moment is not known in advance (it waits for server restarts and for a worker
 * that owns partitions); for a fault that meets one frozen, the pool waits until it runs again.
 */
function keepWorkersForFaults(plan: Fault[], workers: number): Fault[] {
  let members = workers;
  const kills: Array<Extract<Fault, { kind: 'kill' }>> = [];
  const back = (k: Extract<Fault, { kind: 'kill' }>, atMs: number) => k.restartAfterMs === 0 || k.atMs + k.restartAfterMs + RESTART_MARGIN_MS <= atMs;
  for (const f of plan) {
    // A stop (and its hand-over) replaces the worker it stops; an assignment adds one.
    const need = f.kind === 'kill' ? 1 : f.kind === 'remove-worker' ? 2 : f.kind === 'crash-at' ? { stop: 1, 'hand-over': 2 }[f.transition as string] ?? 0 : 0;
    for (;;) {
      const down = kills.filter((k) => !back(k, f.atMs));
      if (members - down.length >= need || down.length === 0) break;
      const k = down.reduce((a, b) => (a.atMs + a.restartAfterMs <= b.atMs + b.restartAfterMs ? a : b));
      k.restartAfterMs = Math.max(0, f.atMs - RESTART_MARGIN_MS - k.atMs);
    }
    if (f.kind === 'kill') kills.push(f);
    else if (f.kind === 'add-worker' || (f.kind === 'crash-at' && f.transition === 'assignment')) members++;
    else if (f.kind === 'remove-worker') members--;
  }
  return plan;
}

/** One line per fault; `cluster` says which node a server fault hits on a cluster stack. */
export function describeFault(f: Fault, cluster?: { cassandraNodes: number; partitions: number }): string {
  const t = `t+${(f.atMs / 1000).toFixed(1).padStart(6)}s`;
  switch (f.kind) {
    case 'kill':
      return `${t}  SIGKILL a worker (pick ${f.pick.toFixed(3)}), start a new one ${(f.restartAfterMs / 1000).toFixed(1)} s later`;
    case 'add-worker':
      return `${t}  add a worker`;
    case 'remove-worker':
      return `${t}  remove a worker with SIGTERM (pick ${f.pick.toFixed(3)})`;
    case 'zombie':
      return `${t}  SIGSTOP a worker (pick ${f.pick.toFixed(3)}) for ${(f.pauseMs / 1000).toFixed(1)} s, past the session timeout, then SIGCONT`;
    case 'restart': {
      const what =
        cluster === undefined
          ? f.server === 'kafka'
            ? 'the Kafka broker'
            : f.server === 'registry'
              ? 'the Schema Registry'
              : 'Cassandra'
          : f.server === 'registry'
            ? 'the Schema Registry'
            : f.server === 'kafka'
            ? f.role === 'controller'
              ? 'the active KRaft controller'
              : `the broker leading partition ${Math.floor(f.pick * cluster.partitions)}`
            : `Cassandra node ${1 + Math.floor(f.pick * cluster.cassandraNodes)}`;
      return `${t}  SIGKILL ${what}, start it again ${(f.downMs / 1000).toFixed(1)} s later`;
    }
    case 'outage':
      return `${t}  SIGKILL two Cassandra nodes (all but node ${1 + Math.floor(f.pick * (cluster?.cassandraNodes ?? 3))}): no quorum for ${(f.downMs / 1000).toFixed(1)} s, then start them again`;
    case 'inject':
      return `${t}  inject ${f.count} malformed records`;
    case 'crash-at':
      return `${t}  SIGKILL Cassandra right after ${CRASH_AT[f.transition]}, start it again ${(f.downMs / 1000).toFixed(1)} s later`;
  }
}

const CRASH_AT: Record<Transition, string> = {
  assignment: 'a worker joins and is assigned partitions',
  stop: 'a worker stops cleanly (as it exits)',
  'hand-over': "a worker stops and another is assigned its partitions",
  reset: 'a partition is reset in place (same offset, next epoch) and its owner picks it up',
  rewind: 'a worker rewinds after a first SIGKILL of Cassandra (so twice)',
};

/** Malformed records of the kinds the codec quarantines, `count` of them, drawn from the seed. */
export function malformedRecords(count: number, seed: number): Array<{ key: string; value: Buffer | null }> {
  const rand = prng(seed);
  const kinds: Array<() => Buffer | null> = [
    () => Buffer.from('{"id": 1, "ts": '),
    () => Buffer.from([0xff, 0xfe, 0x00, 0x80, Math.floor(rand() * 256)]),
    () => null,
    () => Buffer.from(`{"id":${Math.floor(rand() * 1e9)},"ts":1,"source":"chaos","client":"chaos","health":9}`),
    () => Buffer.from(`{"id":"x","ts":1,"source":"chaos","client":"chaos","health":2}`),
    () => Buffer.from('"just a string"'),
    () => Buffer.from(`{"id":1,"ts":1,"source":"chaos","client":"chaos","health":2,"pad":"${'y'.repeat(70 * 1024)}"}`),
  ];
  return Array.from({ length: count }, (_, i) => ({ key: `chaos-bad-${i}`, value: kinds[Math.floor(rand() * kinds.length)]!() }));
}
