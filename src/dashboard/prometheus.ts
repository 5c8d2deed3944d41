/**
 * Reads the Prometheus text exposition format (version 0.0.4), as prom-client writes it: one sample
 * per line, `name{label="value",…} value [timestamp]`, `#` lines are comments (HELP, TYPE).
 * https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format
 */

export interface Sample {
  name: string;
  labels: Readonly<Record<string, string>>;
  value: number;
}

const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?\s*$/;
const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?\s*/y;

export function parsePrometheus(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const raw of text.split('\n')) {
    const l = raw.trim();
    if (l === '' || l.startsWith('#')) continue;
    const m = line.exec(l);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    const body = m[2] ?? '';
    label.lastIndex = 0;
    let lm: RegExpExecArray | null;
    while (label.lastIndex < body.length && (lm = label.exec(body)) !== null) {
      labels[lm[1]!] = lm[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    }
    samples.push({ name: m[1]!, labels, value: number(m[3]!) });
  }
  return samples;
}

function number(s: string): number {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  return Number(s);
}

/** The samples of one metric, optionally only those whose labels include `where`. */
export function select(samples: readonly Sample[], name: string, where: Record<string, string> = {}): Sample[] {
  return samples.filter((s) => s.name === name && Object.entries(where).every(([k, v]) => s.labels[k] === v));
}

/** The sum of a metric's samples (0 when absent). */
export function total(samples: readonly Sample[], name: string, where: Record<string, string> = {}): number {
  return select(samples, name, where).reduce((a, s) => a + s.value, 0);
}

/** Sums a metric by one label: `byLabel(samples, 'exactlyonce_records_stored_total', 'partition')`. */
export function byLabel(samples: readonly Sample[], name: string, key: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of select(samples, name)) {
    const k = s.labels[key];
    if (k !== undefined) out.set(k, (out.get(k) ?? 0) + s.value);
  }
  return out;
}

/**
 * A quantile of a histogram from its cumulative buckets (`<name>_bucket{le=…}`), interpolated within
 * the bucket as Prometheus' histogram_quantile does; null without observations.
 */
export function histogramQuantile(samples: readonly Sample[], name: string, q: number): number | null {
  const buckets = select(samples, `${name}_bucket`)
    .map((s) => ({ le: number(s.labels['le'] ?? '+Inf'), count: s.value }))
    .sort((a, b) => a.le - b.le);
  const count = buckets.at(-1)?.count ?? 0;
  if (count === 0) return null;
  const rank = q * count;
  let prevLe = 0;
  let prevCount = 0;
  for (const b of buckets) {
    if (b.count >= rank) {
      if (!Number.isFinite(b.le)) return prevLe;
      const inBucket = b.count - prevCount;
      return inBucket === 0 ? b.le : prevLe + ((b.le - prevLe) * (rank - prevCount)) / inBucket;
    }
    prevLe = b.le;
    prevCount = b.count;
  }
  return prevLe;
}
