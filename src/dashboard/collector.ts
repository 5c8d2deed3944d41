/**
 * The dashboard's data: every `intervalMs` it scrapes the workers' /metrics and reads the checkpoints
 * (Cassandra) and log ends (Kafka), and builds one Snapshot plus one point of history (rates and lag
 * over time). Slower, heavier reads (alerts, quarantine counts, the last verify run, the worker
 * registry, and every job's status as `exactlyonce status` gathers it) refresh in the background at
 * their own pace; a source that fails or is slow never holds up the others: the page shows its last
 * value and the error.
 */
import { EventEmitter } from 'node:events';
import type { ConnectionConfig } from '../config.js';
import type { KafkaAdmin, Watermarks } from '../kafka/admin.js';
import { jobStatusJson, type JobStatus } from '../operate/status.js';
import { oneLine, Polled, singleFlight, withTimeout } from './polled.js';
import { DEFAULT_SCRAPE_ALLOW, SCRAPE_TIMEOUT_MS, scrapeWorker, tokenAllowed, type WorkerScrape } from './scrape.js';
import type { HistoryPoint, PartitionView, Rates, Snapshot, WorkerView } from './snapshot.js';
import type { AlertRow, DashboardStore, QuarantineCounts, VerifyRun } from './store.js';
import type { RegisteredWorker } from './worker-registry.js';

export interface CollectorOptions {
  /** Workers' metrics addresses given with --worker-metrics, `host:port` (sent the token, if one is set). */
  workerMetrics: readonly string[];
  /**
   * Hosts (or `host:port`) of workers found in the workers table that are sent the token
   * (--scrape-allow; default DEFAULT_SCRAPE_ALLOW, this machine). Others are scraped without it.
   */
  scrapeAllow?: readonly string[];
  /** Scrape and history period, in ms (default 1000). */
  intervalMs: number;
  /** History kept, in points (default 600: ten minutes at 1 s). */
  historyPoints: number;
}

/** A worker address the dashboard scrapes, and how it learnt of it. */
interface Listed {
  via: Set<'flag' | 'registry'>;
  heartbeat: Date | null;
  /** The id the worker registered with (none for --worker-metrics entries). */
  workerId: string | null;
}

/** `localhost:9100` and `127.0.0.1:9100` are the same worker. */
export function normalizeAddress(a: string): string {
  return a.trim().toLowerCase().replace(/^localhost:/, '127.0.0.1:');
}

export class Collector extends EventEmitter {
  private readonly registry: Polled<RegisteredWorker[]>;
  private readonly quarantine: Polled<QuarantineCounts>;
  private readonly alerts: Polled<{ latest: AlertRow[]; rows: number; sources: number }>;
  private readonly verify: Polled<VerifyRun | null>;
  private readonly proofs: Polled<Map<number, bigint>>;
  private readonly jobs: Polled<JobStatus[]>;
  private readonly points: HistoryPoint[] = [];
  private last: Snapshot | undefined;
  private marks: Watermarks[] | undefined;
  private checkpoints: Map<number, bigint> | undefined;
  private readonly previous = new Map<string, { consumed: number; stored: number; quarantined: number }>();
  private previousCheckpointSum: { at: number; sum: bigint } | undefined;
  private lastRoundAt: number | undefined;
  /** The last worker id seen at each address, so that a worker that stops answering keeps its name. */
  private readonly knownIds = new Map<string, string>();
  private running = false;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private readonly readCheckpoints: () => Promise<Map<number, bigint>>;
  private readonly readMarks: () => Promise<Watermarks[]>;

  constructor(
    private readonly config: ConnectionConfig,
    private readonly store: DashboardStore,
    private readonly admin: KafkaAdmin,
    private readonly options: CollectorOptions,
  ) {
    super();
    this.registry = new Polled('workers table', 3_000, () => store.workers());
    this.quarantine = new Polled('quarantine counts', 5_000, () => store.quarantineCounts(this.partitionList()));
    this.alerts = new Polled('alerts', 2_000, () => store.alerts(10));
    this.verify = new Polled('audit_runs', 5_000, () => store.lastVerify());
    this.proofs = new Polled('audit_proof', 5_000, () => store.proofs());
    this.jobs = new Polled('status of the jobs', 5_000, () => store.jobs(config, admin), 'Cassandra and Kafka');
    this.readCheckpoints = singleFlight(() => store.checkpoints());
    this.readMarks = singleFlight(() => admin.watermarks(config.topic));
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    for (const p of this.polled()) p.start();
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        await this.round().catch((e: unknown) => this.emit('error', e));
        const wait = Math.max(50, this.options.intervalMs - (Date.now() - started));
        await new Promise<void>((r) => {
          const t = setTimeout(r, wait);
          this.wake = () => {
            clearTimeout(t);
            r();
          };
        });
      }
    })();
  }

  /** Idempotent. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    await Promise.all(this.polled().map((p) => p.stop()));
  }

  private polled(): Array<Polled<unknown>> {
    return [this.registry, this.quarantine, this.alerts, this.verify, this.proofs, this.jobs];
  }

  snapshot(): Snapshot | undefined {
    return this.last;
  }

  history(): HistoryPoint[] {
    return [...this.points];
  }

  private partitionList(): number[] {
    const ps = new Set<number>();
    for (const w of this.marks ?? []) ps.add(w.partition);
    for (const p of this.checkpoints?.keys() ?? []) ps.add(p);
    return [...ps].sort((a, b) => a - b);
  }

  private addresses(): Map<string, Listed> {
    const out = new Map<string, Listed>();
    for (const a of this.options.workerMetrics) out.set(normalizeAddress(a), { via: new Set(['flag']), heartbeat: null, workerId: null });
    for (const w of this.registry.value ?? []) {
      const a = normalizeAddress(`${w.host}:${w.metricsPort}`);
      const e = out.get(a) ?? { via: new Set(), heartbeat: null, workerId: null };
      e.via.add('registry');
      e.heartbeat = w.heartbeat;
      e.workerId = w.workerId;
      out.set(a, e);
    }
    return out;
  }

  /** One scrape of every worker, the checkpoints and the log ends; then a snapshot and a history point. */
  private async round(): Promise<void> {
    const problems: string[] = [];
    const addresses = this.addresses();
    const timeout = Math.max(1_000, this.options.intervalMs * 1.5);
    const [scrapes, checkpoints, marks] = await Promise.all([
      Promise.all([...addresses].map(([a, listed]) => scrapeWorker(a, SCRAPE_TIMEOUT_MS, listed.via.has('flag') || tokenAllowed(a, this.options.scrapeAllow ?? DEFAULT_SCRAPE_ALLOW)))),
      withTimeout(this.readCheckpoints(), timeout, 'Cassandra').catch((e: unknown) => {
        problems.push(`Cassandra (checkpoints): ${oneLine(e)}`);
        return undefined;
      }),
      withTimeout(this.readMarks(), timeout, 'Kafka').catch((e: unknown) => {
        problems.push(`Kafka (log end offsets): ${oneLine(e)}`);
        return undefined;
      }),
    ]);
    const now = Date.now();
    if (checkpoints !== undefined) this.checkpoints = checkpoints;
    if (marks !== undefined) this.marks = marks;
    for (const p of this.polled()) {
      if (p.error !== undefined) problems.push(`${p.source} (${p.name}): ${p.error}`);
    }

    const rates = this.rates(scrapes, checkpoints, now);
    const snapshot = this.build(scrapes, addresses, rates, problems, now);
    const point: HistoryPoint = {
      t: Math.round(now / 100) / 10,
      ...rates,
      lag: snapshot.totals.lag,
      lagByPartition: Object.fromEntries(snapshot.partitions.filter((p) => p.lag !== null).map((p) => [String(p.partition), p.lag!])),
    };
    this.points.push(point);
    if (this.points.length > this.options.historyPoints) this.points.splice(0, this.points.length - this.options.historyPoints);
    this.last = snapshot;
    this.emit('tick', snapshot, point);
  }

  /**
   * Per-second rates from the counters' increase since the previous round, per worker. A counter
   * that went down is a restarted worker: its new value is all increase. A worker seen for the first
   * time contributes nothing yet (its total covers an unknown span).
   */
  private rates(scrapes: WorkerScrape[], checkpoints: Map<number, bigint> | undefined, now: number): Rates {
    const dt = this.lastRoundAt === undefined ? 0 : (now - this.lastRoundAt) / 1000;
    this.lastRoundAt = now;
    const sum = { consumed: 0, stored: 0, quarantined: 0 };
    const seen = new Set<string>();
    for (const s of scrapes) {
      if (!s.up) continue;
      const key = `${s.address}|${s.workerId ?? ''}`;
      seen.add(key);
      const prev = this.previous.get(key);
      const cur = { consumed: s.consumed, stored: s.stored, quarantined: s.quarantined };
      if (prev !== undefined) {
        for (const k of ['consumed', 'stored', 'quarantined'] as const) sum[k] += cur[k] >= prev[k] ? cur[k] - prev[k] : cur[k];
      }
      this.previous.set(key, cur);
    }
    for (const key of [...this.previous.keys()]) if (!seen.has(key)) this.previous.delete(key);
    let checkpointed = 0;
    if (checkpoints !== undefined) {
      const total = [...checkpoints.values()].reduce((a, b) => a + b, 0n);
      if (this.previousCheckpointSum !== undefined && total >= this.previousCheckpointSum.sum) {
        const secs = (now - this.previousCheckpointSum.at) / 1000;
        if (secs > 0) checkpointed = Number(total - this.previousCheckpointSum.sum) / secs;
      }
      this.previousCheckpointSum = { at: now, sum: total };
    }
    const per = (n: number) => (dt > 0 ? Math.round((n / dt) * 10) / 10 : 0);
    return { consumed: per(sum.consumed), stored: per(sum.stored), quarantined: per(sum.quarantined), checkpointed: Math.round(checkpointed * 10) / 10 };
  }

  private build(
    scrapes: WorkerScrape[],
    addresses: Map<string, Listed>,
    rates: Rates,
    problems: string[],
    now: number,
  ): Snapshot {
    const workers: WorkerView[] = scrapes.map((s) => {
      const { partitions: _p, at: _a, ...rest } = s;
      const a = addresses.get(s.address);
      if (s.workerId !== null) this.knownIds.set(s.address, s.workerId);
      return {
        ...rest,
        id: s.workerId ?? this.knownIds.get(s.address) ?? a?.workerId ?? s.address,
        via: [...(a?.via ?? [])].sort(),
        heartbeatAgeMs: a?.heartbeat ? now - a.heartbeat.getTime() : null,
      };
    });
    workers.sort((x, y) => x.id.localeCompare(y.id));
    for (const a of [...this.knownIds.keys()]) if (!addresses.has(a)) this.knownIds.delete(a);

    const ids = new Set<number>(this.partitionList());
    for (const s of scrapes) for (const p of Object.keys(s.partitions)) ids.add(Number(p));
    const quarantine = this.quarantine.value;
    const partitions: PartitionView[] = [...ids]
      .sort((a, b) => a - b)
      .map((partition) => {
        const key = String(partition);
        const w = this.marks?.find((m) => m.partition === partition);
        const cp = this.checkpoints?.get(partition);
        const proved = this.proofs.value?.get(partition);
        const view: PartitionView = {
          partition,
          owners: [],
          logStart: w === undefined ? null : Number(w.low),
          logEnd: w === undefined ? null : Number(w.high),
          checkpoint: cp === undefined ? null : Number(cp),
          lag: null,
          held: w === undefined ? null : Number(w.high - w.stable),
          consumed: 0,
          stored: 0,
          quarantined: 0,
          quarantineRows: quarantine?.byPartition[key] ?? null,
          stopped: false,
          stalled: false,
          proved: proved === undefined ? null : Number(proved),
          proofLag: proved === undefined ? null : Math.max(0, Number((cp ?? w?.low ?? 0n) - proved)),
        };
        let workerLag: number | null = null;
        for (const s of scrapes) {
          const pm = s.partitions[key];
          if (pm === undefined) continue;
          view.consumed += pm.consumed;
          view.stored += pm.stored;
          view.quarantined += pm.quarantined;
          if (s.owned.includes(partition)) {
            view.owners.push(s.workerId ?? s.address);
            view.stopped ||= pm.stopped;
            view.stalled ||= pm.stalled;
            if (pm.lag !== null) workerLag = Math.max(workerLag ?? 0, pm.lag);
          }
        }
        // Lag from the brokers' last stable offset and Cassandra's checkpoint; the owners' gauge when Kafka is unreachable.
        if (w !== undefined) view.lag = Math.max(0, Number(w.stable) - (view.checkpoint ?? view.logStart ?? 0));
        else view.lag = workerLag;
        return view;
      });

    const up = scrapes.filter((s) => s.up);
    const optionalSum = (k: 'alertsRaised' | 'alertsRevised' | 'lateEvents') =>
      up.some((s) => s[k] !== null) ? up.reduce((a, s) => a + (s[k] ?? 0), 0) : null;
    const lags = partitions.map((p) => p.lag).filter((l): l is number => l !== null);
    const run = this.verify.value ?? null;
    if (scrapes.length === 0) problems.push('no workers: start them with `run --metrics-port N`, or pass `--worker-metrics host:port,…`');
    return {
      at: now,
      keyspace: this.config.keyspace,
      topic: this.config.topic,
      group: this.config.group,
      intervalMs: this.options.intervalMs,
      problems,
      totals: {
        consumed: up.reduce((a, s) => a + s.consumed, 0),
        stored: up.reduce((a, s) => a + s.stored, 0),
        quarantined: up.reduce((a, s) => a + s.quarantined, 0),
        lag: lags.length === 0 ? null : lags.reduce((a, b) => a + b, 0),
        workers: scrapes.length,
        workersUp: up.length,
        workersReady: up.filter((s) => s.ready === true).length,
        partitions: partitions.length,
        alertsRaised: optionalSum('alertsRaised'),
        alertsRevised: optionalSum('alertsRevised'),
        lateEvents: optionalSum('lateEvents'),
        proofLag: partitions.some((p) => p.proofLag !== null) ? partitions.reduce((a, p) => a + (p.proofLag ?? 0), 0) : null,
      },
      rates,
      workers,
      partitions,
      quarantine: quarantine ?? null,
      alerts: this.alerts.value ?? null,
      verify: {
        state: this.verify.value === undefined ? 'unknown' : run === null ? 'none' : run.ok === true ? 'ok' : 'failed',
        run,
      },
      jobs: this.jobs.value?.map(jobStatusJson) ?? null,
    };
  }
}
