/**
 * End-to-end latency at a fixed rate: one worker owns a fresh topic; events are produced at `rate` per
 * second (each stamped with the wall clock as its event time when it is handed to the producer) while a
 * RowWatcher reads new rows back. Latency = first time the row was read − event time; only events
 * produced after the warm-up count. The figures are upper bounds by up to one poll interval.
 */
import { randomBytes } from 'node:crypto';
import { encodeEvent } from '../src/app/event.js';
import { ORIGINAL_CLIENTS, ORIGINAL_SOURCE, prng } from '../src/app/generator.js';
import { ExactlyOnceError } from '../src/errors.js';
import { Producer, type OutgoingRecord } from '../src/kafka/producer.js';
import { pause, type BenchContext } from './context.js';
import { startWorker, waitAssigned } from './processes.js';
import { cpuPer1000, processFacts, serverCpuPer1000, type CaseResult } from './results.js';
import { quantile, RowWatcher } from './row-watcher.js';

/** The producer is paced in steps of this many ms. */
const TICK_MS = 5;

export async function runLatency(ctx: BenchContext, percent: number, maxRate: number): Promise<CaseResult> {
  const o = ctx.options;
  const name = `latency${percent}`;
  const rate = Math.max(1, Math.round((maxRate * percent) / 100));
  const config = ctx.caseConfig(name);
  await ctx.freshTopic(config, o.partitions);
  await ctx.freshKeyspace(config);
  await ctx.freshAlertsTopic(config, o.partitions);
  const worker = startWorker(ctx, config, `${name} worker`);
  const watcher = new RowWatcher(ctx.session, config.keyspace, o.partitions, o.latencyPollMs);
  const producer = new Producer(config);
  try {
    ctx.status(`${name}: starting the worker…`);
    await waitAssigned(ctx, worker);
    await producer.connect();
    watcher.start();

    const rand = prng(o.seed + percent);
    const [w0, w1, w2] = o.healthMix;
    const health = () => {
      const h = rand() * (w0 + w1 + w2);
      return h < w0 ? 0 : h < w0 + w1 ? 1 : 2;
    };
    const cpuAtStart = worker.cpuSeconds();
    const serversAtStart = ctx.serverCpu();
    const started = Date.now();
    const measureFrom = started + o.latencyWarmupSeconds * 1000;
    const end = measureFrom + o.latencySeconds * 1000;
    let sent = 0;
    let failure: unknown;
    const inFlight = new Set<Promise<void>>();
    while (Date.now() < end) {
      worker.assertRunning();
      watcher.check();
      if (failure !== undefined) throw failure;
      const now = Date.now();
      const due = Math.floor(((now - started) / 1000) * rate) - sent;
      if (due > 0) {
        const records: OutgoingRecord[] = [];
        for (let i = 0; i < due; i++, sent++) {
          const client = ORIGINAL_CLIENTS[sent % ORIGINAL_CLIENTS.length]!;
          const id = BigInt.asIntN(64, BigInt(`0x${randomBytes(8).toString('hex')}`));
          records.push({ key: client, value: encodeEvent({ id, ts: now, source: ORIGINAL_SOURCE, client, health: health() }), partition: sent % o.partitions });
        }
        const p = producer.send(config.topic, records).catch((e: unknown) => {
          failure ??= e;
        });
        inFlight.add(p);
        void p.finally(() => inFlight.delete(p));
      }
      ctx.status(`${name}: ${rate}/s for ${o.latencyWarmupSeconds}+${o.latencySeconds}s: produced ${sent}, readable ${watcher.count}`);
      await pause(TICK_MS, ctx.signal);
    }
    await Promise.all(inFlight);
    if (failure !== undefined) throw failure;
    const producedSeconds = (Date.now() - started) / 1000;

    // Every produced event must become readable; the worker may still be catching up.
    const deadline = Date.now() + 120_000;
    while (watcher.count < sent) {
      worker.assertRunning();
      watcher.check();
      if (Date.now() > deadline) {
        throw new ExactlyOnceError('EO_VERIFY_FAILED', `${name}: ${sent - watcher.count} of ${sent} produced events never became readable within 120s`, { details: worker.tail() });
      }
      ctx.status(`${name}: waiting for the last rows: ${watcher.count}/${sent}`);
      await pause(50, ctx.signal);
    }
    const serversAtEnd = ctx.serverCpu();
    await watcher.stop();

    const counted: number[] = [];
    for (let i = 0; i < watcher.ts.length; i++) if (watcher.ts[i]! >= measureFrom && watcher.ts[i]! < end) counted.push(watcher.latencyMs[i]!);
    counted.sort((a, b) => a - b);
    const processes = [processFacts('worker', worker, cpuAtStart)];
    return {
      title: `latency at ${percent} % of the 1-worker maximum (${rate}/s target)`,
      eventsPerSec: sent / producedSeconds,
      events: sent,
      seconds: producedSeconds,
      processes,
      cpuMsPer1000Events: cpuPer1000(processes, sent),
      // Includes the watcher's reads: a latency case's server figures are not comparable with the others.
      serverCpuMsPer1000Events: serverCpuPer1000(serversAtStart, serversAtEnd, sent),
      latency: {
        targetRate: rate,
        percentOfMax: percent,
        p50Ms: quantile(counted, 0.5),
        p95Ms: quantile(counted, 0.95),
        p99Ms: quantile(counted, 0.99),
        maxMs: counted[counted.length - 1] ?? NaN,
        samples: counted.length,
        pollMs: o.latencyPollMs,
      },
    };
  } finally {
    await watcher.stop();
    await producer.close();
    await worker.stop();
    await ctx.dropKeyspace(config.keyspace);
    await ctx.deleteTopic(config.topic);
    await ctx.deleteTopic(config.alertsTopic);
  }
}
