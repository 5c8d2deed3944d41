/**
 * Per-partition checkpoint, log end and lag, kept true between batches: the checkpoints come from the
 * PartitionTasks, the log ends from a timer that asks the brokers every few seconds (so lag grows while
 * a worker is stuck or idle, not only when a batch lands). The same timer tells a stalled partition:
 * records behind and a checkpoint that has not moved for a while, logged once when it stalls and once
 * when it moves again.
 *
 * Lag is counted to the last stable offset, the end of what a read_committed consumer can read: the
 * records of a transaction still open (and all after them) cannot be read yet, and are shown apart
 * (transaction_held_records); a stall behind them names the open transaction, with its age.
 *
 * Partition-scoped gauges (owned, checkpoint, log end, lag, stopped, stalled) exist only while the
 * partition is owned: a revoked partition's series are removed, so summing a gauge over all workers
 * never counts a partition twice.
 */
import type { Watermarks } from '../kafka/admin.js';
import type { Logger } from '../log.js';
import { errorName, LOG_END_REFRESH_MS, STALL_AFTER_MS, type EngineMetrics } from './metrics.js';

interface PartitionState {
  checkpoint: bigint | null;
  logStart: bigint | null;
  logEnd: bigint | null;
  /** The last stable offset: records from here to the log end wait for an open transaction. */
  stable: bigint | null;
  /** Since when records have been held back from `from` on (the open transaction's first offset), epoch ms. */
  held: { from: bigint; since: number } | undefined;
  /** When the checkpoint last moved (or the partition was assigned), epoch ms. */
  movedAt: number;
  stalled: boolean;
}

export class LagWatcher {
  private readonly partitions = new Map<number, PartitionState>();
  /** Owned partitions stopped on an error the user must act on (never reported as stalled). */
  private readonly stopped = new Set<number>();
  /** Names why a partition may be stalled (set by the Runner), for the stall warning. */
  stallCause: ((partition: number) => string) | undefined;
  /** Told each refresh's answer, after the gauges (the Runner's TailSkipper reads the stable offsets). */
  onRefresh: ((marks: readonly Watermarks[]) => void) | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private refreshFailing = false;

  constructor(private readonly metrics: EngineMetrics) {}

  /** A partition was assigned, resuming at `checkpoint` (null: never checkpointed, starts at the log start). */
  partitionAssigned(partition: number, checkpoint: bigint | null, marks: Omit<Watermarks, 'partition'> | undefined): void {
    this.metrics.health.partitionAssigned(partition);
    const s: PartitionState = { checkpoint, logStart: null, logEnd: null, stable: null, held: undefined, movedAt: Date.now(), stalled: false };
    this.partitions.set(partition, s);
    if (marks !== undefined) this.refreshed(s, marks);
    const labels = { partition: String(partition) };
    this.metrics.owned.set(labels, 1);
    // A new task for a partition that was stopped (`checkpoints reset` picked up while running) is not
    // stopped any more: its mark goes, and a stall is reported again. Both flags are served as 0 from
    // the assignment on, so a dashboard or an alert rule sees every owned partition, not only those
    // that once stopped or stalled (https://prometheus.io/docs/practices/instrumentation/#avoid-missing-metrics).
    this.stopped.delete(partition);
    this.metrics.stoppedPartitions.set(labels, 0);
    this.metrics.stalledPartitions.set(labels, 0);
    this.publish(partition);
  }

  /** The partition was revoked or lost: its gauges leave this worker's /metrics. */
  partitionRevoked(partition: number): void {
    this.metrics.health.partitionRevoked(partition);
    this.partitions.delete(partition);
    this.stopped.delete(partition);
    const labels = { partition: String(partition) };
    const m = this.metrics;
    for (const g of [m.owned, m.checkpoint, m.logEnd, m.lag, m.transactionHeld, m.stoppedPartitions, m.stalledPartitions]) g.remove(labels);
  }

  /** The partition is stopped on an error the user must act on. */
  partitionStopped(partition: number, code = 'unknown'): void {
    this.metrics.stops.inc({ code });
    this.metrics.health.partitionStopped(partition, code);
    this.stopped.add(partition);
    this.metrics.stoppedPartitions.set({ partition: String(partition) }, 1);
  }

  /** A batch's checkpoint is durable: every record before `next` is stored. */
  checkpointed(partition: number, next: bigint): void {
    this.metrics.health.answered('Cassandra');
    const s = this.partitions.get(partition);
    if (s === undefined) return; // revoked while the batch was in flight: not ours to report
    if (s.checkpoint === null || next > s.checkpoint) {
      s.checkpoint = next;
      s.movedAt = Date.now();
    }
    // The log end is refreshed only every few seconds; a checkpoint past it proves it has grown.
    if (s.logEnd === null || next > s.logEnd) s.logEnd = next;
    if (s.stable === null || next > s.stable) s.stable = next;
    this.publish(partition);
  }

  /**
   * Refreshes the owned partitions' log ends every `intervalMs`, and logs one line when a partition's
   * checkpoint stalls and one when it moves again. Stopped by `close()`. The timer does not keep the
   * process alive.
   */
  watch(
    fetch: () => Promise<readonly Watermarks[]>,
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
        this.metrics.health.answered('Kafka');
        if (this.refreshFailing) log.debug({ server: 'Kafka' }, 'log end offsets refreshed again; lag metrics are current');
        this.refreshFailing = false;
        for (const w of marks) {
          const s = this.partitions.get(w.partition);
          if (s === undefined) continue;
          this.refreshed(s, w);
          this.publish(w.partition);
          this.checkStall(w.partition, s, log, stallAfterMs);
        }
        this.onRefresh?.(marks);
      } catch (e) {
        this.metrics.health.failed('Kafka', e);
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

  /** Takes the brokers' answer for a partition (the ends only grow: an older answer arriving late is ignored). */
  private refreshed(s: PartitionState, w: Omit<Watermarks, 'partition'>): void {
    s.logStart = w.low;
    if (s.logEnd === null || w.high > s.logEnd) s.logEnd = w.high;
    if (s.stable === null || w.stable > s.stable) s.stable = w.stable;
    // An open transaction holds back everything from its first offset (the stable offset) on; a new
    // stable offset with records still held is the next open transaction.
    const held = s.logEnd > s.stable;
    if (!held) s.held = undefined;
    else if (s.held?.from !== s.stable) s.held = { from: s.stable, since: Date.now() };
  }

  /** Stops the log end refresh. Idempotent. */
  close(): void {
    clearInterval(this.refreshTimer);
    this.refreshTimer = undefined;
  }

  private publish(partition: number): void {
    const s = this.partitions.get(partition)!;
    const labels = { partition: String(partition) };
    if (s.checkpoint !== null) this.metrics.checkpoint.set(labels, Number(s.checkpoint));
    if (s.logEnd !== null) this.metrics.logEnd.set(labels, Number(s.logEnd));
    if (s.logEnd !== null && s.stable !== null) this.metrics.transactionHeld.set(labels, Number(s.logEnd - s.stable));
    const from = s.checkpoint ?? s.logStart;
    if (s.stable !== null && from !== null) this.metrics.lag.set(labels, Math.max(0, Number(s.stable - from)));
  }

  private checkStall(partition: number, s: PartitionState, log: Logger, stallAfterMs: number): void {
    const from = s.checkpoint ?? s.logStart;
    const behind = s.logEnd !== null && from !== null ? s.logEnd - from : 0n;
    const stalled = !this.stopped.has(partition) && behind > 0n && Date.now() - s.movedAt >= stallAfterMs;
    if (stalled === s.stalled) return;
    s.stalled = stalled;
    this.metrics.stalledPartitions.set({ partition: String(partition) }, stalled ? 1 : 0);
    if (stalled) {
      // Nothing readable left: what is behind waits for a transaction, not for this worker.
      const waiting = s.held !== undefined && from !== null && from >= s.held.from;
      const cause = waiting ? openTransaction(s.held!, s.logEnd!) : (this.stallCause?.(partition) ?? 'no cause known');
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

/** The stall cause when everything behind a checkpoint waits for a transaction still open. */
function openTransaction(held: { from: bigint; since: number }, logEnd: bigint): string {
  const age = Math.round((Date.now() - held.since) / 1000);
  return (
    `a transaction open for at least ${age} s holds back offsets ${held.from}..${logEnd - 1n} (${logEnd - held.from} records): ` +
    "a read_committed consumer gets them once its producer commits or aborts it, or the broker aborts it after the producer's transaction.timeout.ms"
  );
}
