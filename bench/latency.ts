/**
 * End-to-end latency at a fixed rate: one worker owns a fresh topic; events are produced at `rate` per
 * second (each stamped with the wall clock as its event time when it is handed to the producer) while a
 * RowWatcher reads a sample of the rows back. Latency = first time the row was read − event time; only
 * events produced after the warm-up count. The figures are upper bounds by up to one poll interval.
 * The case ends when every sampled row was read and the worker's checkpoints reached the log end.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { encodeEvent } from '../src/jobs/events/event.js';
import { ORIGINAL_CLIENTS, ORIGINAL_SOURCE } from '../src/jobs/events/generator.js';
import { prng } from '../src/prng.js';
import { ExactlyOnceError } from '../src/errors.js';
import { producePaced } from '../src/harness/paced-producer.js';
import { Producer, type OutgoingRecord } from '../src/kafka/producer.js';
import { BenchAborted, bounded, pause, type BenchContext } from './context.js';
import { startWorker, waitAssigned } from './processes.js';
import { checkpointProgress, drainTarget } from './drain.js';
import { cpuPer1000, processFacts, serverCpuPer1000, type CaseResult } from './results.js';
import { quantile, RowWatcher } from './row-watcher.js';
import { parseLayout } from '../src/jobs/events/events-layout.js';
import { readWorkers, stagesBetween, workerLoopBetween, type WorkerReading } from './stages.js';
import { parseGcPauses, pauseShare, type PauseShare } from './gc-pauses.js';
import { tailFile } from '../src/stack/process.js';
import { gcLogFile } from '../src/stack/cassandra-server.js';
import { stat } from 'node:fs/promises';

/** How often, in ms, the worker and the watcher are checked while producing. */
const CHECK_EVERY_MS = 10;
/** One record in this many (per partition) is watched. */
const SAMPLE_EVERY = 10;

export async function runLatency(ctx: BenchContext, percent: number, maxRate: number): Promise<CaseResult> {
  const o = ctx.options;
  const name = `latency${percent}`;
  const rate = Math.max(1, Math.round((maxRate * percent) / 100));
  const config = ctx.caseConfig(name);
  await ctx.freshTopic(config, o.partitions);
  await ctx.freshKeyspace(config);
  await ctx.freshAlertsTopic(config, o.partitions);
  const worker = await startWorker(ctx, config, `${name} worker`);
  const watcher = new RowWatcher(ctx.session, config.keyspace, o.partitions, o.latencyPollMs, SAMPLE_EVERY, parseLayout(o.layout));
  const checkpointed = checkpointProgress(ctx, config.keyspace, config.topic);
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
    // Where the local Cassandra's GC log stands: what it gains during the case tells its pauses.
    const cassandraLog = ctx.servers.find((s) => s.name === 'cassandra')?.logFile;
    const gcLog = cassandraLog === undefined ? undefined : gcLogFile(cassandraLog);
    const gcFrom = gcLog === undefined ? undefined : await stat(gcLog).then((st) => st.size, () => undefined);
    const cpuAtStart = worker.cpuSeconds();
    const serversAtStart = ctx.serverCpu();
    const benchCpuAtStart = process.cpuUsage();
    const started = Date.now();
    const measureFrom = started + o.latencyWarmupSeconds * 1000;
    const end = measureFrom + o.latencySeconds * 1000;
    let sent = 0;
    // Each record is made when the paced producer takes it, that is when it is due, and stamped then.
    let checkedAt = 0;
    // The worker's stage and GC totals when the measured window opens (bench/stages.ts); reading them
    // also starts its event-loop delay afresh.
    let workerAtStart: Promise<WorkerReading> | undefined;
    // The bench's own event loop (producer and watcher share it): a late poll adds to every latency it reads.
    let loopDelay: IntervalHistogram | undefined;
    const records = function* (): Generator<OutgoingRecord> {
      for (let now = Date.now(); now < end; now = Date.now(), sent++) {
        if (now - checkedAt >= CHECK_EVERY_MS) {
          checkedAt = now;
          if (now >= measureFrom && workerAtStart === undefined) {
            workerAtStart = readWorkers([worker]);
            loopDelay = monitorEventLoopDelay({ resolution: 10 });
            loopDelay.enable();
          }
          worker.assertRunning();
          watcher.check();
          ctx.status(`${name}: ${rate}/s for ${o.latencyWarmupSeconds}+${o.latencySeconds}s: produced ${sent}, sampled rows readable ${watcher.progress.seen}/${watcher.progress.sampled}`);
        }
        const client = ORIGINAL_CLIENTS[sent % ORIGINAL_CLIENTS.length]!;
        // Distinct ids spread over int64 (an odd multiplier is a bijection mod 2^64): crypto's
        // randomBytes per record took 16 % of this process's CPU, whose event loop also reads the rows back.
        const id = BigInt.asIntN(64, BigInt(sent + 1) * 0x9e3779b97f4a7c15n);
        const partition = sent % o.partitions;
        watcher.sent(partition);
        yield { key: client, value: encodeEvent({ id, ts: now, source: ORIGINAL_SOURCE, client, health: health() }), partition };
      }
    };
    await producePaced(producer, records(), { topic: config.topic, rate, chunk: 1000, inFlight: 64, signal: ctx.signal });
    if (ctx.signal.aborted) throw new BenchAborted();
    const producedSeconds = (Date.now() - started) / 1000;
    loopDelay?.disable();
    const workerAtEnd = await readWorkers([worker]);
    const atStart = await workerAtStart;
    const stages = stagesBetween(atStart?.stages ?? {}, workerAtEnd.stages);
    const identityChecks = workerAtEnd.identityChecks - (atStart?.identityChecks ?? 0);
    const workerLoop = atStart === undefined ? undefined : workerLoopBetween(atStart, workerAtEnd);

    // Every sampled row must become readable and every event be checkpointed; the worker may still be catching up.
    const target = await drainTarget(ctx, config.topic);
    const deadline = Date.now() + 120_000;
    for (;;) {
      worker.assertRunning();
      watcher.check();
      const { seen, sampled } = watcher.progress;
      const stored = seen === sampled ? await checkpointed().catch(() => 0) : 0;
      if (seen === sampled && stored >= target) break;
      if (Date.now() > deadline) {
        const what = `${sampled - seen} of ${sampled} sampled rows are not readable and ${stored} of ${target} offsets are checkpointed`;
        throw new ExactlyOnceError('EO_VERIFY_FAILED', `${name}: 120s after the last event, ${what}`, { details: worker.tail() });
      }
      ctx.status(`${name}: waiting for the last rows: sampled ${seen}/${sampled}`);
      await pause(50, ctx.signal);
    }
    const benchCpu = process.cpuUsage(benchCpuAtStart);
    const serversAtEnd = ctx.serverCpu();
    await watcher.stop();

    const counted: number[] = [];
    for (let i = 0; i < watcher.ts.length; i++) if (watcher.ts[i]! >= measureFrom && watcher.ts[i]! < end) counted.push(watcher.latencyMs[i]!);
    counted.sort((a, b) => a - b);
    let gcPauses: PauseShare | undefined;
    if (gcLog !== undefined && gcFrom !== undefined) {
      // What the log gained since (a case logs a few hundred collections at most; none after a rotation).
      const log = await tailFile(gcLog, 100_000, gcFrom).catch(() => undefined);
      if (log !== undefined) gcPauses = pauseShare(watcher.ts, watcher.latencyMs, parseGcPauses(log), { from: measureFrom, to: end });
    }
    const processes = [processFacts('worker', worker, cpuAtStart)];
    return {
      title: `latency at ${percent} % of the 1-worker maximum (${rate}/s target)`,
      eventsPerSec: sent / producedSeconds,
      events: sent,
      seconds: producedSeconds,
      processes,
      cpuMsPer1000Events: cpuPer1000(processes, sent),
      // Include the watcher's reads, and the fixed costs of a live rate (small batches): not comparable with the drains.
      serverCpuMsPer1000Events: serverCpuPer1000(serversAtStart, serversAtEnd, sent),
      benchCpuMsPer1000Events: Math.round((((benchCpu.user + benchCpu.system) / 1000) * 1000 / sent) * 10) / 10,
      ...(Object.keys(stages).length > 0 ? { stages, identityChecks } : {}),
      latency: {
        targetRate: rate,
        percentOfMax: percent,
        p50Ms: quantile(counted, 0.5),
        p95Ms: quantile(counted, 0.95),
        p99Ms: quantile(counted, 0.99),
        maxMs: counted[counted.length - 1] ?? NaN,
        samples: counted.length,
        pollMs: o.latencyPollMs,
        sampleEvery: SAMPLE_EVERY,
        ...(loopDelay === undefined ? {} : { benchLoopDelayP99Ms: Math.round(loopDelay.percentile(99) / 1e5) / 10 }),
        ...(gcPauses === undefined ? {} : { cassandraGcPauses: gcPauses }),
        ...(workerLoop === undefined ? {} : { workerLoop }),
      },
    };
  } finally {
    await watcher.stop();
    await bounded(producer.close(), 30_000, 'closing the producer', new AbortController().signal).catch(() => undefined);
    await worker.stop();
    await ctx.dropKeyspace(config.keyspace);
    await ctx.deleteTopic(config.topic);
    await ctx.deleteTopic(config.alertsTopic);
  }
}
