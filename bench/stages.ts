/**
 * Where a worker's batches spend their wall time: its `exactlyonce_batch_stage_seconds` histogram
 * (src/engine/metrics.ts), read from the worker's /metrics at the start and at the end of a case's
 * measured window; per stage, the batches observed in between and their mean, in ms. The same two
 * readings give what held the worker's own event loop up in the window: its delay (prom-client's
 * `nodejs_eventloop_lag_*`, reset at each reading) and its garbage collections (`nodejs_gc_duration_seconds`).
 */
import { byLabel, histogramQuantile, parsePrometheus, select, type Sample } from '../src/dashboard/prometheus.js';
import type { BenchProcess } from './processes.js';

/** Cumulative count, sum (seconds) and bucket counts (by upper bound `le`, as served) per stage. */
export type StageTotals = Record<string, { count: number; sum: number; buckets?: Record<string, number> }>;

/**
 * Per stage: batches observed in the window, their mean duration in ms, and their p99 in ms (from the
 * histogram's buckets, interpolated within one: its resolution is the bucket's, e.g. 25–50 ms).
 */
export type StageBreakdown = Record<string, { batches: number; meanMs: number; p99Ms?: number }>;

const NAME = 'exactlyonce_batch_stage_seconds';
const GC = 'exactlyonce_nodejs_gc_duration_seconds';
const LOOP = 'exactlyonce_nodejs_eventloop_lag';
const CHECKS = 'exactlyonce_identity_checks_total';

/** One reading of the workers' /metrics: their stage totals, GC totals (by kind), and event-loop delay since the previous reading. */
export interface WorkerReading {
  stages: StageTotals;
  gc: StageTotals;
  /** Topic identity checks started (src/engine/identity-gate.ts), added up. */
  identityChecks: number;
  /** The highest p99 and maximum over the processes, in ms; absent when none serves them. */
  loopDelay?: { p99Ms: number; maxMs: number };
}

/** What held a worker's event loop up in a window: its delay, and its garbage collections. */
export interface WorkerLoop {
  delayP99Ms?: number;
  delayMaxMs?: number;
  gcCount: number;
  gcSeconds: number;
  /** Collections that took longer than 10 ms (from the histogram's buckets). */
  gcOver10Ms: number;
}

/** Reads every process served on a metrics port, and adds their totals up; empty when none answers. */
export async function readWorkers(procs: ReadonlyArray<BenchProcess>): Promise<WorkerReading> {
  const texts = await Promise.all(
    procs
      .filter((p) => p.metricsPort !== undefined)
      .map((p) => fetch(`http://127.0.0.1:${p.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text()).catch(() => '')),
  );
  const samples = texts.flatMap(parsePrometheus);
  const p99 = select(samples, `${LOOP}_p99_seconds`);
  const max = select(samples, `${LOOP}_max_seconds`);
  return {
    stages: histogramTotals(samples, NAME, 'stage'),
    gc: histogramTotals(samples, GC, 'kind'),
    identityChecks: select(samples, CHECKS).reduce((sum, s) => sum + s.value, 0),
    ...(p99.length === 0 ? {} : { loopDelay: { p99Ms: Math.max(...p99.map((s) => s.value)) * 1000, maxMs: Math.max(...max.map((s) => s.value)) * 1000 } }),
  };
}

/** A histogram's cumulative count, sum and buckets per value of `label`, added up over the processes. */
function histogramTotals(samples: Sample[], name: string, label: string): StageTotals {
  const sums = byLabel(samples, `${name}_sum`, label);
  const buckets = new Map<string, Record<string, number>>();
  for (const s of select(samples, `${name}_bucket`)) {
    const key = s.labels[label];
    const le = s.labels['le'];
    if (key === undefined || le === undefined) continue;
    const b = buckets.get(key) ?? {};
    b[le] = (b[le] ?? 0) + s.value;
    buckets.set(key, b);
  }
  return Object.fromEntries([...byLabel(samples, `${name}_count`, label)].map(([key, count]) => [key, { count, sum: sums.get(key) ?? 0, buckets: buckets.get(key) }]));
}

/**
 * The worker's event loop in the window between two readings: the delay the second reading reports
 * (prom-client resets it at each reading, so it covers exactly the window), and the collections
 * between them, of every kind.
 */
export function workerLoopBetween(from: WorkerReading, to: WorkerReading): WorkerLoop {
  let gcCount = 0;
  let gcSeconds = 0;
  let gcOver10Ms = 0;
  for (const [kind, t] of Object.entries(to.gc)) {
    const before = from.gc[kind];
    const n = t.count - (before?.count ?? 0);
    gcCount += n;
    gcSeconds += t.sum - (before?.sum ?? 0);
    const under = (t.buckets?.['0.01'] ?? 0) - (before?.buckets?.['0.01'] ?? 0);
    gcOver10Ms += n - under;
  }
  return {
    ...(to.loopDelay === undefined ? {} : { delayP99Ms: Math.round(to.loopDelay.p99Ms * 10) / 10, delayMaxMs: Math.round(to.loopDelay.maxMs * 10) / 10 }),
    gcCount,
    gcSeconds: Math.round(gcSeconds * 1000) / 1000,
    gcOver10Ms,
  };
}

/** What happened between two readings. */
export function stagesBetween(from: StageTotals, to: StageTotals): StageBreakdown {
  const out: StageBreakdown = {};
  for (const [stage, t] of Object.entries(to)) {
    const batches = t.count - (from[stage]?.count ?? 0);
    const sum = t.sum - (from[stage]?.sum ?? 0);
    if (batches <= 0) continue;
    out[stage] = { batches, meanMs: Math.round((sum / batches) * 1000 * 100) / 100 };
    // The window's buckets: the end's cumulative counts less the start's.
    const window: Sample[] = Object.entries(t.buckets ?? {}).map(([le, count]) => ({ name: `${NAME}_bucket`, labels: { le }, value: count - (from[stage]?.buckets?.[le] ?? 0) }));
    const p99 = histogramQuantile(window, NAME, 0.99);
    if (p99 !== null) out[stage]!.p99Ms = Math.round(p99 * 1000 * 10) / 10;
  }
  return out;
}
