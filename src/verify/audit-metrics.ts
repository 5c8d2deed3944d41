/**
 * What a continuous audit (`verify --every`) exports in Prometheus text format: how far the proof has
 * reached per partition and how far that is behind the checkpoints, the last run's violations, and
 * each run's outcome. The gauges describe the last run that completed.
 */
import { hostname } from 'node:os';
import { Counter, Gauge, Registry } from 'prom-client';
import { ViolationKinds } from './report.js';
import type { AuditReport } from './report.js';

export class AuditMetrics {
  readonly registry = new Registry();
  readonly workerId = `${hostname()}-${process.pid}`;
  readonly role = 'verify';
  private readonly lastVerified: Gauge<'partition'>;
  private readonly proofLag: Gauge<'partition'>;
  private readonly violations: Gauge<'kind'>;
  private readonly runs: Counter<'result'>;
  private readonly lastRun: Gauge;
  private readonly lastDuration: Gauge;
  private readonly records: Counter;
  private ready = { ready: false, detail: 'not ready: no audit completed yet' };
  readonly health = { readiness: () => this.ready };

  constructor() {
    const registers = [this.registry];
    const p = 'exactlyonce_verify_';
    this.lastVerified = new Gauge({ name: `${p}last_verified_offset`, help: 'Every offset below is proved (the next offset the proof covers), per partition', labelNames: ['partition'], registers });
    this.proofLag = new Gauge({ name: `${p}proof_lag`, help: 'Checkpoint minus last verified offset: offsets the workers stored that the proof has not reached, per partition', labelNames: ['partition'], registers });
    this.violations = new Gauge({ name: `${p}violations`, help: 'Violations the last run found, by kind', labelNames: ['kind'], registers });
    this.runs = new Counter({ name: `${p}runs_total`, help: 'Audit runs, by result (ok, failed: violations found, error: the run could not complete)', labelNames: ['result'], registers });
    this.lastRun = new Gauge({ name: `${p}last_run_timestamp_seconds`, help: 'When the last completed run finished, Unix time', registers });
    this.lastDuration = new Gauge({ name: `${p}last_run_duration_seconds`, help: 'How long the last completed run took', registers });
    this.records = new Counter({ name: `${p}records_checked_total`, help: 'Records judged, summed over runs', registers });
    for (const kind of ViolationKinds) this.violations.set({ kind }, 0);
  }

  /** A completed run. */
  completed(r: AuditReport): void {
    this.runs.inc({ result: r.ok ? 'ok' : 'failed' });
    this.lastRun.set(Date.now() / 1000);
    this.lastDuration.set(r.durationMs / 1000);
    this.records.inc(r.totals.records);
    for (const kind of ViolationKinds) this.violations.set({ kind }, r.violationCounts[kind]);
    for (const p of r.partitions) {
      const proved = BigInt(p.provedTo);
      this.lastVerified.set({ partition: String(p.partition) }, Number(proved));
      const cp = p.checkpoint === null ? BigInt(p.logStart) : BigInt(p.checkpoint);
      this.proofLag.set({ partition: String(p.partition) }, Number(cp > proved ? cp - proved : 0n));
    }
    this.ready = { ready: true, detail: `ready: last run ${r.ok ? 'held' : `found ${r.violationTotal} violation(s)`}` };
  }

  /** A run that could not complete (a server down): counted; the gauges keep the last run's values. */
  failed(): void {
    this.runs.inc({ result: 'error' });
  }
}
