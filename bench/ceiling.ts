/**
 * The ceiling case: bench/ceiling-writer.ts, in its own process, writes the workload's rows straight
 * to Cassandra (no Kafka) at the best number of batches in flight it finds.
 */
import { ExactlyOnceError } from '../src/errors.js';
import { pause, type BenchContext } from './context.js';
import type { CeilingArgs } from './ceiling-writer.js';
import { startScript } from './processes.js';
import { serverCpuPer1000, type CaseResult, type ProcessFacts, type ServerCpu } from './results.js';
import type { Workload } from './workload.js';

interface CeilingResult {
  concurrency: number;
  eventsPerSec: number;
  cpuSeconds: number;
}

export async function runCeiling(ctx: BenchContext, workload: Workload): Promise<CaseResult> {
  const o = ctx.options;
  const config = ctx.caseConfig('ceiling');
  const sweep = ctx.caseConfig('ceiling_sweep');
  await ctx.freshKeyspace(config);
  await ctx.freshKeyspace(sweep);
  const args: CeilingArgs = {
    config,
    sweepKeyspace: sweep.keyspace,
    workload,
    concurrency: o.ceilingConcurrency,
    sweepEvents: Math.min(o.ceilingSweepEvents, workload.events),
    batchRows: o.ceilingBatchRows,
  };
  const proc = startScript(ctx, 'ceiling writer', 'ceiling-writer', args);
  const levels: Array<{ concurrency: number; eventsPerSec: number }> = [];
  let result: CeilingResult | undefined;
  let peakRssKiB: number | undefined;
  let serversAtStart: ServerCpu | undefined;
  let serversAtEnd: ServerCpu = {};
  proc.onLine((line) => {
    if (!line.startsWith('{')) return;
    const msg = JSON.parse(line) as { sweep?: (typeof levels)[number]; stored?: number; result?: CeilingResult };
    if (msg.sweep !== undefined) {
      levels.push(msg.sweep);
      ctx.status(`ceiling: ${msg.sweep.concurrency} batches in flight → ${Math.round(msg.sweep.eventsPerSec)} rows/s`);
    }
    if (msg.stored !== undefined) {
      serversAtStart ??= ctx.serverCpu();
      ctx.status(`ceiling: ${msg.stored}/${workload.events} rows written`);
    }
    if (msg.result !== undefined) {
      serversAtEnd = ctx.serverCpu();
      result = msg.result;
    }
    peakRssKiB = proc.peakRssKiB() ?? peakRssKiB;
  });
  try {
    ctx.status('ceiling: building the rows, then sweeping the concurrency…');
    const deadline = Date.now() + o.caseTimeoutSeconds * 1000;
    while (result === undefined) {
      if (!proc.running) {
        const exit = await proc.exited;
        if (result !== undefined) break;
        throw new ExactlyOnceError('EO_SERVER_EXITED', `the ceiling writer exited with ${exit.code ?? exit.signal}`, { details: proc.tail() });
      }
      if (Date.now() > deadline) throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `ceiling: not done after ${o.caseTimeoutSeconds}s (--case-timeout)`);
      await pause(100, ctx.signal);
    }
    const processes: ProcessFacts[] = [
      { role: 'writer', pid: proc.pid, peakRssMiB: peakRssKiB === undefined ? null : Math.round(peakRssKiB / 102.4) / 10, cpuSeconds: result.cpuSeconds },
    ];
    const counted = workload.events;
    return {
      title: `ceiling: same rows, tight loop, same driver (${result.concurrency} batches in flight)`,
      eventsPerSec: result.eventsPerSec,
      events: counted,
      seconds: counted / result.eventsPerSec,
      processes,
      cpuMsPer1000Events: Math.round(((result.cpuSeconds * 1000) / counted) * 1000 * 10) / 10,
      // From the first progress report of the measured run (~100 ms in) to its end.
      serverCpuMsPer1000Events: serverCpuPer1000(serversAtStart ?? {}, serversAtEnd, counted),
      sweep: levels,
      concurrency: result.concurrency,
    };
  } finally {
    await proc.stop();
    await ctx.dropKeyspace(config.keyspace);
    await ctx.dropKeyspace(sweep.keyspace);
  }
}
