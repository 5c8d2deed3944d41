/**
 * Memory when far behind: one worker starts `behindEvents` events behind (a fresh topic filled before
 * it starts) and drains them. Its peak RSS shows whether the prefetch bound (--max-buffer-mb) and the
 * batch size keep memory bounded however large the backlog is.
 */
import type { BenchContext } from './context.js';
import { runExactlyOnce } from './exactly-once.js';
import type { CaseResult } from './results.js';
import { produceWorkload } from './workload.js';

export async function runMemoryBehind(ctx: BenchContext): Promise<CaseResult> {
  const o = ctx.options;
  const name = 'memoryBehind';
  const config = ctx.caseConfig(name);
  await ctx.freshTopic(config, o.partitions);
  try {
    await produceWorkload(ctx, config, { events: o.behindEvents, partitions: o.partitions, seed: o.seed + 1, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: o.eventTimeRate, healthMix: o.healthMix }, name);
    const result = await runExactlyOnce(ctx, name, config.topic, o.behindEvents, 1);
    return { ...result, title: `1 worker starting ${o.behindEvents} events behind (memory)` };
  } finally {
    await ctx.deleteTopic(config.topic);
  }
}
