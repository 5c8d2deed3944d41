/**
 * What the alerts cost: one exactly-once worker drains the original generator's events (all Critical,
 * one source, so every event counts in its window and every batch adds to and sums the windows it touched;
 * see src/app/alerts.ts). Compare its events/s with exactlyOnce1, whose events are never Critical.
 */
import type { BenchContext } from './context.js';
import { runOneWorkerOnFreshTopic } from './exactly-once.js';
import type { CaseResult } from './results.js';

export async function runAlerts(ctx: BenchContext): Promise<CaseResult> {
  const o = ctx.options;
  const result = await runOneWorkerOnFreshTopic(ctx, 'exactlyOnce1Alerts', { events: o.alertsEvents, seed: o.seed + 2, healthMix: [0, 0, 1] });
  const perWindow = Math.round((o.eventTimeRate * 5000) / 1000);
  return { ...result, title: `exactly-once with alerts, 1 worker (all Critical, 1 source, ~${perWindow} events per 5 s window)` };
}
