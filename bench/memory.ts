/**
 * Memory when far behind: one worker starts `behindEvents` events behind (a fresh topic filled before
 * it starts) and drains them. Its peak RSS shows whether the prefetch bound (--max-buffer-mb) and the
 * batch size keep memory bounded however large the backlog is. With the sink cases, the sink (log
 * mode) then drains the same topic (`sinkMemoryBehind`).
 */
import type { BenchContext } from './context.js';
import { runExactlyOnce } from './exactly-once.js';
import type { CaseResult } from './results.js';
import { runSink } from './sink.js';
import { produceWorkload } from './workload.js';

export async function runMemoryBehind(ctx: BenchContext, withSink: boolean): Promise<Record<string, CaseResult>> {
  const o = ctx.options;
  const config = ctx.caseConfig('memoryBehind');
  await ctx.freshTopic(config, o.partitions);
  try {
    await produceWorkload(ctx, config, { events: o.behindEvents, seed: o.seed + 1, healthMix: o.healthMix, partitions: o.partitions, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: o.eventTimeRate }, 'memoryBehind');
    const title = (who: string) => `${who} starting ${o.behindEvents} events behind (memory)`;
    const results: Record<string, CaseResult> = { memoryBehind: { ...(await runExactlyOnce(ctx, 'memoryBehind', config.topic, 1)), title: title('1 worker') } };
    if (withSink) results['sinkMemoryBehind'] = { ...(await runSink(ctx, 'sinkMemoryBehind', config.topic, 'log')), title: title('the sink (log mode)') };
    return results;
  } finally {
    await ctx.deleteTopic(config.topic);
  }
}
