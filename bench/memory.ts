/**
 * Memory when far behind: one worker starts `behindEvents` events behind (a fresh topic filled before
 * it starts) and drains them. Its peak RSS shows whether the prefetch bound (--max-buffer-mb) and the
 * batch size keep memory bounded however large the backlog is. With the sink cases, the sink (log
 * mode) then drains the same topic (`sinkMemoryBehind`), and so does an aggregate sink with a group
 * per millisecond of event time in one window (`sinkAggregateGroups`: ~100,000 groups per 1,000,000
 * records; its state is in Cassandra, the worker keeps a bounded cache).
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
    if (withSink) {
      results['sinkMemoryBehind'] = { ...(await runSink(ctx, 'sinkMemoryBehind', config.topic, 'log')), title: title('the sink (log mode)') };
      results['sinkAggregateGroups'] = { ...(await runSink(ctx, 'sinkAggregateGroups', config.topic, 'aggregate-groups')), title: title('the sink (aggregate mode, a group per event-time millisecond, one window)') };
    }
    return results;
  } finally {
    await ctx.deleteTopic(config.topic);
  }
}
