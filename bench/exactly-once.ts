/**
 * The exactly-once pipeline itself: N real `exactlyonce run` worker processes (the same group) drain
 * the pre-produced topic into a fresh keyspace. Progress is what the workers made durable: the sum of
 * their checkpoints, read from Cassandra.
 */
import type { ConnectionConfig } from '../src/config.js';
import type { BenchContext } from './context.js';
import { checkpointProgress, drainTarget, measureProcessDrain } from './drain.js';
import { startWorker, waitAssigned, type BenchProcess } from './processes.js';
import type { CaseResult } from './results.js';

/**
 * Starts `workers` workers on `topic` with a fresh keyspace and group, and times their drain of its
 * events (done when every checkpoint is at its partition's last stable offset: drainTarget).
 */
export async function runExactlyOnce(ctx: BenchContext, name: string, topic: string, workers: number): Promise<CaseResult> {
  const config: ConnectionConfig = ctx.caseConfig(name, topic);
  await ctx.freshKeyspace(config);
  await ctx.freshAlertsTopic(config, ctx.options.partitions);
  const procs: BenchProcess[] = [];
  try {
    for (let i = 0; i < workers; i++) procs.push(await startWorker(ctx, config, `${name} worker ${i + 1}`));
    ctx.status(`${name}: starting ${workers} worker${workers === 1 ? '' : 's'}…`);
    // At least one must own partitions before the clock can run; the others join (and rebalance) as they come.
    await Promise.any(procs.map((p) => waitAssigned(ctx, p))).catch((e: AggregateError) => {
      throw e.errors[0];
    });
    return await measureProcessDrain(ctx, {
      label: name,
      title: `exactly-once, ${workers} worker${workers === 1 ? '' : 's'} (bin/exactlyonce run)`,
      total: await drainTarget(ctx, topic),
      progress: checkpointProgress(ctx, config.keyspace, config.topic),
      processes: procs.map((proc, i) => ({ role: `worker ${i + 1}`, proc })),
    });
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
    await ctx.dropKeyspace(config.keyspace);
    await ctx.deleteTopic(config.alertsTopic);
  }
}
