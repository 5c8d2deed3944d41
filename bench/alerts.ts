/**
 * What the alerts cost: one exactly-once worker drains the original generator's events (all Critical,
 * one source, so every event is indexed in its window and every batch recounts the windows it touched;
 * see src/app/alerts.ts). Compare its events/s with exactlyOnce1, whose events are never Critical.
 */
import type { BenchContext } from './context.js';
import { runExactlyOnce } from './exactly-once.js';
import type { CaseResult } from './results.js';
import { produceWorkload } from './workload.js';

export async function runAlerts(ctx: BenchContext): Promise<CaseResult> {
  const o = ctx.options;
  const name = 'exactlyOnce1Alerts';
  const config = ctx.caseConfig(name);
  await ctx.freshTopic(config, o.partitions);
  try {
    const workload = { events: o.alertsEvents, partitions: o.partitions, seed: o.seed + 2, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: o.eventTimeRate, healthMix: [0, 0, 1] as const };
    await produceWorkload(ctx, config, workload, name);
    const result = await runExactlyOnce(ctx, name, config.topic, o.alertsEvents, 1);
    const perWindow = Math.round((o.eventTimeRate * 5000) / 1000);
    return { ...result, title: `exactly-once with alerts, 1 worker (all Critical, 1 source, ~${perWindow} events per 5 s window)` };
  } finally {
    await ctx.deleteTopic(config.topic);
  }
}
