/**
 * The at-least-once baseline case: bench/baseline-consumer.ts in its own process drains the same
 * pre-produced topic into a fresh keyspace with a fresh group. Its progress is the count of records it
 * has written (acknowledged by Cassandra), which it reports on stdout.
 */
import { defaultRunnerOptions } from '../src/engine/runner.js';
import type { BenchContext } from './context.js';
import { measureProcessDrain } from './drain.js';
import { startScript } from './processes.js';
import type { CaseResult } from './results.js';
import type { BaselineArgs } from './baseline-consumer.js';

export async function runBaseline(ctx: BenchContext, topic: string, total: number): Promise<CaseResult> {
  const name = 'baseline';
  const config = ctx.caseConfig(name, topic);
  await ctx.freshKeyspace(config);
  await ctx.freshAlertsTopic(config, ctx.options.partitions);
  const o = ctx.options;
  const args: BaselineArgs = {
    config,
    maxBatch: o.maxBatch,
    concurrency: o.concurrency,
    maxBufferKb: o.maxBufferMb * 1024,
    sessionTimeoutMs: defaultRunnerOptions.sessionTimeoutMs,
  };
  const proc = startScript(ctx, 'baseline consumer', 'baseline-consumer', args, true);
  let stored = 0;
  proc.onLine((line) => {
    if (!line.startsWith('{"t"')) return;
    stored = (JSON.parse(line) as { stored: number }).stored;
  });
  try {
    ctx.status(`${name}: starting the consumer…`);
    return await measureProcessDrain(ctx, {
      label: name,
      title: 'at-least-once baseline (same client, batching, writes; auto-commit)',
      total,
      progress: async () => stored,
      processes: [{ role: 'consumer', proc }],
    });
  } finally {
    await proc.stop();
    await ctx.dropKeyspace(config.keyspace);
    await ctx.deleteTopic(config.alertsTopic);
  }
}
