/**
 * Where a worker's batches spend their wall time: its `exactlyonce_batch_stage_seconds` histogram
 * (src/engine/metrics.ts), read from the worker's /metrics at the start and at the end of a case's
 * measured window; per stage, the batches observed in between and their mean, in ms.
 */
import type { BenchProcess } from './processes.js';

/** Cumulative count and sum (seconds) per stage, as served. */
export type StageTotals = Record<string, { count: number; sum: number }>;

/** Per stage: batches observed in the window, and their mean duration in ms. */
export type StageBreakdown = Record<string, { batches: number; meanMs: number }>;

const SAMPLE = /^exactlyonce_batch_stage_seconds_(sum|count)\{stage="(\w+)"\} (\S+)$/;

/** Parses the stage histogram's sums and counts out of a Prometheus text exposition. */
export function parseStages(text: string): StageTotals {
  const totals: StageTotals = {};
  for (const line of text.split('\n')) {
    const m = SAMPLE.exec(line);
    if (m === null) continue;
    const t = (totals[m[2]!] ??= { count: 0, sum: 0 });
    t[m[1] as 'sum' | 'count'] = Number(m[3]);
  }
  return totals;
}

/** The stage totals of every process served on a metrics port, added up; empty when none answers. */
export async function readStages(procs: ReadonlyArray<BenchProcess>): Promise<StageTotals> {
  const all: StageTotals = {};
  for (const p of procs) {
    if (p.metricsPort === undefined) continue;
    const text = await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`, { signal: AbortSignal.timeout(5000) })
      .then((r) => r.text())
      .catch(() => '');
    for (const [stage, t] of Object.entries(parseStages(text))) {
      const a = (all[stage] ??= { count: 0, sum: 0 });
      a.count += t.count;
      a.sum += t.sum;
    }
  }
  return all;
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
