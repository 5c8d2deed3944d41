/**
 * Where a worker's batches spend their wall time: its `exactlyonce_batch_stage_seconds` histogram
 * (src/engine/metrics.ts), read from the worker's /metrics at the start and at the end of a case's
 * measured window; per stage, the batches observed in between and their mean, in ms.
 */
import { byLabel, parsePrometheus } from '../src/dashboard/prometheus.js';
import type { BenchProcess } from './processes.js';

/** Cumulative count and sum (seconds) per stage, as served. */
export type StageTotals = Record<string, { count: number; sum: number }>;

/** Per stage: batches observed in the window, and their mean duration in ms. */
export type StageBreakdown = Record<string, { batches: number; meanMs: number }>;

/** The stage totals of every process served on a metrics port, added up; empty when none answers. */
export async function readStages(procs: ReadonlyArray<BenchProcess>): Promise<StageTotals> {
  const texts = await Promise.all(
    procs
      .filter((p) => p.metricsPort !== undefined)
      .map((p) => fetch(`http://127.0.0.1:${p.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) }).then((r) => r.text()).catch(() => '')),
  );
  const samples = texts.flatMap(parsePrometheus);
  const sums = byLabel(samples, 'exactlyonce_batch_stage_seconds_sum', 'stage');
  return Object.fromEntries([...byLabel(samples, 'exactlyonce_batch_stage_seconds_count', 'stage')].map(([stage, count]) => [stage, { count, sum: sums.get(stage) ?? 0 }]));
}

/** What happened between two readings. */
export function stagesBetween(from: StageTotals, to: StageTotals): StageBreakdown {
  const out: StageBreakdown = {};
  for (const [stage, t] of Object.entries(to)) {
    const batches = t.count - (from[stage]?.count ?? 0);
    const sum = t.sum - (from[stage]?.sum ?? 0);
    if (batches > 0) out[stage] = { batches, meanMs: Math.round((sum / batches) * 1000 * 100) / 100 };
  }
  return out;
}
