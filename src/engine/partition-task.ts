/**
 * One assigned partition: turns each batch into stored output plus quarantine rows, then advances the
 * partition's durable checkpoint. Created on assignment from the checkpoint read back from Cassandra;
 * dropped on revocation.
 */
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';
import type { DecodedRecord, SourceRecord } from './job.js';
import type { TaskContext, TaskState } from './ports.js';
import { forJob, isLost, LostWritesFound, outOfRange, permanentError } from './task-errors.js';
import type { QuarantineEntry } from './quarantine.js';
import { RecentBatches } from './recent-batches.js';
import { abortedBy, isRetriable } from './retry.js';
import { reportQuarantined, writeAroundRefused } from './task-quarantine.js';

const NEVER = new AbortController().signal;

/** A batch's write found its task abandoned (its partition rewound): nothing of it is written. */
class Abandoned extends Error {}

export class PartitionTask {
  private state: TaskState = 'running';
  private error: ExactlyOnceError | undefined;
  /** The next offset we expect: the checkpoint, then the end of each stored batch. */
  private next: bigint | null;
  /** The checkpoint write of the last stored batch, while in flight (see process); never rejects. */
  private checkpointing: Promise<void> = Promise.resolve();
  /**
   * The highest checkpoint this task knows was stored: the one it was planned from (read back from
   * Cassandra), then each one it wrote and saw acknowledged (src/engine/lost-writes.ts).
   */
  private acked: bigint | null = null;
  /** The Cassandra outages counted when this task last found its stored checkpoint intact. */
  private verified: number;
  /** The Cassandra outages counted when the last stored batch's rows were acknowledged (see store). */
  private lastRowsAt: number | undefined;
  /** Set once its partition was rewound (lost writes): it never writes a checkpoint again. */
  private abandoned = false;
  /** The batches whose rows were acknowledged within the lost-writes window (replayFrom). */
  private readonly recent: RecentBatches;
  /** Whether a node's crash took back what this task wrote is being decided (holdFor); until then no batch writes. */
  private deciding: Promise<void> | undefined;
  /** When the last batch returned (performance.now()): the partition waits for the client from then on. */
  private idleSince: number | null = null;

  constructor(
    readonly partition: number,
    checkpoint: bigint | null,
    private readonly ctx: TaskContext,
    /**
     * The checkpoint's reset epoch, read with it (src/engine/checkpoint-store.ts): every checkpoint
     * this task writes carries it, so once the partition is reset (a higher epoch) they all lose.
     * Undefined when the checkpoint could not be read (such a task is stopped and never writes).
     */
    readonly epoch?: number,
    /**
     * The Cassandra outages counted before `checkpoint` was read (default: now). The checkpoint a task
     * is planned from is what it must find again after an outage, as much as one it wrote: a new owner
     * that plans from its predecessor's last checkpoint and then sees Cassandra crash must notice that
     * the checkpoint went back, or it would go on from it and cover the hole (src/engine/lost-writes.ts).
     */
    readAt?: number,
  ) {
    this.next = checkpoint;
    if (epoch !== undefined && checkpoint !== null) this.acked = checkpoint;
    this.verified = readAt ?? ctx.lostWrites?.generation ?? 0;
    this.recent = new RecentBatches(ctx);
  }

  /** The highest checkpoint this task knows was stored: planned from or acknowledged (null: none yet). */
  get acknowledged(): bigint | null {
    return this.acked;
  }

  /** Its partition is read again from an earlier checkpoint by a new task: write no rows and no checkpoint any more. */
  abandon(): void {
    this.abandoned = true;
    this.revoke();
  }

  get status(): { state: TaskState; next: bigint | null; error: ExactlyOnceError | undefined } {
    return { state: this.state, next: this.next, error: this.error };
  }

  /** Stops the partition on an error the user must act on; its checkpoint stays where it is. */
  stop(stopped: ExactlyOnceError): void {
    // Its way out names this job (`--job`), unless it is the events job the commands address by default.
    const error = forJob(stopped, this.ctx.job.legacyTables === true ? undefined : this.ctx.job.name);
    this.state = 'stopped';
    this.error = error;
    this.ctx.lag.partitionStopped(this.partition, error.code);
    this.ctx.log.error({ partition: this.partition, code: error.code }, error.message);
    this.ctx.onStop?.(this.partition, this.epoch ?? null, error);
  }

  /** The partition was revoked or lost: batches still in flight finish, but nothing new starts. */
  revoke(): void {
    if (this.state === 'running') this.state = 'revoked';
  }

  /**
   * Stores one batch (handed over by the client at `arrived`, a performance.now() time) and sends its checkpoint. Returns once the batch's rows are durable and the
   * previous batch's checkpoint is (this one's is in flight: `flush`), or at once when the task is not
   * running (nothing is checkpointed then, so nothing can be lost).
   */
  async process(records: readonly SourceRecord[], arrived?: number): Promise<void> {
    if (this.state !== 'running' || records.length === 0) return;
    const started = performance.now();
    const stages = this.ctx.metrics.batchStages;
    if (this.idleSince !== null) stages.observe({ stage: 'idle' }, ((arrived ?? started) - this.idleSince) / 1000);
    // What the batch waited for between its arrival and now (the topic's identity check: TaskManager).
    if (arrived !== undefined) stages.observe({ stage: 'identity' }, (started - arrived) / 1000);
    try {
      await this.store(records, started, arrived ?? started);
    } finally {
      this.idleSince = performance.now();
    }
  }

  /** process, timed stage by stage into exactlyonce_batch_stage_seconds (the idle stage is process's). */
  private async store(records: readonly SourceRecord[], started: number, arrived: number): Promise<void> {
    const stages = this.ctx.metrics.batchStages;
    const p = String(this.partition);
    // Records before the checkpoint are already stored (a re-delivery after a seek): skip them.
    const next = this.next;
    const fresh = next === null || records[0]!.offset >= next ? records : records.filter((r) => r.offset >= next);
    if (fresh.length === 0) return;
    const first = fresh[0]!.offset;
    if (this.next !== null && first > this.next) {
      // Offsets are not contiguous (transaction markers, aborted records, compaction), so a jump alone
      // proves nothing either way. The consumer says where the reading that brought the record began
      // (SourceRecord.fetchedFrom): every record a read_committed consumer receives from there on was
      // handed over in order, so a reading begun at or below `next` proves [next, first) holds none.
      const next = this.next;
      const from = fresh[0]!.fetchedFrom;
      if (typeof from !== 'bigint' || from > next) {
        // If the log now starts after the offset we expected, records we never stored were deleted.
        const logStart = await this.ctx.withRetry(() => this.ctx.logStart(this.partition));
        if (logStart > next) {
          this.stop(outOfRange(this.partition, next, 'below', logStart));
          return;
        }
        // Read from the log start, which only grows and is at or below `next` now: begun below it too.
        if (from !== 'log-start') {
          const where = from === undefined ? 'from a position its source does not tell' : `from offset ${from}`;
          this.stop(
            new ExactlyOnceError(
              'EO_OFFSET_GAP',
              `partition ${this.partition}: the batch starts at offset ${first}, but the partition resumes at ${next} and the client read it ${where}, not from ${next}: ` +
                `nothing proves that offsets ${next}..${first - 1n} hold no record (a restart of the reading that did not take place?). The partition is stopped at its checkpoint and nothing is skipped; ` +
                `restart the worker (it reads from the checkpoint), or run \`exactlyonce checkpoints reset --partition ${this.partition} --to ${next}\` (workers pick it up while running).`,
            ),
          );
          return;
        }
      }
    }
    this.ctx.metrics.consumed.inc({ partition: p }, fresh.length);
    // The middle record's age when handed over (producer and worker clocks; CreateTime topics): its
    // time in Kafka and the client. Up to the hand-over, not to now: the identity wait since is its own stage.
    const queued = Date.now() - (performance.now() - arrived) - fresh[fresh.length >> 1]!.timestampMs;
    if (queued >= 0) stages.observe({ stage: 'queued' }, queued / 1000);
    const decodeFrom = performance.now();

    let decoded: DecodedRecord<unknown>[] = [];
    const bad: QuarantineEntry[] = [];
    const job = this.ctx.job;
    // What decode reads from another server (schemas): fetched first, retried while it does not answer.
    const lookup = job.lookup;
    if (lookup !== undefined) await this.ctx.withRetry(() => lookup.fetch(fresh, this.ctx.signal ?? NEVER), lookup.server);
    for (let i = 0; i < fresh.length; i++) {
      const record = fresh[i]!;
      const d = job.decode(record);
      if (d.ok) decoded.push({ record, value: d.value });
      else bad.push({ record, reason: d.reason, detail: d.detail });
    }
    const rowsFrom = performance.now();
    stages.observe({ stage: 'decode' }, (rowsFrom - decodeFrom) / 1000);
    // The Cassandra outages counted when the attempt that stored each write of the batch began: an
    // acknowledgement handled after an outage was counted may still come from before the crash (the
    // rows and the quarantine rows are awaited together, and one of them may be retried across the
    // outage while the other was acknowledged just before it), so the earliest is what counts (see
    // checkpoint: rows acknowledged before an outage are written again before their checkpoint).
    let earliest = Number.POSITIVE_INFINITY;
    const counted = <T>(write: () => Promise<T>): Promise<T> => {
      const at = this.ctx.lostWrites?.generation ?? 0;
      return write().then((r) => {
        if (at < earliest) earliest = at;
        return r;
      });
    };
    // A replay being decided (holdFor) may move the partition back: nothing is written on top until it is.
    if (this.deciding !== undefined) await this.deciding;
    try {
      await Promise.all([
        // After a Cassandra outage, the stored checkpoint is checked before the job writes: a job may
        // build on what it stored before (the alert counts add a batch to the stored count), and
        // what it stored may be gone with the checkpoint (src/engine/lost-writes.ts).
        decoded.length > 0
          ? this.ctx.withRetry(() => {
              const write = async () => {
                // An outage since the previous batch's rows were acknowledged may have taken them back;
                // its checkpoint write rewrites them first (see checkpoint). This batch waits for that:
                // a job that builds on what it stored (the alert counts read back) would otherwise
                // read the row before the rewrite lands and store a later count without them, at a
                // higher write timestamp than the rewrite's, hiding them for good.
                if (this.lastRowsAt !== undefined && this.lastRowsAt !== (this.ctx.lostWrites?.generation ?? 0)) await this.checkpointing;
                // Rewound meanwhile (a retry across the outage that found the loss): the job must not
                // build on what the store lost (the alert counts read back); the new task writes these.
                if (this.abandoned) throw new Abandoned();
                return counted(() => this.ctx.job.write(this.partition, decoded, this.ctx.signal ?? NEVER));
              };
              return this.durable() ? write() : this.checkDurable().then(write);
            })
          : undefined,
        bad.length > 0 ? this.ctx.withRetry(() => counted(() => this.ctx.quarantine.write(bad))) : undefined,
      ]);
    } catch (e) {
      if (e instanceof Abandoned) return;
      if (e instanceof LostWritesFound) {
        void this.ctx.lostWrites?.rewind(this, e.stored, e.acked);
        return;
      }
      if (abortedBy(e, this.ctx.signal) || isRetriable(e) || decoded.length === 0 || (isExactlyOnceError(e) && !e.retriable)) throw e;
      const around = await writeAroundRefused(this.ctx, this.partition, decoded, e);
      if (around instanceof ExactlyOnceError) throw around;
      // Every record the store refused was quarantined by hand: the batch is the others.
      decoded = around.written;
      if (bad.length > 0) await this.ctx.withRetry(() => counted(() => this.ctx.quarantine.write(bad)));
    }
    const rowsDone = performance.now();
    const rowsAt = Number.isFinite(earliest) ? earliest : (this.ctx.lostWrites?.generation ?? 0);
    if (decoded.length > 0) this.lastRowsAt = rowsAt;
    this.recent.remember(rowsDone, first);
    stages.observe({ stage: 'rows' }, (rowsDone - rowsFrom) / 1000);
    if (bad.length > 0) reportQuarantined(this.ctx, this.partition, bad);

    // Every record of the batch is stored: only now may the checkpoint pass them. It is written while
    // the partition's next batch is (one Cassandra round trip off each batch's path), one at a time:
    // the next batch waits for it before sending its own, and a failure no retry fixes stops the
    // partition like a failed row write. Checkpoint writes are monotonic by construction
    // (src/engine/checkpoint-store.ts): one that lands late (the partition revoked, reset or
    // reassigned meanwhile) never moves a checkpoint back, and never past rows not stored. On
    // shutdown the Runner waits for those in flight; one still retrying is abandoned, and its rows
    // are read again (the job's writes are idempotent).
    await this.checkpointing;
    stages.observe({ stage: 'checkpoint_wait' }, (performance.now() - rowsDone) / 1000);
    if ((this.state as TaskState) === 'stopped') return;
    const nextOffset = fresh[fresh.length - 1]!.offset + 1n;
    if (this.next === null || nextOffset > this.next) this.next = nextOffset;
    this.ctx.metrics.stored.inc({ partition: p }, decoded.length);
    const rows = {
      at: rowsAt,
      write: () =>
        Promise.all([
          decoded.length > 0 ? this.ctx.job.write(this.partition, decoded, this.ctx.signal ?? NEVER) : undefined,
          bad.length > 0 ? this.ctx.quarantine.write(bad) : undefined,
        ]),
    };
    this.checkpoint(nextOffset, rows, () => {
      this.ctx.metrics.batches.inc({ partition: p });
      this.ctx.metrics.batchRecords.observe(fresh.length);
      this.ctx.metrics.batchSeconds.observe((performance.now() - started) / 1000);
    });
  }

  /**
   * The partition holds nothing a read_committed consumer receives in [from, to) — only aborted records
   * and transaction markers, proved by reading the log (src/engine/tail-skipper.ts) — so a checkpoint
   * at `from` (or none yet, when `from` was the log start) moves to `to`. Every record before `from` is
   * stored, so it passes no record that was delivered and not yet stored; and a batch stored meanwhile
   * can only have moved the checkpoint to `to` or beyond, since nothing below it is delivered. The
   * write follows the checkpoint in flight. Resolves once it is written, with whether it moved.
   */
  async skipTo(from: bigint, to: bigint): Promise<boolean> {
    if (this.state !== 'running' || (this.next !== null && (this.next < from || this.next >= to))) return false;
    this.next = to;
    this.checkpoint(to, undefined, () => this.ctx.metrics.skippedOffsets.inc({ partition: String(this.partition) }, Number(to - from)));
    await this.checkpointing;
    return true;
  }

  /**
   * Sends the checkpoint `next` (every record before it is stored) once the one in flight is written,
   * so that they land one at a time and in order; then `done` runs. See process.
   *
   * `rows` writes the batch's rows again; `rows.at` counts the Cassandra outages seen when they were
   * acknowledged. An outage since then may have taken them back (a node that crashed before syncing
   * its commit log: src/engine/lost-writes.ts) while the checkpoint before them survived, so that no
   * read of the stored checkpoint can tell: they are written again (the job's writes are idempotent)
   * before the checkpoint passes them.
   */
  private checkpoint(next: bigint, rows: { at: number; write: () => Promise<unknown> } | undefined, done: () => void): void {
    const guard = this.ctx.lostWrites;
    // What a new owner reads again if this worker dies and a node crash takes back rows it acknowledged
    // within the window (src/engine/lost-writes.ts resume); taken now, once, for every attempt.
    const from = guard === undefined || guard.windowMs <= 0 ? null : this.replayFrom(guard.horizon);
    const replay = from !== null && from < next ? { from, writtenAt: Date.now() } : undefined;
    const write = () =>
      this.ctx.withRetry(async () => {
        // After a Cassandra outage, the stored checkpoint is read back first (src/engine/lost-writes.ts).
        if (!this.durable()) await this.checkDurable();
        if (this.abandoned) return false;
        if (rows !== undefined && guard !== undefined && rows.at !== guard.generation) {
          const at = guard.generation;
          this.ctx.log.info({ partition: this.partition, next: String(next) }, `partition ${this.partition}: a Cassandra outage since the rows before ${next} were acknowledged; they are written again before their checkpoint`);
          await rows.write();
          rows.at = at;
          this.ctx.metrics.rowsRewritten.inc({ partition: String(this.partition) });
        }
        const sent = performance.now();
        await this.ctx.checkpoints.write(this.partition, next, this.epoch ?? 0, replay);
        this.ctx.metrics.batchStages.observe({ stage: 'checkpoint' }, (performance.now() - sent) / 1000);
        if (!this.abandoned && (this.acked === null || next > this.acked)) this.acked = next;
        return true;
      }).then(
        (written) => {
          if (!written) return;
          this.ctx.lag.checkpointed(this.partition, next);
          done();
        },
        (e: unknown) => {
          if (e instanceof LostWritesFound) void this.ctx.lostWrites?.rewind(this, e.stored, e.acked);
          // Shutting down: this checkpoint (and the rows it may have been writing again) is abandoned, and
          // so is the task, so that no later batch's checkpoint passes rows it did not see stored.
          else if (abortedBy(e, this.ctx.signal)) this.abandon();
          else this.stop(permanentError(this.partition, e));
        },
      );
    // (The previous write never rejects; one that stopped the partition leaves nothing to write.)
    this.checkpointing = this.checkpointing.then(() => (this.state === 'stopped' ? undefined : write()));
    const inFlight = this.ctx.checkpointsInFlight;
    if (inFlight !== undefined) {
      const c = this.checkpointing;
      inFlight.add(c);
      void c.then(() => inFlight.delete(c));
    }
  }

  /** Whether nothing was acknowledged yet, or no Cassandra outage was seen since the stored checkpoint was last found intact. */
  private durable(): boolean {
    const guard = this.ctx.lostWrites;
    return guard === undefined || this.acked === null || this.verified === guard.generation;
  }

  /**
   * After a Cassandra outage this worker saw, reads the stored checkpoint back before writing the next
   * one: lower than one acknowledged before means the store lost writes (src/engine/lost-writes.ts),
   * and writing on would cover the hole. Throws LostWritesFound then (not retried: the partition is
   * rewound instead).
   */
  private async checkDurable(): Promise<void> {
    const guard = this.ctx.lostWrites;
    if (guard === undefined || this.durable()) return;
    const generation = guard.generation;
    const acked = this.acked!;
    const stored = await this.ctx.checkpoints.readOne(this.partition);
    if (isLost(stored, this.epoch ?? 0, acked)) throw new LostWritesFound(stored, acked);
    this.verified = generation;
  }

  /**
   * A node went down, and whether this task's partition is read again from an earlier offset is being
   * decided (src/engine/lost-writes.ts replay: it waits for Cassandra to answer). Its batches write
   * nothing until then: a decision that came after the batches written meanwhile would move the
   * partition back over them — all written again for nothing, and a worker stopped just after it (its
   * partitions drained) would leave them to be read again by the next owner.
   */
  holdFor(decision: Promise<void>): void {
    const d = decision.catch(() => undefined);
    this.deciding = d;
    void d.then(() => {
      if (this.deciding === d) this.deciding = undefined;
    });
  }

  /**
   * Takes on what the previous owner acknowledged within the window before its checkpoint (planned
   * from it: StoredCheckpoint.replay), as if this task had: a node that goes down now may have taken
   * those rows back as much as its own (src/engine/lost-writes.ts). Counted from when the checkpoint
   * was written, the latest they can have been acknowledged.
   */
  inherit(replay: { from: bigint; writtenAt: number }): void {
    this.recent.remember(performance.now() - Math.max(0, Date.now() - replay.writtenAt), replay.from);
  }

  /**
   * Where to read again from if a node that went down took back what was acknowledged since `since`
   * (performance.now()): the first offset of the first batch acknowledged since then, or null when none
   * was (or the task no longer runs).
   */
  replayFrom(since: number): bigint | null {
    if (this.state !== 'running' || this.abandoned) return null;
    return this.recent.firstSince(since);
  }

  /** Resolves once the last stored batch's checkpoint is written (or abandoned on shutdown, or has stopped the partition). */
  flush(): Promise<void> {
    return this.checkpointing;
  }
}
