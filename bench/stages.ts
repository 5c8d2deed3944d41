/**
 * Where a worker's batches spend their wall time: its `exactlyonce_batch_stage_seconds` histogram
 * (src/engine/metrics.ts), read from the worker's /metrics at the start and at the end of a case's
 * measured window; per stage, the batches observed in between and their mean, in ms.
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

/** The stage totals of every process served on a metrics port, added up; empty when none answers. */
export async function readStages(procs: ReadonlyArray<BenchProcess>): Promise<StageTotals> {
  const texts = await Promise.all(
    procs
      .filter((p) => p.metricsPort !== undefined)
      .map((p) => fetch(`http://127.0.0.1:${p.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text()).catch(() => '')),
  );
  const samples = texts.flatMap(parsePrometheus);
  const sums = byLabel(samples, `${NAME}_sum`, 'stage');
  const buckets = new Map<string, Record<string, number>>();
  for (const s of select(samples, `${NAME}_bucket`)) {
    const { stage, le } = s.labels;
    if (stage === undefined || le === undefined) continue;
    const b = buckets.get(stage) ?? {};
    b[le] = (b[le] ?? 0) + s.value;
    buckets.set(stage, b);
  }
  return Object.fromEntries([...byLabel(samples, `${NAME}_count`, 'stage')].map(([stage, count]) => [stage, { count, sum: sums.get(stage) ?? 0, buckets: buckets.get(stage) }]));
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
