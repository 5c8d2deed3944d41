/**
 * One benchmark run: the cases of issue 6 in order, each on its own keyspace and consumer group, then
 * the results. The throughput cases read the same pre-produced topic (every case starts from offset 0
 * with a fresh group and a fresh keyspace, so it is fresh to each of them, and none pays for producing);
 * the latency and memory cases fill topics of their own. Whatever happens, everything the run started
 * or created is stopped and removed before it returns.
 */
import os from 'node:os';
import type { ConnectionConfig } from '../src/config.js';
import { ExactlyOnceError } from '../src/errors.js';
import { produceAlertsTopic, runAlerts } from './alerts.js';
import { runBaseline } from './baseline.js';
import { runCeiling } from './ceiling.js';
import { runClient } from './client.js';
import { BenchContext, bounded } from './context.js';
import { runExactlyOnce } from './exactly-once.js';
import { runLatency } from './latency.js';
import { runSink } from './sink.js';
import { machine, versions } from './machine.js';
import { runMemoryBehind } from './memory.js';
import type { BenchOptions } from './options.js';
import type { BenchResults, CaseResult } from './results.js';
import { produceWorkload, type Workload } from './workload.js';

const round2 = (x: number) => Math.round(x * 100) / 100;

export interface RunHooks {
  signal: AbortSignal;
  /** Receives the function that kills every process at once (for a second Ctrl-C). */
  onKill?: (kill: () => void) => void;
  command: string;
  /** The local Cassandra's commit log sync during this run, when the bench set it. */
  commitlog?: string;
}

export async function runBench(base: ConnectionConfig, o: BenchOptions, hooks: RunHooks): Promise<BenchResults> {
  const wants = (g: Parameters<typeof o.cases.has>[0]) => o.cases.has(g);
  if (wants('latency') && !wants('eo1') && o.latencyMaxRate === undefined) {
    throw new ExactlyOnceError('EO_USAGE', '--cases: latency needs eo1 (its rate is a share of that case) or --latency-max-rate');
  }
  const startedAt = new Date();
  const ctx = await BenchContext.open(base, o, hooks.signal);
  hooks.onKill?.(() => ctx.killAll());
  const cases: Record<string, CaseResult> = {};
  try {
    const facts = { versions: await versions(ctx), machine: machine() };
    const workload: Workload = { events: o.events, partitions: o.partitions, seed: o.seed, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: o.eventTimeRate, healthMix: o.healthMix, keys: o.upsertKeys };
    const steps: Array<[string, () => Promise<void>]> = [];
    const needsTopic = wants('client') || wants('baseline') || wants('eo1') || wants('eoN') || wants('sink');
    const topic = ctx.caseConfig('events');
    if (needsTopic) {
      steps.push([
        `pre-producing ${o.events} events over ${o.partitions} partitions to ${topic.topic}`,
        async () => {
          await ctx.freshTopic(topic, o.partitions);
          const rate = await produceWorkload(ctx, topic, workload, 'produce');
          ctx.say(`  produced at ${Math.round(rate)}/s`);
        },
      ]);
    }
    const record = (name: string, c: CaseResult) => {
      const previous = cases[name];
      const runs = [...(previous?.runs ?? []), c.eventsPerSec];
      cases[name] = { ...(previous === undefined || c.eventsPerSec > previous.eventsPerSec ? c : previous), runs };
      const extra = c.latency ? `, p50 ${Math.round(c.latency.p50Ms)} ms, p99 ${Math.round(c.latency.p99Ms)} ms` : '';
      const rss = c.processes.map((p) => p.peakRssMiB ?? '?').join('/');
      ctx.say(`  ${name}: ${Math.round(c.eventsPerSec)} events/s${extra}, peak RSS ${rss} MiB`);
    };
    if (wants('client')) {
      steps.push([
        'the Kafka client alone: the topic read and thrown away (KafkaJS layer, then lower-level consume)',
        async () => {
          for (const [name, c] of Object.entries(await runClient(ctx, topic.topic, o.events))) record(name, c);
        },
      ]);
    }
    if (wants('ceiling')) steps.push(['ceiling: the same rows, written from a tight loop', async () => record('ceiling', await runCeiling(ctx, workload))]);
    let alertsTopic: ConnectionConfig | undefined;
    if (wants('alerts')) {
      steps.push([
        `pre-producing ${o.alertsEvents} Critical events for the alerts case`,
        async () => {
          alertsTopic = await produceAlertsTopic(ctx);
        },
      ]);
    }
    for (let run = 1; run <= o.repeat; run++) {
      const nth = o.repeat > 1 ? ` (run ${run} of ${o.repeat})` : '';
      if (wants('baseline')) steps.push([`baseline: at-least-once consumer${nth}`, async () => record('baseline', await runBaseline(ctx, topic.topic, o.events))]);
      if (wants('eo1')) steps.push([`exactly-once, 1 worker${nth}`, async () => record('exactlyOnce1', await runExactlyOnce(ctx, 'exactlyOnce1', topic.topic, 1))]);
      if (wants('alerts')) steps.push([`exactly-once with alerts, 1 worker${nth}`, async () => record('exactlyOnce1Alerts', await runAlerts(ctx, alertsTopic!.topic))]);
      if (wants('sink')) {
        steps.push([`the sink, log mode, 1 worker${nth}`, async () => record('sinkLog', await runSink(ctx, 'sinkLog', topic.topic, 'log'))]);
        steps.push([`the sink, upsert mode, 1 worker${nth}`, async () => record('sinkUpsert', await runSink(ctx, 'sinkUpsert', topic.topic, 'upsert'))]);
        steps.push([`the sink, aggregate mode, 1 worker${nth}`, async () => record('sinkAggregate', await runSink(ctx, 'sinkAggregate', topic.topic, 'aggregate'))]);
        steps.push([`the sink, log mode with key and metadata columns, a filter and a TTL, 1 worker${nth}`, async () => record('sinkWide', await runSink(ctx, 'sinkWide', topic.topic, 'wide'))]);
      }
    }
    if (wants('eoN')) {
      const name = `exactlyOnce${o.workers}`;
      steps.push([`exactly-once, ${o.workers} workers`, async () => record(name, await runExactlyOnce(ctx, name, topic.topic, o.workers))]);
    }
    if (needsTopic) steps.push(['deleting the pre-produced topic', () => ctx.deleteTopic(topic.topic)]);
    if (wants('alerts')) steps.push(["deleting the alerts case's topic", () => ctx.deleteTopic(alertsTopic!.topic)]);
    if (wants('latency')) {
      for (const percent of o.latencyPercents) {
        steps.push([
          `latency at ${percent} % of the exactly-once maximum`,
          async () => {
            const max = o.latencyMaxRate ?? cases['exactlyOnce1']!.eventsPerSec;
            record(`latency${percent}`, await runLatency(ctx, percent, max));
          },
        ]);
      }
    }
    if (wants('memory')) {
      steps.push([
        `memory: 1 worker${wants('sink') ? ', then the sink,' : ''} starting ${o.behindEvents} events behind`,
        async () => {
          for (const [name, c] of Object.entries(await runMemoryBehind(ctx, wants('sink')))) record(name, c);
        },
      ]);
    }

    for (const [i, [title, step]] of steps.entries()) {
      const t0 = Date.now();
      const load0 = os.loadavg()[0]!;
      ctx.say(`[${i + 1}/${steps.length}] ${title}   (load average ${load0.toFixed(1)})`);
      const before = new Set(Object.values(cases));
      await bounded(step(), (o.caseTimeoutSeconds + 120) * 1000, title, ctx.signal);
      for (const c of Object.values(cases)) if (!before.has(c)) c.loadAverage ??= [round2(load0), round2(os.loadavg()[0]!)];
      ctx.say(`  (${((Date.now() - t0) / 1000).toFixed(1)}s)`);
    }

    const eo1 = cases['exactlyOnce1']?.eventsPerSec;
    const eoN = cases[`exactlyOnce${o.workers}`]?.eventsPerSec;
    const baseline = cases['baseline']?.eventsPerSec;
    const ceiling = cases['ceiling']?.eventsPerSec;
    const div = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined || b === 0 ? null : a / b);
    const finishedAt = new Date();
    return {
      runId: ctx.runId,
      startedAt: startedAt.toISOString(),
      finishedAt: finishedAt.toISOString(),
      durationSeconds: Math.round((finishedAt.getTime() - startedAt.getTime()) / 100) / 10,
      command: hooks.command,
      ...(hooks.commitlog === undefined ? {} : { commitlog: hooks.commitlog }),
      options: { ...o, cases: [...o.cases] },
      versions: facts.versions,
      machine: { ...facts.machine, loadAverageAtEnd: os.loadavg().map((x) => Math.round(x * 100) / 100) },
      cases,
      ratios: {
        exactlyOnceToBaseline: div(eo1, baseline),
        exactlyOnceToCeiling: div(eo1, ceiling),
        exactlyOnceNToBaseline: div(eoN, baseline),
        alertsToExactlyOnce: div(cases['exactlyOnce1Alerts']?.eventsPerSec, eo1),
        sinkLogToExactlyOnce: div(cases['sinkLog']?.eventsPerSec, eo1),
        sinkUpsertToExactlyOnce: div(cases['sinkUpsert']?.eventsPerSec, eo1),
        sinkLogCpuToExactlyOnce: div(cases['sinkLog']?.cpuMsPer1000Events ?? undefined, cases['exactlyOnce1']?.cpuMsPer1000Events ?? undefined),
        sinkUpsertCpuToExactlyOnce: div(cases['sinkUpsert']?.cpuMsPer1000Events ?? undefined, cases['exactlyOnce1']?.cpuMsPer1000Events ?? undefined),
        sinkAggregateToLog: div(cases['sinkAggregate']?.eventsPerSec, cases['sinkLog']?.eventsPerSec),
        sinkWideToLog: div(cases['sinkWide']?.eventsPerSec, cases['sinkLog']?.eventsPerSec),
        workerCpuToClient: div(cases['exactlyOnce1']?.cpuMsPer1000Events ?? undefined, cases['clientKafkaJS']?.cpuMsPer1000Events ?? undefined),
        workerCpuToClientConsume: div(cases['exactlyOnce1']?.cpuMsPer1000Events ?? undefined, cases['clientConsume']?.cpuMsPer1000Events ?? undefined),
      },
    };
  } finally {
    ctx.say(o.keep ? 'stopping the processes…' : 'cleaning up: stopping the processes, dropping the bench keyspaces and topics…');
    await ctx.cleanup();
    await ctx.close();
  }
}
