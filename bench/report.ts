/** The one table a bench run prints, and the files it writes (JSON and SVG under --out). */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatTable } from '../src/text-table.js';
import { renderChart } from './chart.js';
import type { PauseShare } from './gc-pauses.js';
import type { BenchResults, CaseResult } from './results.js';
import type { WorkerLoop } from './stages.js';

const int = (n: number | undefined | null) => (n === undefined || n === null || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US'));
const ratio = (n: number | null) => (n === null || !Number.isFinite(n) ? '-' : `${n.toFixed(2)}×`);
const ms = (n: number | undefined | null) => (n === undefined || n === null || !Number.isFinite(n) ? '-' : String(Math.round(n)));

function rss(c: CaseResult): string {
  const values = c.processes.map((p) => p.peakRssMiB).filter((v): v is number => v !== null);
  return values.length === 0 ? '-' : values.map((v) => Math.round(v)).join(' / ');
}

/**
 * The cores the case kept busy: the CPU per event of its processes, the servers and (latency cases)
 * the bench's own, times its rate. Near the machine's count, the case was bound by the machine's CPU,
 * shared by all of them, and not by any one of them waiting. '-' when the servers' CPU was not
 * measured (the Kafka client cases): a sum without them would understate it.
 */
export function coresBusy(c: CaseResult): string {
  const own = [c.cpuMsPer1000Events, c.serverCpuMsPer1000Events?.cassandra, c.serverCpuMsPer1000Events?.kafka];
  if (!own.every((v): v is number => typeof v === 'number' && Number.isFinite(v))) return '-';
  const ms = own.reduce((a, v) => a + v, 0) + (c.benchCpuMsPer1000Events ?? 0);
  return ((ms * c.eventsPerSec) / 1e6).toFixed(2);
}

/** Cases that store the same kind of rows as the baseline and the ceiling (the alerts case does more). */
function sameRows(name: string, c: CaseResult): boolean {
  return c.latency === undefined && name !== 'exactlyOnce1Alerts' && !name.startsWith('client');
}

function latencyOf(r: BenchResults) {
  return Object.values(r.cases).find((c) => c.latency !== undefined)?.latency;
}

export function formatResults(r: BenchResults): string {
  const baseline = r.cases['baseline']?.eventsPerSec;
  const ceiling = r.cases['ceiling']?.eventsPerSec;
  const rows = Object.entries(r.cases).map(([name, c]) => [
    name,
    int(c.events),
    // A latency case whose producer could not keep to its rate says so.
    c.latency !== undefined && c.eventsPerSec < 0.95 * c.latency.targetRate ? `${int(c.eventsPerSec)} of ${int(c.latency.targetRate)}` : int(c.eventsPerSec),
    sameRows(name, c) && baseline !== undefined && name !== 'ceiling' ? ratio(c.eventsPerSec / baseline) : '',
    sameRows(name, c) && ceiling !== undefined ? ratio(c.eventsPerSec / ceiling) : '',
    ms(c.latency?.p50Ms),
    ms(c.latency?.p95Ms),
    ms(c.latency?.p99Ms),
    rss(c),
    [c.cpuMsPer1000Events, c.serverCpuMsPer1000Events?.cassandra, c.serverCpuMsPer1000Events?.kafka].map(ms).join(' / '),
    coresBusy(c),
  ]);
  const table = formatTable(
    ['case', 'events', 'events/s', 'vs baseline', 'vs ceiling', 'p50 ms', 'p95 ms', 'p99 ms', 'peak RSS MiB', 'CPU ms/1k ev: client / C* / Kafka', `cores busy (of ${r.machine.cpus})`],
    rows,
  );
  const lines = [
    table,
    ...stageLines(r),
    '',
    `exactly-once (1 worker) / baseline = ${ratio(r.ratios.exactlyOnceToBaseline)}   exactly-once (1 worker) / ceiling = ${ratio(r.ratios.exactlyOnceToCeiling)}` +
      (r.ratios.alertsToExactlyOnce === null ? '' : `   with alerts / without = ${ratio(r.ratios.alertsToExactlyOnce)}`),
    ...(r.ratios.workerCpuToClient == null
      ? []
      : [`worker CPU per event / the Kafka client's alone = ${ratio(r.ratios.workerCpuToClientConsume ?? null)} (lower-level consume, the worker's path), ${ratio(r.ratios.workerCpuToClient)} (KafkaJS layer)`]),
    `latency: produce → row readable (1 row in ${latencyOf(r)?.sampleEvery ?? '-'} read back every ${latencyOf(r)?.pollMs ?? '-'} ms); peak RSS: VmHWM of each process;`,
    `CPU: user+system while measured, of the case's own processes (client), Cassandra (C*) and Kafka; cores busy: all of them and the bench's own (latency cases: producing, reading back), per second`,
  ];
  return lines.join('\n');
}

/** A stage's p99: whole ms from 10 ms on. */
const fmtMs = (ms: number): string => (ms >= 10 ? String(Math.round(ms)) : ms.toFixed(1));

const STAGE_ORDER = ['idle', 'queued', 'identity', 'decode', 'rows', 'checkpoint_wait', 'checkpoint'];

/** What held the worker's event loop up in a latency case (bench/stages.ts). */
export function workerLoopLine(w: WorkerLoop): string {
  const delay = w.delayP99Ms === undefined ? '' : `the worker's event loop p99 delay ${fmtMs(w.delayP99Ms)} ms (max ${fmtMs(w.delayMaxMs!)} ms), `;
  return `${delay}its GC ${w.gcCount} collection${w.gcCount === 1 ? '' : 's'} (${w.gcSeconds} s in all, ${w.gcOver10Ms} over 10 ms)`;
}

/** What Cassandra's GC pauses account for in a latency case's tail (bench/gc-pauses.ts). */
export function pauseLine(g: PauseShare): string {
  return (
    `Cassandra's JVM paused ${g.pauses} time${g.pauses === 1 ? '' : 's'} (${g.pausedSeconds} s in all, the longest ${g.longestMs} ms); ` +
    `${g.overDuringPause} of the ${g.over} sampled latencies over ${g.overMs} ms were in flight during a pause, and p99 outside them is ${Number.isNaN(g.p99OutsidePausesMs) ? '-' : Math.round(g.p99OutsidePausesMs)} ms`
  );
}

/**
 * Where the workers' batches spent their time in each case (bench/stages.ts), and for a latency case
 * how much of its p50 the stages on a record's path account for (stageShareOfP50).
 */
export function stageLines(r: BenchResults): string[] {
  const lines: string[] = [];
  for (const [name, c] of Object.entries(r.cases)) {
    const st = c.stages;
    if (st === undefined) continue;
    const known = STAGE_ORDER.filter((s) => st[s] !== undefined);
    const parts = [...known, ...Object.keys(st).filter((s) => !STAGE_ORDER.includes(s))].map((s) => `${s} ${st[s]!.meanMs.toFixed(1)}${st[s]!.p99Ms === undefined ? '' : ` (p99 ${fmtMs(st[s]!.p99Ms!)})`}`);
    let line = `  ${name}: ${parts.join(', ')} (${int(st['rows']?.batches)} batches${c.identityChecks === undefined ? '' : `, ${int(c.identityChecks)} identity checks`})`;
    const share = stageShareOfP50(c);
    if (share !== undefined) line += `; queued + identity + decode + rows + half the read-back interval: ${Math.round(share * 100)} % of p50 ${Math.round(c.latency!.p50Ms)} ms`;
    const loop = c.latency?.benchLoopDelayP99Ms;
    if (loop !== undefined) line += `; the bench's own event loop (producer, read-back) p99 delay ${fmtMs(loop)} ms`;
    const w = c.latency?.workerLoop;
    if (w !== undefined) line += `; ${workerLoopLine(w)}`;
    const g = c.latency?.cassandraGcPauses;
    if (g !== undefined) line += `; ${pauseLine(g)}`;
    lines.push(line);
  }
  return lines.length === 0 ? [] : ['', "where a batch's wall time goes (mean ms per batch by stage, and its p99 from the histogram's buckets; /metrics exactlyonce_batch_stage_seconds):", ...lines];
}

/** The issue's goals (bench/README.md, "Goals"), one column per commit log the run measured. */
export function formatGoals(all: readonly BenchResults[]): string {
  const check = (v: number | null | undefined, ok: (v: number) => boolean, show: (v: number) => string) =>
    v === null || v === undefined || !Number.isFinite(v) ? '-' : `${show(v)} ${ok(v) ? 'met' : 'NOT met'}`;
  const x = (v: number) => `${v.toFixed(2)}×`;
  const pct = (v: number) => `${Math.round(v * 100)} %`;
  const goals: Array<[string, (r: BenchResults) => string]> = [
    ['exactly-once (1 worker) ≥ 0.5× the ceiling', (r) => check(r.ratios.exactlyOnceToCeiling, (v) => v >= 0.5, x)],
    ['exactly-once (1 worker) ≥ 0.95× the baseline', (r) => check(r.ratios.exactlyOnceToBaseline, (v) => v >= 0.95, x)],
    ['with alerts ≥ 0.9× without', (r) => check(r.ratios.alertsToExactlyOnce, (v) => v >= 0.9, x)],
    ["worker CPU ≤ 1.2× the Kafka client's own (consume)", (r) => check(r.ratios.workerCpuToClientConsume, (v) => v <= 1.2, x)],
    ['worker CPU ≤ 15 ms / 1k events', (r) => check(r.cases['exactlyOnce1']?.cpuMsPer1000Events, (v) => v <= 15, (v) => `${v.toFixed(1)} ms`)],
    ['sink, log mode ≥ 0.95× exactly-once (1 worker)', (r) => check(r.ratios.sinkLogToExactlyOnce, (v) => v >= 0.95, x)],
    ['sink, upsert mode ≥ 0.8× exactly-once (1 worker)', (r) => check(r.ratios.sinkUpsertToExactlyOnce, (v) => v >= 0.8, x)],
    ['sink, aggregate mode ≥ 0.8× log mode (rows written per 1,000 records)', (r) => `${check(r.ratios.sinkAggregateToLog, (v) => v >= 0.8, x)} (${r.cases['sinkAggregate']?.cassandraWritesPer1000Events ?? '–'})`],
    ['sink with key and metadata columns, a filter and a TTL ≥ 0.85× log mode (one topic)', (r) => `${check(r.ratios.sinkWideToLog, (v) => v >= 0.85, x)} (CPU ${r.cases['sinkWide']?.cpuMsPer1000Events?.toFixed(1) ?? '–'} against ${r.cases['sinkLog']?.cpuMsPer1000Events?.toFixed(1) ?? '–'} ms per 1k)`],
    ['sink CPU ≤ 1.1× exactly-once (1 worker), log / upsert', (r) => `${check(r.ratios.sinkLogCpuToExactlyOnce, (v) => v <= 1.1, x)} / ${check(r.ratios.sinkUpsertCpuToExactlyOnce, (v) => v <= 1.1, x)}`],
    ['latency p99 ≤ 100 ms at 25 %', (r) => check(r.cases['latency25']?.latency?.p99Ms, (v) => v <= 100, (v) => `${Math.round(v)} ms`)],
    ['the stages account for ≥ 90 % of p50 (25 %)', (r) => check(stageShareOfP50(r.cases['latency25']), (v) => v >= 0.9, pct)],
    ['peak RSS ≤ 256 MiB at 1,000,000 behind', (r) => check(r.cases['memoryBehind']?.processes[0]?.peakRssMiB, (v) => v <= 256, (v) => `${Math.round(v)} MiB`)],
    ['aggregate sink: peak RSS ≤ 256 MiB, ~100,000 groups in one window', (r) => check(r.cases['sinkAggregateGroups']?.processes[0]?.peakRssMiB, (v) => v <= 256, (v) => `${Math.round(v)} MiB`)],
    ['the sink: peak RSS ≤ 256 MiB at 1,000,000 behind', (r) => check(r.cases['sinkMemoryBehind']?.processes[0]?.peakRssMiB, (v) => v <= 256, (v) => `${Math.round(v)} MiB`)],
  ];
  return formatTable(
    ['goal', ...all.map((r) => `commit log: ${r.commitlog ?? 'as it runs'}`)],
    goals.map(([goal, f]) => [goal, ...all.map(f)]),
  );
}

/**
 * How much of a latency case's p50 the stages on a record's path account for (their means): queued (in
 * Kafka and the client), the identity check it waited for, decode, rows (the row is readable once acknowledged), and half the read-back
 * interval of the watcher. Undefined without a stage breakdown.
 */
export function stageShareOfP50(c: CaseResult | undefined): number | undefined {
  const st = c?.stages;
  if (c?.latency === undefined || st?.['queued'] === undefined) return undefined;
  const path = st['queued'].meanMs + (st['identity']?.meanMs ?? 0) + (st['decode']?.meanMs ?? 0) + (st['rows']?.meanMs ?? 0) + c.latency.pollMs / 2;
  return path / c.latency.p50Ms;
}

/**
 * Writes `<out>/bench-<time>[-<commit log>].json` and `.svg`, and, for a run of every case (`asLatest`),
 * the same as `latest[-<commit log>].json` / `.svg` (what the READMEs show: a partial run must not replace it).
 */
export function writeResults(r: BenchResults, outDir: string, asLatest: boolean): { json: string; svg: string } {
  mkdirSync(outDir, { recursive: true });
  const suffix = r.commitlog === undefined ? '' : `-${r.commitlog}`;
  const stamp = r.startedAt.replace(/[:]/g, '').replace(/\.\d+Z$/, 'Z');
  const json = `${JSON.stringify(r, null, 2)}\n`;
  const svg = renderChart(r);
  const base = path.join(outDir, `bench-${stamp}${suffix}`);
  writeFileSync(`${base}.json`, json);
  writeFileSync(`${base}.svg`, svg);
  if (asLatest) {
    writeFileSync(path.join(outDir, `latest${suffix}.json`), json);
    writeFileSync(path.join(outDir, `latest${suffix}.svg`), svg);
  }
  return { json: `${base}.json`, svg: `${base}.svg` };
}
