/**
 * Reads one worker's /metrics and /readyz and turns them into what the dashboard shows about it. Every
 * number here comes from the worker's own /metrics, so the page and a Prometheus scrape agree.
 *
 * The bearer token (EXACTLYONCE_HTTP_TOKEN[_FILE]) goes only to addresses an operator named: the
 * --worker-metrics list, and hosts in --scrape-allow (this machine's loopback names by default). An
 * address read from the `workers` table, which any worker role can write, is scraped without it
 * otherwise: a row must not be able to send our credentials to a host of its choosing.
 */
import { authHeaders } from '../engine/http-access.js';

/** Hosts whose registered workers are sent the token when --scrape-allow is not given: this machine. */
export const DEFAULT_SCRAPE_ALLOW: readonly string[] = ['127.0.0.1', 'localhost', '::1'];

/** The host of `host:port` or `[v6]:port`, lower case, without brackets. */
export function addressHost(address: string): string {
  const m = /^\[([^\]]*)\](?::\d*)?$/.exec(address.trim());
  return (m !== null ? m[1]! : address.trim().replace(/:\d*$/, '')).toLowerCase();
}

/** Whether `address` (`host:port`) may be sent the token: its host, or the address itself, is in `allow`. */
export function tokenAllowed(address: string, allow: readonly string[]): boolean {
  const host = addressHost(address);
  const a = address.trim().toLowerCase();
  return allow.some((entry) => {
    const e = entry.trim().toLowerCase();
    return e === a || e.replace(/^\[|\]$/g, '') === host;
  });
}
import { byLabel, histogramQuantile, parsePrometheus, select, total, type Sample } from './prometheus.js';

/** How long one worker may take to answer, in ms. */
export const SCRAPE_TIMEOUT_MS = 1_500;

export interface PartitionMetrics {
  consumed: number;
  stored: number;
  quarantined: number;
  /** Gauges: present only while this worker owns the partition. */
  checkpoint: number | null;
  logEnd: number | null;
  lag: number | null;
  stopped: boolean;
  stalled: boolean;
}

export interface WorkerScrape {
  address: string;
  /** When the scrape finished, epoch ms. */
  at: number;
  up: boolean;
  error: string | null;
  ready: boolean | null;
  readyDetail: string | null;
  workerId: string | null;
  pid: number | null;
  owned: number[];
  consumed: number;
  stored: number;
  quarantined: number;
  quarantinedByReason: Record<string, number>;
  batches: number;
  retries: number;
  errors: number;
  rebalances: number;
  batchP50Ms: number | null;
  batchP95Ms: number | null;
  rssBytes: number | null;
  alertsRaised: number | null;
  alertsRevised: number | null;
  lateEvents: number | null;
  serversDown: string[];
  partitions: Record<string, PartitionMetrics>;
}

const m = (name: string) => `exactlyonce_${name}`;

export function summarize(address: string, samples: readonly Sample[], at: number): Omit<WorkerScrape, 'ready' | 'readyDetail'> {
  const info = select(samples, m('worker_info'))[0];
  const partitions: Record<string, PartitionMetrics> = {};
  const part = (p: string): PartitionMetrics =>
    (partitions[p] ??= { consumed: 0, stored: 0, quarantined: 0, checkpoint: null, logEnd: null, lag: null, stopped: false, stalled: false });
  for (const [p, v] of byLabel(samples, m('records_consumed_total'), 'partition')) part(p).consumed = v;
  for (const [p, v] of byLabel(samples, m('records_stored_total'), 'partition')) part(p).stored = v;
  for (const [p, v] of byLabel(samples, m('records_quarantined_total'), 'partition')) part(p).quarantined = v;
  for (const [p, v] of byLabel(samples, m('checkpoint_offset'), 'partition')) part(p).checkpoint = v;
  for (const [p, v] of byLabel(samples, m('log_end_offset'), 'partition')) part(p).logEnd = v;
  for (const [p, v] of byLabel(samples, m('lag_records'), 'partition')) part(p).lag = v;
  for (const [p, v] of byLabel(samples, m('partition_stopped'), 'partition')) part(p).stopped = v > 0;
  for (const [p, v] of byLabel(samples, m('partition_stalled'), 'partition')) part(p).stalled = v > 0;
  const owned = [...byLabel(samples, m('partition_owned'), 'partition')].filter(([, v]) => v > 0).map(([p]) => Number(p)).sort((a, b) => a - b);
  const optional = (name: string) => (select(samples, name).length > 0 ? total(samples, name) : null);
  const ms = (s: number | null) => (s === null ? null : Math.round(s * 10_000) / 10);
  return {
    address,
    at,
    up: true,
    error: null,
    workerId: info?.labels['worker_id'] ?? null,
    pid: info?.labels['pid'] !== undefined ? Number(info.labels['pid']) : null,
    owned,
    consumed: total(samples, m('records_consumed_total')),
    stored: total(samples, m('records_stored_total')),
    quarantined: total(samples, m('records_quarantined_total')),
    quarantinedByReason: Object.fromEntries(byLabel(samples, m('records_quarantined_total'), 'reason')),
    batches: total(samples, m('batches_total')),
    retries: total(samples, m('retries_total')),
    errors: total(samples, m('errors_total')),
    rebalances: total(samples, m('rebalances_total')),
    batchP50Ms: ms(histogramQuantile(samples, m('batch_duration_seconds'), 0.5)),
    batchP95Ms: ms(histogramQuantile(samples, m('batch_duration_seconds'), 0.95)),
    rssBytes: optional(m('process_resident_memory_bytes')),
    alertsRaised: optional(m('alerts_raised_total')),
    alertsRevised: optional(m('alerts_revised_total')),
    lateEvents: optional(m('late_events_total')),
    serversDown: select(samples, m('server_up')).filter((s) => s.value === 0).map((s) => s.labels['server'] ?? '?'),
    partitions,
  };
}

/**
 * Scrapes `host:port`, with the token only when `withToken` (see the header); never throws (a worker
 * that does not answer is reported down).
 */
export async function scrapeWorker(address: string, timeoutMs = SCRAPE_TIMEOUT_MS, withToken = false): Promise<WorkerScrape> {
  const base = `http://${address}`;
  try {
    const headers = withToken ? authHeaders() : {};
    // A redirect is not followed: it could lead the token to another host.
    const [metrics, ready] = await Promise.all([
      fetch(`${base}/metrics`, { headers, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) }),
      fetch(`${base}/readyz`, { headers, redirect: 'error', signal: AbortSignal.timeout(timeoutMs) }).catch(() => null),
    ]);
    if (metrics.status === 401 && !withToken) {
      throw new Error(`/metrics answered HTTP 401: the token is sent only to --worker-metrics addresses and --scrape-allow hosts, and ${addressHost(address)} is neither`);
    }
    if (!metrics.ok) throw new Error(`/metrics answered HTTP ${metrics.status}`);
    const text = await metrics.text();
    const readyText = ready === null ? null : (await ready.text()).trim();
    return {
      ...summarize(address, parsePrometheus(text), Date.now()),
      ready: ready === null ? null : ready.status === 200,
      readyDetail: readyText,
    };
  } catch (e) {
    const cause = (e as { cause?: { code?: string } }).cause?.code;
    const error = (e as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : (cause ?? (e as Error).message);
    return {
      address,
      at: Date.now(),
      up: false,
      error,
      ready: null,
      readyDetail: null,
      workerId: null,
      pid: null,
      owned: [],
      consumed: 0,
      stored: 0,
      quarantined: 0,
      quarantinedByReason: {},
      batches: 0,
      retries: 0,
      errors: 0,
      rebalances: 0,
      batchP50Ms: null,
      batchP95Ms: null,
      rssBytes: null,
      alertsRaised: null,
      alertsRevised: null,
      lateEvents: null,
      serversDown: [],
      partitions: {},
    };
  }
}
