/**
 * Throughput of a consumer catching up with a backlog: durable progress is polled until it reaches the
 * total, and the rate is taken from the first poll that saw progress to the one that saw the end, so
 * that process start-up and joining the group (the same for every case) are not counted.
 */
import { readWorkers, stagesBetween, type WorkerReading } from './stages.js';
import { fromLong } from '../src/cassandra/session.js';
import { describe, ExactlyOnceError } from '../src/errors.js';
import { pause, type BenchContext } from './context.js';
import type { BenchProcess } from './processes.js';
import { cpuPer1000, processFacts, serverCpuPer1000, type CaseResult, type ServerCpu } from './results.js';

/** A drain that has not moved for this long (ms) is stuck: fail the case instead of waiting for --case-timeout. */
const STALL_MS = 120_000;

export interface DrainResult<S = undefined> {
  eventsPerSec: number;
  /** Seconds between the two polls the rate is taken from. */
  seconds: number;
  /** Events already stored at the first poll that saw progress (not counted in the rate). */
  countedFrom: number;
  /** `sample()` taken at the poll the rate is counted from (the last that saw nothing, or the first that saw progress). */
  baseline: S | undefined;
}

export interface DrainOptions<S = undefined> {
  label: string;
  total: number;
  /** Events durably stored so far. */
  progress: () => Promise<number>;
  /** Throws when something the drain depends on has died (e.g. a worker process). */
  check: () => void;
  /** Called at the first poll that saw progress (e.g. to read the workers' stage timings). */
  onFirstProgress?: () => void;
  /**
   * Taken at the start, at every poll that sees nothing stored and at the first that sees progress,
   * so that what is measured against it (the processes' CPU time) covers the same window as the rate.
   */
  sample?: () => S;
  intervalMs?: number;
}

export async function measureDrain<S = undefined>(ctx: BenchContext, o: DrainOptions<S>): Promise<DrainResult<S>> {
  const interval = o.intervalMs ?? 100;
  const deadline = Date.now() + ctx.options.caseTimeoutSeconds * 1000;
  let lastZeroAt = Date.now();
  let atLastZero = o.sample?.();
  let atFirst: S | undefined;
  let lastChange = { at: Date.now(), count: -1 };
  let lastError: unknown;
  let first: { at: number; count: number } | undefined;
  for (;;) {
    o.check();
    const at = Date.now();
    // A server restarting (the stack is shared) is waited out like the workers wait it out; only a
    // drain that stays stuck fails, below.
    let count = Math.max(0, lastChange.count);
    try {
      count = await o.progress();
      lastError = undefined;
    } catch (e) {
      lastError = e;
      ctx.status(`${o.label}: cannot read progress (${describe(e)}); retrying`);
    }
    if (count === 0) {
      lastZeroAt = at;
      atLastZero = o.sample?.();
    } else if (first === undefined) {
      first = { at, count };
      atFirst = o.sample?.();
      o.onFirstProgress?.();
    }
    if (first !== undefined) {
      const rate = (count - first.count) / Math.max(0.001, (at - first.at) / 1000);
      ctx.status(`${o.label}: ${count}/${o.total} stored, ${Math.round(rate)}/s`);
    }
    if (count >= o.total) {
      // A drain seen only once or twice (tiny runs) is timed from the last poll that saw nothing.
      const usable = first !== undefined && at - first.at >= 1000 && first.count < o.total / 2;
      const from = usable ? first! : { at: lastZeroAt, count: 0 };
      const seconds = Math.max(0.001, (at - from.at) / 1000);
      return { eventsPerSec: (o.total - from.count) / seconds, seconds, countedFrom: from.count, baseline: usable ? atFirst : atLastZero };
    }
    if (count !== lastChange.count) lastChange = { at, count };
    if (at - lastChange.at > STALL_MS) {
      const why = lastError === undefined ? '' : `; last error reading it: ${describe(lastError)}`;
      throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${o.label}: no progress for ${STALL_MS / 1000}s (stuck at ${count}/${o.total})${why}`);
    }
    if (Date.now() > deadline) {
      throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${o.label}: ${count}/${o.total} stored after ${ctx.options.caseTimeoutSeconds}s (--case-timeout)`);
    }
    await pause(interval, ctx.signal);
  }
}

/**
 * Where a drain of `topic` ends, for checkpointProgress: the sum of its partitions' last stable offsets
 * (a fresh topic's offsets start at 0), read once everything is produced. The same notion of drained as
 * chaos's, the demo's and the tests' (src/harness/drain.ts): every checkpoint at the end of what a
 * read_committed consumer can read, aborted records and transaction markers included. On the bench's
 * own topics (no transactions) it is the number of events produced.
 */
export async function drainTarget(ctx: BenchContext, topic: string): Promise<number> {
  return (await ctx.admin.watermarks(topic)).reduce((n, w) => n + Number(w.stable), 0);
}

/** Durable progress of exactly-once workers: the sum of the checkpoints (offsets of a fresh topic start at 0). */
export function checkpointProgress(ctx: BenchContext, keyspace: string, topic: string): () => Promise<number> {
  return async () => {
    const r = await ctx.session.execute(`SELECT next_offset FROM ${keyspace}.checkpoints WHERE topic = ?`, [topic], { prepare: true });
    return r.rows.reduce((n, row) => n + Number(fromLong(row['next_offset'])), 0);
  };
}

/**
 * A case whose processes drain the topic (the baseline consumer, the exactly-once workers): times the
 * drain and describes it, with the CPU time each process and each server spent from the poll the rate
 * is counted from.
 */
export async function measureProcessDrain(
  ctx: BenchContext,
  o: { label: string; title: string; total: number; progress: () => Promise<number>; processes: ReadonlyArray<{ role: string; proc: BenchProcess }> },
): Promise<CaseResult> {
  const procs = o.processes.map((p) => p.proc);
  let atStart: Promise<WorkerReading | undefined> = Promise.resolve(undefined);
  const drain = await measureDrain(ctx, {
    label: o.label,
    total: o.total,
    progress: o.progress,
    check: () => o.processes.forEach((p) => p.proc.assertRunning()),
    // The CPU time is read where the rate is counted from: a drain over by its first reading (a small
    // topic) is timed, and its CPU counted, from the last poll that saw nothing.
    sample: () => ({ cpu: o.processes.map((p) => p.proc.cpuSeconds()), servers: ctx.serverCpu() }),
    onFirstProgress: () => {
      atStart = readWorkers(procs);
    },
  });
  const cpuAtStart = drain.baseline?.cpu ?? [];
  const serversAtStart: ServerCpu = drain.baseline?.servers ?? {};
  const serversAtEnd = ctx.serverCpu();
  // A drain over before the window's first reading (a small topic) counts every batch of the processes.
  const atEnd = await readWorkers(procs);
  const from = await atStart;
  const windowed = stagesBetween(from?.stages ?? {}, atEnd.stages);
  const whole = Object.keys(windowed).length === 0;
  const stages = whole ? stagesBetween({}, atEnd.stages) : windowed;
  const identityChecks = atEnd.identityChecks - (whole ? 0 : (from?.identityChecks ?? 0));
  const processes = o.processes.map((p, i) => processFacts(p.role, p.proc, cpuAtStart[i]));
  return {
    title: o.title,
    eventsPerSec: drain.eventsPerSec,
    events: o.total,
    seconds: drain.seconds,
    processes,
    cpuMsPer1000Events: cpuPer1000(processes, o.total - drain.countedFrom),
    serverCpuMsPer1000Events: serverCpuPer1000(serversAtStart, serversAtEnd, o.total - drain.countedFrom),
    ...(Object.keys(stages).length > 0 ? { stages, identityChecks } : {}),
  };
}
