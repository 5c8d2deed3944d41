/**
 * Memory when far behind: one worker starts `behindEvents` events behind (a fresh topic filled before
 * it starts) and drains them. Its peak RSS shows whether the prefetch bound (--max-buffer-mb) and the
 * batch size keep memory bounded however large the backlog is.
 */
import type { BenchContext } from './context.js';
import { runOneWorkerOnFreshTopic } from './exactly-once.js';
import type { CaseResult } from './results.js';

export async function runMemoryBehind(ctx: BenchContext): Promise<CaseResult> {
  const o = ctx.options;
  const result = await runOneWorkerOnFreshTopic(ctx, 'memoryBehind', { events: o.behindEvents, seed: o.seed + 1, healthMix: o.healthMix });
  return { ...result, title: `1 worker starting ${o.behindEvents} events behind (memory)` };
}
