/**
 * What a PartitionTask acknowledged within the lost-writes window (src/engine/lost-writes.ts): a node
 * that goes down may have forgotten the rows of these batches, so their partition is read again from
 * the first of them.
 */
import type { TaskContext } from './ports.js';

export class RecentBatches {
  /** Each batch acknowledged since the horizon, oldest first: when (performance.now()) and its first offset. */
  private readonly batches: Array<{ at: number; from: bigint }> = [];

  constructor(private readonly ctx: Pick<TaskContext, 'lostWrites'>) {}

  /** Keeps a batch's first offset and when its rows were acknowledged, forgetting what is past the horizon. */
  remember(at: number, from: bigint): void {
    const guard = this.ctx.lostWrites;
    if (guard === undefined || guard.windowMs <= 0) return;
    this.batches.push({ at, from });
    const horizon = guard.horizon;
    while (this.batches.length > 0 && this.batches[0]!.at < horizon) this.batches.shift();
  }

  /** The first offset of the first batch acknowledged since `since` (performance.now()), or null when none was. */
  firstSince(since: number): bigint | null {
    return this.batches.find((b) => b.at >= since)?.from ?? null;
  }
}
