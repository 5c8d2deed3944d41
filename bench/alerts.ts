/**
 * What the alerts cost: one exactly-once worker drains the original generator's events (all Critical,
 * one source, so every event counts in its window and every batch adds to and sums the windows it touched;
 * see src/jobs/events/alerts.ts). Compare its events/s with exactlyOnce1, whose events are never Critical. Its
 * topic is produced once, before the repeated cases (like theirs); each run drains it into a fresh
 * keyspace, alternating with the 1-worker case, and the best run counts, as for that case: a single
 * run against a best of three made the ratio move between runs.
 */
import type { ConnectionConfig } from '../src/config.js';
import type { BenchContext } from './context.js';
import { runExactlyOnce } from './exactly-once.js';
import type { CaseResult } from './results.js';
import { produceWorkload } from './workload.js';

/** Makes and fills the alerts case's topic (deleted at the end of the run). */
export async function produceAlertsTopic(ctx: BenchContext): Promise<ConnectionConfig> {
  const o = ctx.options;
  const config = ctx.caseConfig('alerts-events');
  await ctx.freshTopic(config, o.partitions);
  await produceWorkload(ctx, config, { events: o.alertsEvents, partitions: o.partitions, seed: o.seed + 2, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: o.eventTimeRate, healthMix: [0, 0, 1] }, 'alerts');
  return config;
}

export async function runAlerts(ctx: BenchContext, topic: string): Promise<CaseResult> {
  const o = ctx.options;
  const result = await runExactlyOnce(ctx, 'exactlyOnce1Alerts', topic, 1);
  const perWindow = Math.round((o.eventTimeRate * 5000) / 1000);
  return { ...result, title: `exactly-once with alerts, 1 worker (all Critical, 1 source, ~${perWindow} events per 5 s window)` };
}
