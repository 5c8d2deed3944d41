/**
 * The engine's metrics, in one prom-client registry per Runner (Prometheus text format), and the
 * small amount of state behind the per-partition gauges: which partitions this worker owns, their
 * checkpoints and log ends, so that lag = log end − checkpoint stays true between batches.
 *
 * Partition-scoped gauges (owned, checkpoint, log end, lag, stopped) exist only while the partition is
 * owned: a revoked partition's series are removed, so summing a gauge over all workers never counts a
 * partition twice. Counters (consumed, stored, quarantined, batches) are cumulative per process, as
 * Prometheus expects; they restart at 0 with the process.
 */
import { hostname } from 'node:os';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Logger } from '../log.js';

/** How often the log end offsets are refreshed from the brokers, in ms. */
export const LOG_END_REFRESH_MS = 5_000;
/** A server is reported down this long after its last failed call, unless a call succeeds first, in ms. */
export const DOWN_FOR_MS = 20_000;
/** A partition with records behind whose checkpoint has not moved for this long is logged as stalled, in ms. */
export const STALL_AFTER_MS = 30_000;

export type Server = 'Cassandra' | 'Kafka';

interface PartitionState {
  checkpoint: bigint | null;
  logStart: bigint | null;
  logEnd: bigint | null;
  /** When the checkpoint last moved (or the partition was assigned), epoch ms. */
  movedAt: number;
  stalled: boolean;
}

export interface Readiness {
  ready: boolean;
  /** One line saying why (or what it owns). */
  detail: string;
}

export class EngineMetrics {
  readonly registry = new Registry();
  /** This process in the worker list: `<hostname>-<pid>`. */
  readonly workerId = `${hostname()}-${process.pid}`;
  readonly consumed: Counter<'partition'>;
  readonly stored: Counter<'partition'>;
  readonly quarantined: Counter<'partition' | 'reason'>;
  readonly batches: Counter<'partition'>;
  readonly batchSeconds: Histogram;
  readonly batchRecords: Histogram;
  readonly owned: Gauge<'partition'>;
  readonly checkpoint: Gauge<'partition'>;
  readonly logEnd: Gauge<'partition'>;
  readonly lag: Gauge<'partition'>;
  readonly assigned: Gauge;
  readonly assignments: Counter;
  readonly revocations: Counter;
  readonly rebalances: Counter<'kind'>;
  readonly retries: Counter<'server'>;
  readonly errors: Counter<'server' | 'error'>;
  readonly serverUp: Gauge<'server'>;
  readonly stoppedPartitions: Gauge<'partition'>;
  /** Partitions stopped, by error code. */
  readonly stops: Counter<'code'>;
  readonly stalledPartitions: Gauge<'partition'>;
  readonly info: Gauge<'worker_id' | 'host' | 'pid'>;

  private readonly partitions = new Map<number, PartitionState>();
  /** Owned partitions stopped on an error the user must act on (never reported as stalled). */
  private readonly stopped = new Set<number>();
  /** Names why a partition may be stalled (set by the Runner), for the stall warning. */
  stallCause: ((partition: number) => string) | undefined;
  /** Epoch ms of the last failed and the last successful call, per server. */
  private readonly lastFailure = new Map<Server, number>();
  private readonly lastSuccess = new Map<Server, number>();
  private joined = false;
  private refreshTimer: NodeJS.Timeout | undefined;
  private refreshFailing = false;

  constructor(withDefaults = false) {
    const registers = [this.registry];
    const p = 'exactlyonce_';
    const partition = ['partition'] as const;
    this.consumed = new Counter({ name: `${p}records_consumed_total`, help: 'Records read from Kafka', labelNames: partition, registers });
    this.stored = new Counter({ name: `${p}records_stored_total`, help: 'Records whose output is stored', labelNames: partition, registers });
    this.quarantined = new Counter({ name: `${p}records_quarantined_total`, help: 'Records quarantined, by reason', labelNames: ['partition', 'reason'], registers });
    this.batches = new Counter({ name: `${p}batches_total`, help: 'Batches stored and checkpointed', labelNames: partition, registers });
    this.batchSeconds = new Histogram({
      name: `${p}batch_duration_seconds`,
      help: 'Time from a batch arriving to its checkpoint being durable, in seconds',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.batchRecords = new Histogram({
      name: `${p}batch_records`,
      help: 'Records per stored batch',
      buckets: [1, 10, 50, 100, 250, 500, 1000, 2000, 5000, 10000],
      registers,
    });
    this.owned = new Gauge({ name: `${p}partition_owned`, help: '1 for each partition this worker owns now', labelNames: partition, registers });
    this.checkpoint = new Gauge({ name: `${p}checkpoint_offset`, help: 'Next offset to read, as checkpointed (owned partitions)', labelNames: partition, registers });
    this.logEnd = new Gauge({
      name: `${p}log_end_offset`,
      help: `Log end offset from the brokers, refreshed every ${LOG_END_REFRESH_MS / 1000} s (owned partitions)`,
      labelNames: partition,
      registers,
    });
    this.lag = new Gauge({ name: `${p}lag_records`, help: 'Log end offset minus checkpoint (owned partitions)', labelNames: partition, registers });
    this.assigned = new Gauge({ name: `${p}assigned_partitions`, help: 'Partitions this worker owns', registers });
    this.assignments = new Counter({ name: `${p}partitions_assigned_total`, help: 'Partitions received in rebalances', registers });
    this.revocations = new Counter({ name: `${p}partitions_revoked_total`, help: 'Partitions revoked or lost in rebalances', registers });
    this.rebalances = new Counter({
      name: `${p}rebalances_total`,
      help: 'Rebalance callbacks, by kind: assign, revoke, lost (session expired)',
      labelNames: ['kind'],
      registers,
    });
    this.retries = new Counter({ name: `${p}retries_total`, help: 'Failed attempts retried, by server', labelNames: ['server'], registers });
    this.errors = new Counter({
      name: `${p}errors_total`,
      help: 'Errors from a server, by server and error (driver error name, our code, or "client" for the Kafka client\'s own error log)',
      labelNames: ['server', 'error'],
      registers,
    });
    const self = this;
    this.serverUp = new Gauge({
      name: `${p}server_up`,
      help: `0 from a failed call to the server until a successful one (or ${DOWN_FOR_MS / 1000} s without failures), else 1`,
      labelNames: ['server'],
      registers,
      collect() {
        for (const server of ['Cassandra', 'Kafka'] as const) this.set({ server }, self.isDown(server) ? 0 : 1);
      },
    });
    this.stops = new Counter({
      name: `${p}partition_stops_total`,
      help: 'Partitions stopped on an error retrying cannot fix, by error code (the worker logs each at error level)',
      labelNames: ['code'],
      registers,
    });
    this.stoppedPartitions = new Gauge({
      name: `${p}partition_stopped`,
      help: '1 when a partition is stopped on an error that needs the user (see partition_stops_total and the error log)',
      labelNames: partition,
      registers,
    });
    this.stalledPartitions = new Gauge({
      name: `${p}partition_stalled`,
      help: `1 when a partition has records behind and its checkpoint has not moved for ${STALL_AFTER_MS / 1000} s`,
      labelNames: partition,
      registers,
    });
    this.info = new Gauge({ name: `${p}worker_info`, help: 'Always 1; labels identify the worker', labelNames: ['worker_id', 'host', 'pid'], registers });
    this.info.set({ worker_id: this.workerId, host: hostname(), pid: String(process.pid) }, 1);
    if (withDefaults) collectDefaultMetrics({ register: this.registry, prefix: p });
  }

  // ---- hooks called by the Runner and PartitionTask (one line each at the call site) ----

  /** A partition was assigned, resuming at `checkpoint` (null: never checkpointed, starts at the log start). */
  partitionAssigned(partition: number, checkpoint: bigint | null, marks: { low: bigint; high: bigint } | undefined): void {
    // The checkpoint was just read from Cassandra and the watermarks from Kafka: both answer.
    this.answered('Cassandra');
    this.answered('Kafka');
    this.joined = true;
    this.partitions.set(partition, {
      checkpoint,
      logStart: marks?.low ?? null,
      logEnd: marks?.high ?? null,
      movedAt: Date.now(),
      stalled: false,
    });
    this.owned.set({ partition: String(partition) }, 1);
    this.publish(partition);
  }

  /** An assignment callback ran (possibly with no partitions: more workers than partitions). */
  rebalanced(kind: 'assign' | 'revoke' | 'lost'): void {
    if (kind === 'assign') this.joined = true;
    this.rebalances.inc({ kind });
  }

  /** The partition was revoked or lost: its gauges leave this worker's /metrics. */
  partitionRevoked(partition: number): void {
    this.partitions.delete(partition);
    this.stopped.delete(partition);
    const labels = { partition: String(partition) };
    for (const g of [this.owned, this.checkpoint, this.logEnd, this.lag, this.stoppedPartitions, this.stalledPartitions]) g.remove(labels);
  }

  /** The partition is stopped on an error the user must act on. */
  partitionStopped(partition: number, code = 'unknown'): void {
    this.stops.inc({ code });
    this.stopped.add(partition);
    this.stoppedPartitions.set({ partition: String(partition) }, 1);
  }

  /** A batch's checkpoint is durable: every record before `next` is stored. */
  checkpointed(partition: number, next: bigint): void {
    this.answered('Cassandra');
    const s = this.partitions.get(partition);
    if (s === undefined) return; // revoked while the batch was in flight: not ours to report
    if (s.checkpoint === null || next > s.checkpoint) {
      s.checkpoint = next;
      s.movedAt = Date.now();
    }
    // The log end is refreshed only every few seconds; a checkpoint past it proves it has grown.
    if (s.logEnd === null || next > s.logEnd) s.logEnd = next;
    this.publish(partition);
  }

  /** A call to `server` failed and will be retried. */
  retried(server: Server, e: unknown): void {
    this.retries.inc({ server });
    this.failed(server, e);
  }

  /** A call to `server` failed. */
  failed(server: Server, e: unknown): void {
    this.errors.inc({ server, error: errorName(e) });
    this.lastFailure.set(server, Date.now());
  }

  /** A call to `server` succeeded. */
  answered(server: Server): void {
    this.lastSuccess.set(server, Date.now());
  }

  /**
   * Down: the last call failed, and recently. Retries back off to at most 10 s (src/engine/retry.ts),
   * so an ongoing outage keeps failing more often than DOWN_FOR_MS; an idle worker that saw one failure
   * and then had nothing to retry is not reported down forever.
   */
  isDown(server: Server): boolean {
    const failed = this.lastFailure.get(server);
    if (failed === undefined || Date.now() - failed > DOWN_FOR_MS) return false;
    const ok = this.lastSuccess.get(server);
    return ok === undefined || failed > ok;
  }

  /**
   * Refreshes the owned partitions' log ends every `intervalMs` (so lag grows while a worker is stuck
   * or idle, not only when a batch lands), and logs one line when a partition's checkpoint stalls and
   * one when it moves again. Stopped by `close()`. The timer does not keep the process alive.
   */
  watchLogEnds(
    fetch: () => Promise<ReadonlyArray<{ partition: number; low: bigint; high: bigint }>>,
    log: Logger,
    intervalMs = LOG_END_REFRESH_MS,
    stallAfterMs = STALL_AFTER_MS,
  ): void {
    if (this.refreshTimer !== undefined) return;
    let busy = false;
    const tick = async () => {
      if (busy || this.partitions.size === 0) return;
      busy = true;
      try {
        const marks = await fetch();
        this.answered('Kafka');
        if (this.refreshFailing) log.debug({ server: 'Kafka' }, 'log end offsets refreshed again; lag metrics are current');
        this.refreshFailing = false;
        for (const w of marks) {
          const s = this.partitions.get(w.partition);
          if (s === undefined) continue;
          s.logStart = w.low;
          if (s.logEnd === null || w.high > s.logEnd) s.logEnd = w.high;
          this.publish(w.partition);
          this.checkStall(w.partition, s, log, stallAfterMs);
        }
      } catch (e) {
        this.failed('Kafka', e);
        // The Runner already logs Kafka going down and coming back; this is the same event, seen again.
        if (!this.refreshFailing) log.debug({ server: 'Kafka', err: errorName(e) }, 'cannot read log end offsets; lag metrics are stale until Kafka answers');
        this.refreshFailing = true;
      } finally {
        busy = false;
      }
    };
    this.refreshTimer = setInterval(() => void tick(), intervalMs);
    this.refreshTimer.unref();
  }

  /** Stops the log end refresh. Idempotent. */
  close(): void {
    clearInterval(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  /**
   * Ready: the worker has been through a group assignment (it may own no partition when the group has
   * more workers than partitions) and neither server is known to be down.
   */
  readiness(): Readiness {
    if (!this.joined) return { ready: false, detail: 'not ready: waiting for the consumer group to assign partitions' };
    const down = (['Kafka', 'Cassandra'] as const).filter((server) => this.isDown(server));
    if (down.length > 0) return { ready: false, detail: `not ready: ${down.join(' and ')} not answering` };
    const owned = [...this.partitions.keys()].sort((a, b) => a - b);
    return { ready: true, detail: `ready: owns ${owned.length === 0 ? 'no partition' : `partitions ${owned.join(',')}`}` };
  }

  private publish(partition: number): void {
    const s = this.partitions.get(partition)!;
    const labels = { partition: String(partition) };
    if (s.checkpoint !== null) this.checkpoint.set(labels, Number(s.checkpoint));
    if (s.logEnd !== null) this.logEnd.set(labels, Number(s.logEnd));
    const from = s.checkpoint ?? s.logStart;
    if (s.logEnd !== null && from !== null) this.lag.set(labels, Math.max(0, Number(s.logEnd - from)));
  }

  private checkStall(partition: number, s: PartitionState, log: Logger, stallAfterMs: number): void {
    const from = s.checkpoint ?? s.logStart;
    const behind = s.logEnd !== null && from !== null ? s.logEnd - from : 0n;
    const stalled = !this.stopped.has(partition) && behind > 0n && Date.now() - s.movedAt >= stallAfterMs;
    if (stalled === s.stalled) return;
    s.stalled = stalled;
    this.stalledPartitions.set({ partition: String(partition) }, stalled ? 1 : 0);
    if (stalled) {
      const cause = this.stallCause?.(partition) ?? 'no cause known';
      const at = s.checkpoint === null ? `before its first checkpoint (log start ${String(s.logStart)})` : `at ${s.checkpoint}`;
      log.warn(
        { partition, checkpoint: String(s.checkpoint), behind: String(behind), sinceMs: Date.now() - s.movedAt, cause },
        `partition ${partition}: checkpoint stalled ${at} with ${behind} records behind for ${Math.round((Date.now() - s.movedAt) / 1000)} s; cause: ${cause}`,
      );
    } else {
      log.info({ partition, checkpoint: String(s.checkpoint) }, `partition ${partition}: checkpoint moving again`);
    }
  }
}

/** A short, bounded label for an error: our code, the driver's error name, or the constructor name. */
function errorName(e: unknown): string {
  if (e !== null && typeof e === 'object') {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^EO_[A-Z_]+$/.test(code)) return code;
    const name = (e as { name?: unknown }).name;
    if (typeof name === 'string' && /^[A-Za-z]{1,40}$/.test(name)) return name;
  }
  return 'unknown';
}
