/** The one table a bench run prints, and the files it writes (JSON and SVG under --out). */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatTable } from '../src/format/table.js';
import { renderChart } from './chart.js';
import type { BenchResults, CaseResult } from './results.js';

const int = (n: number | undefined | null) => (n === undefined || n === null || !Number.isFinite(n) ? '-' : Math.round(n).toLocaleString('en-US'));
const ratio = (n: number | null) => (n === null || !Number.isFinite(n) ? '-' : `${n.toFixed(2)}×`);
const ms = (n: number | undefined | null) => (n === undefined || n === null || !Number.isFinite(n) ? '-' : String(Math.round(n)));

function rss(c: CaseResult): string {
  const values = c.processes.map((p) => p.peakRssMiB).filter((v): v is number => v !== null);
  return values.length === 0 ? '-' : values.map((v) => Math.round(v)).join(' / ');
}

/** Cases that store the same kind of rows as the baseline and the ceiling (the alerts case does more). */
function sameRows(name: string, c: CaseResult): boolean {
  return c.latency === undefined && name !== 'exactlyOnce1Alerts';
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
  ]);
  const table = formatTable(
    ['case', 'events', 'events/s', 'vs baseline', 'vs ceiling', 'p50 ms', 'p95 ms', 'p99 ms', 'peak RSS MiB', 'CPU ms/1k ev: client / C* / Kafka'],
    rows,
  );
  const lines = [
    table,
    '',
    `exactly-once (1 worker) / baseline = ${ratio(r.ratios.exactlyOnceToBaseline)}   exactly-once (1 worker) / ceiling = ${ratio(r.ratios.exactlyOnceToCeiling)}` +
      (r.ratios.alertsToExactlyOnce === null ? '' : `   with alerts / without = ${ratio(r.ratios.alertsToExactlyOnce)}`),
    `latency: produce → row readable (1 row in ${latencyOf(r)?.sampleEvery ?? '-'} read back every ${latencyOf(r)?.pollMs ?? '-'} ms); peak RSS: VmHWM of each process;`,
    `CPU: user+system while measured, of the case's own processes (client), Cassandra (C*) and Kafka`,
  ];
  return lines.join('\n');
}

/**
 * Writes `<out>/bench-<time>.json` and `.svg`, and, for a run of every case (`asLatest`), the same as
 * `latest.json` / `latest.svg` (what the README shows: a partial run must not replace it).
 */
export function writeResults(r: BenchResults, outDir: string, asLatest: boolean): { json: string; svg: string } {
  mkdirSync(outDir, { recursive: true });
  const stamp = r.startedAt.replace(/[:]/g, '').replace(/\.\d+Z$/, 'Z');
  const json = `${JSON.stringify(r, null, 2)}\n`;
  const svg = renderChart(r);
  const base = path.join(outDir, `bench-${stamp}`);
  writeFileSync(`${base}.json`, json);
  writeFileSync(`${base}.svg`, svg);
  if (asLatest) {
    writeFileSync(path.join(outDir, 'latest.json'), json);
    writeFileSync(path.join(outDir, 'latest.svg'), svg);
  }
  return { json: `${base}.json`, svg: `${base}.svg` };
}
