/**
 * The results as one hand-written SVG (no browser, no chart library): throughput per case, latency
 * percentiles per rate, and peak RSS per process, each as a panel of horizontal bars.
 */
import type { BenchResults } from './results.js';

interface Bar {
  label: string;
  value: number;
  text: string;
  color: string;
  /** Stacked parts (value = their sum), drawn left to right. */
  parts?: Array<{ value: number; color: string }>;
}

const WIDTH = 900;
const LABEL_W = 250;
const BAR_W = 480;
const ROW_H = 22;
const COLORS = {
  ceiling: '#7f7f7f',
  baseline: '#1f77b4',
  eo: '#2ca02c',
  memory: '#9467bd',
  p50: '#9ecae1',
  p95: '#3182bd',
  p99: '#08519c',
  client: '#ff7f0e',
  cassandra: '#d62728',
  kafka: '#8c564b',
};

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

function panel(title: string, unit: string, bars: Bar[], top: number): { svg: string; height: number } {
  const max = Math.max(1, ...bars.map((b) => (Number.isFinite(b.value) ? b.value : 0)));
  const parts = [`<text x="20" y="${top + 18}" class="title">${esc(title)}</text>`];
  const y0 = top + 32;
  bars.forEach((b, i) => {
    const y = y0 + i * ROW_H;
    const w = Number.isFinite(b.value) ? Math.max(1, (b.value / max) * BAR_W) : 0;
    parts.push(`<text x="${LABEL_W - 8}" y="${y + 14}" text-anchor="end">${esc(b.label)}</text>`);
    let x = LABEL_W;
    for (const part of b.parts ?? [{ value: b.value, color: b.color }]) {
      const pw = Number.isFinite(part.value) && b.value > 0 ? (part.value / b.value) * w : 0;
      parts.push(`<rect x="${x.toFixed(1)}" y="${y + 3}" width="${pw.toFixed(1)}" height="${ROW_H - 6}" fill="${part.color}"/>`);
      x += pw;
    }
    parts.push(`<text x="${LABEL_W + w + 6}" y="${y + 14}">${esc(b.text)}</text>`);
  });
  const axisY = y0 + bars.length * ROW_H + 4;
  parts.push(
    `<line x1="${LABEL_W}" y1="${y0}" x2="${LABEL_W}" y2="${axisY}" stroke="#333"/>`,
    `<text x="${LABEL_W + BAR_W}" y="${axisY + 14}" text-anchor="end" class="note">${esc(unit)}</text>`,
  );
  return { svg: parts.join('\n'), height: axisY + 24 - top };
}

export function renderChart(r: BenchResults): string {
  const cases = Object.entries(r.cases);
  const baseline = r.cases['baseline']?.eventsPerSec;
  const throughput: Bar[] = cases
    // The Kafka client alone stores nothing: its figure is CPU (the table), not a throughput to compare.
    .filter(([name, c]) => c.latency === undefined && !name.startsWith('client'))
    .map(([name, c]) => ({
      label: name,
      value: c.eventsPerSec,
      text: `${fmt(c.eventsPerSec)}/s${baseline !== undefined && !['baseline', 'ceiling', 'exactlyOnce1Alerts'].includes(name) ? ` (${(c.eventsPerSec / baseline).toFixed(2)}× baseline)` : ''}`,
      color: name === 'ceiling' ? COLORS.ceiling : name === 'baseline' ? COLORS.baseline : name.startsWith('memory') ? COLORS.memory : COLORS.eo,
    }));
  const latency: Bar[] = [];
  for (const [name, c] of cases) {
    if (c.latency === undefined) continue;
    const l = c.latency;
    for (const [q, v] of [['p50', l.p50Ms], ['p95', l.p95Ms], ['p99', l.p99Ms]] as const) {
      latency.push({ label: `${name} (${fmt(l.targetRate)}/s) ${q}`, value: v, text: `${fmt(v)} ms`, color: COLORS[q] });
    }
  }
  const memory: Bar[] = [];
  for (const [name, c] of cases) {
    if (name === 'ceiling') continue; // its RSS holds every prebuilt statement: not a worker figure
    for (const p of c.processes) {
      if (p.peakRssMiB === null) continue;
      memory.push({ label: c.processes.length > 1 ? `${name} ${p.role}` : name, value: p.peakRssMiB, text: `${fmt(p.peakRssMiB)} MiB`, color: name === 'baseline' ? COLORS.baseline : COLORS.eo });
    }
  }

  const cpu: Bar[] = [];
  for (const [name, c] of cases) {
    const client = c.cpuMsPer1000Events ?? NaN;
    const cass = c.serverCpuMsPer1000Events?.cassandra ?? NaN;
    const kafka = c.serverCpuMsPer1000Events?.kafka ?? NaN;
    if (![client, cass, kafka].every(Number.isFinite)) continue;
    cpu.push({
      label: name,
      value: client + cass + kafka,
      text: `${fmt(client)} + ${fmt(cass)} + ${fmt(kafka)} ms`,
      color: COLORS.client,
      parts: [
        { value: client, color: COLORS.client },
        { value: cass, color: COLORS.cassandra },
        { value: kafka, color: COLORS.kafka },
      ],
    });
  }

  const body: string[] = [];
  let y = 50;
  for (const [title, unit, bars] of [
    ['Throughput (events/s, higher is better)', 'events/s', throughput],
    ['End-to-end latency: produced → row readable (ms, lower is better)', 'ms', latency],
    ['Peak RSS per process (MiB)', 'MiB', memory],
    ['CPU per 1,000 events: client (orange) + Cassandra (red) + Kafka (brown)', 'CPU ms', cpu],
  ] as const) {
    if (bars.length === 0) continue;
    const p = panel(title, unit, [...bars], y);
    body.push(p.svg);
    y += p.height + 10;
  }
  const ratios = `exactly-once/baseline ${r.ratios.exactlyOnceToBaseline?.toFixed(2) ?? '-'}×, exactly-once/ceiling ${r.ratios.exactlyOnceToCeiling?.toFixed(2) ?? '-'}× (1 worker)`;
  const foot = `${r.startedAt} · ${String(r.machine['cpus'])} CPUs (${String(r.machine['cpuModel'])}) · Node ${r.versions['node']} · Kafka ${r.versions['kafka']} · Cassandra ${r.versions['cassandra']}${r.commitlog === undefined ? '' : ` (commit log ${r.commitlog})`}`;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${y + 30}" viewBox="0 0 ${WIDTH} ${y + 30}" font-family="sans-serif" font-size="12">`,
    '<style>.title{font-weight:bold;font-size:14px}.note{fill:#666;font-size:11px}</style>',
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="20" y="24" class="title" font-size="16">exactlyonce bench: ${esc(ratios)}</text>`,
    ...body,
    `<text x="20" y="${y + 16}" class="note">${esc(foot)}</text>`,
    '</svg>',
    '',
  ].join('\n');
}
