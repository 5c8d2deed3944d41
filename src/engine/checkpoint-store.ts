/**
 * The durable checkpoint of each partition: the next offset to read. Kafka-side committed offsets are
 * never used to resume; this table is the only source of truth.
 *
 * Zombie safety: every write is `USING TIMESTAMP epoch·2^44 + next_offset` (checkpointTimestamp).
 * Cassandra keeps, per cell, the write with the highest timestamp, so of any two checkpoint writes of
 * one epoch the one with the higher offset wins, whatever order they arrive in and whoever sends them.
 * A worker that lost the partition (paused past its session timeout, then woken) can therefore never
 * move the checkpoint backwards; and it only ever writes a checkpoint after all records before it are
 * stored, so even its late write never claims an offset whose output is not durable. No Paxos round per
 * batch is needed. (Two writes with the same timestamp carry the same offset and epoch, so Cassandra's
 * tie-break cannot matter to them; they may differ in `replay` only, see write.)
 *
 * Resets (`exactlyonce checkpoints reset`): the epoch is the number of resets of the partition. A
 * reset writes epoch + 1 with its offset, so its timestamp is above every timestamp of the old epoch
 * (offsets stay below 2^44): every late write of an old owner loses to it, whatever order they land
 * in, while the new owner's writes (the new epoch, offsets from the reset point up) win over it. Neither
 * alternative does that: TRUNCATE leaves no tombstone, so a zombie's late write survives it, and a
 * DELETE at wall-clock time (about 2^50 µs) would shadow every later offset-timestamped write. Each
 * write stores its epoch in the same statement (same timestamp), so `epoch` and `next_offset` always
 * come from one write. Epoch 0 is the timestamp scheme before resets existed (`next_offset` alone), so
 * checkpoints written before migration 007 stay valid. The price: never write this table with
 * server-side timestamps.
 *
 * Beside the checkpoints, `partition_state` records who owns each partition and why it is stopped,
 * for `exactlyonce checkpoints list` only (wall-clock timestamps; nothing above depends on it).
 */
import { consistencies, fromLong, toLong, types, type Client, type Row } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';
import { engineTables, type EngineTables } from './engine-tables.js';

/** Bits of a checkpoint's write timestamp below the epoch: offsets must stay below 2^44. */
export const EPOCH_SHIFT = 44n;
/** The first offset a checkpoint cannot hold (2^44 = 17,592,186,044,416). */
export const OFFSET_LIMIT = 1n << EPOCH_SHIFT;
/** The highest epoch whose timestamps fit in Cassandra's signed 64-bit write timestamp. */
export const MAX_EPOCH = 2 ** (63 - Number(EPOCH_SHIFT)) - 1;

/** How long an owner's name lives in `partition_state` after its last refresh, in seconds. */
export const OWNER_TTL_S = 30;

/**
 * The write timestamp of a checkpoint: `epoch·2^44 + nextOffset`. Refuses (EO_CHECKPOINT_OUT_OF_RANGE)
 * an offset outside [0, 2^44) or an epoch outside [0, MAX_EPOCH], which would collide with the next
 * epoch or overflow.
 */
export function checkpointTimestamp(epoch: number, nextOffset: bigint): bigint {
  if (!Number.isSafeInteger(epoch) || epoch < 0 || epoch > MAX_EPOCH) {
    throw new ExactlyOnceError('EO_CHECKPOINT_OUT_OF_RANGE', `checkpoint epoch ${epoch} is outside 0..${MAX_EPOCH} (the number of resets of one partition)`);
  }
  if (nextOffset < 0n || nextOffset >= OFFSET_LIMIT) {
    throw new ExactlyOnceError(
      'EO_CHECKPOINT_OUT_OF_RANGE',
      `checkpoint offset ${nextOffset} is outside 0..${OFFSET_LIMIT - 1n}: a checkpoint's write timestamp is epoch·2^44 + offset, so offsets must stay below 2^44`,
    );
  }
  return (BigInt(epoch) << EPOCH_SHIFT) + nextOffset;
}

/** A stored checkpoint: the next offset to read and the reset epoch it was written in. */
export interface StoredCheckpoint {
  next: bigint;
  epoch: number;
  /**
   * What its writer acknowledged within the lost-writes window before writing it: the first offset of
   * those batches, and when the checkpoint was written (epoch ms, the writer's clock). A node that
   * crashed after `writtenAt − window` may have taken those rows back (src/engine/lost-writes.ts).
   * Absent: nothing to read again (a reset, or a checkpoint written before migration 060).
   */
  replay?: { from: bigint; writtenAt: number };
}

/** A checkpoint row's stored value (`replay` read only where asked: the planner's and the watcher's reads). */
function storedCheckpoint(row: Row): StoredCheckpoint {
  const c: StoredCheckpoint = { next: fromLong(row['next_offset']), epoch: (row['epoch'] as number | null) ?? 0 };
  const replay = row['replay'] as InstanceType<typeof types.Tuple> | null | undefined;
  if (replay !== null && replay !== undefined && replay.get(0) !== null && replay.get(1) !== null) {
    c.replay = { from: fromLong(replay.get(0)), writtenAt: (replay.get(1) as Date).getTime() };
  }
  return c;
}

/** Why a worker stopped a partition, as recorded for `checkpoints list`. */
export interface StopRecord {
  code: string;
  message: string;
  /** The reset epoch of the task that stopped, or null when unknown (its checkpoint could not be read). */
  epoch: number | null;
  at: Date | null;
  /** The worker that stopped it. */
  by: string | null;
}

export interface PartitionState {
  /** The worker that last reported owning the partition, within OWNER_TTL_S. */
  owner: string | null;
  stopped: StopRecord | null;
}

export class CheckpointStore {
  private readonly t: EngineTables;
  /** The key of this store's rows: the job's name (job-keyed tables only) and the topic. */
  private readonly key: readonly string[];

  /**
   * The checkpoints of `topic` in `keyspace`: the job `job`'s (its rows of `job_checkpoints`), or
   * without a job the first, unkeyed tables (the events job's; src/engine/engine-tables.ts).
   */
  constructor(
    private readonly session: Client,
    keyspace: string,
    private readonly topic: string,
    job?: string,
  ) {
    this.t = engineTables(keyspace, job);
    this.key = [...this.t.jobParams, topic];
  }

  /** The next offset to read, or null when the partition was never checkpointed. */
  async read(partition: number): Promise<bigint | null> {
    const r = await this.session.execute(
      `SELECT next_offset FROM ${this.t.checkpoints} WHERE ${this.t.jobWhere}topic = ? AND partition = ?`,
      [...this.key, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    const row = r.first();
    return row === null ? null : fromLong(row['next_offset']);
  }

  /** One partition's stored checkpoint and epoch, or null when never checkpointed (src/engine/lost-writes.ts). */
  async readOne(partition: number): Promise<StoredCheckpoint | null> {
    const r = await this.session.execute(
      `SELECT next_offset, epoch FROM ${this.t.checkpoints} WHERE ${this.t.jobWhere}topic = ? AND partition = ?`,
      [...this.key, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    const row = r.first();
    return row === null || row['next_offset'] === null ? null : storedCheckpoint(row);
  }

  /** The next offset of every checkpointed partition. */
  async readAll(): Promise<Map<number, bigint>> {
    return new Map([...(await this.readStored())].map(([p, c]) => [p, c.next]));
  }

  /**
   * The next offset and reset epoch of every checkpointed partition (rows from before epochs: 0);
   * `withReplay`: with what a new owner reads again after a crash (a worker's read: the keyspace has
   * migration 060; the operator commands read without it).
   */
  async readStored(withReplay = false): Promise<Map<number, StoredCheckpoint>> {
    const r = await this.session.execute(
      `SELECT partition, next_offset, epoch${withReplay ? ', replay' : ''} FROM ${this.t.checkpoints} WHERE ${this.t.jobWhere}topic = ?`,
      [...this.key],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    return new Map(r.rows.filter((row) => row['next_offset'] !== null).map((row) => [row['partition'] as number, storedCheckpoint(row)]));
  }

  /**
   * Records that every record of `partition` before `nextOffset` is stored, in reset epoch `epoch`.
   * Idempotent, and monotonic by construction (see above): replaying it, or sending an older one late,
   * changes nothing; once the partition is reset, no write of an older epoch changes anything either.
   * `replay`: what its writer acknowledged within the lost-writes window (StoredCheckpoint.replay;
   * none: nothing, as after a reset). Two writes of one timestamp may differ only there, and a read
   * then returns the tuple of one of them.
   */
  async write(partition: number, nextOffset: bigint, epoch = 0, replay?: { from: bigint; writtenAt: number }): Promise<void> {
    const timestamp = checkpointTimestamp(epoch, nextOffset);
    const tuple = replay === undefined ? null : new types.Tuple(toLong(replay.from), new Date(replay.writtenAt));
    await this.session.execute(
      `UPDATE ${this.t.checkpoints} USING TIMESTAMP ? SET next_offset = ?, epoch = ?, replay = ? WHERE ${this.t.jobWhere}topic = ? AND partition = ?`,
      [toLong(timestamp), toLong(nextOffset), epoch, tuple, ...this.key, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
  }

  /**
   * Moves a partition's checkpoint to `to`, in epoch `fromEpoch + 1` (`fromEpoch`: the epoch read
   * before, 0 when never checkpointed): it wins over every write of epoch `fromEpoch` or below, sent
   * before or after. The owner notices the new epoch and resumes there (src/engine/runner.ts). Also
   * clears the partition's stop record. Returns the new checkpoint.
   */
  async reset(partition: number, to: bigint, fromEpoch: number): Promise<StoredCheckpoint> {
    const epoch = fromEpoch + 1;
    await this.write(partition, to, epoch);
    await this.clearStop([partition]);
    return { next: to, epoch };
  }

  /** Owner and stop record of every partition that has one. */
  async readStates(): Promise<Map<number, PartitionState>> {
    const r = await this.session.execute(
      `SELECT partition, owner, stopped_code, stopped_message, stopped_at, stopped_epoch, stopped_by FROM ${this.t.partitionState} WHERE ${this.t.jobWhere}topic = ?`,
      [...this.key],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    return new Map(
      r.rows.map((row) => [
        row['partition'] as number,
        {
          owner: (row['owner'] as string | null) ?? null,
          stopped:
            row['stopped_code'] === null
              ? null
              : {
                  code: row['stopped_code'] as string,
                  message: (row['stopped_message'] as string | null) ?? '',
                  epoch: (row['stopped_epoch'] as number | null) ?? null,
                  at: (row['stopped_at'] as Date | null) ?? null,
                  by: (row['stopped_by'] as string | null) ?? null,
                },
        },
      ]),
    );
  }

  /** Says that `owner` owns `partitions` now (expires after OWNER_TTL_S unless said again). */
  async recordOwner(partitions: readonly number[], owner: string): Promise<void> {
    await this.batch(partitions, `UPDATE ${this.t.partitionState} USING TTL ${OWNER_TTL_S} SET owner = ? WHERE ${this.t.jobWhere}topic = ? AND partition = ?`, (p) => [owner, ...this.key, p]);
  }

  /** The partitions are no longer owned (revoked, or the worker stops). */
  async clearOwner(partitions: readonly number[]): Promise<void> {
    await this.batch(partitions, `UPDATE ${this.t.partitionState} SET owner = null WHERE ${this.t.jobWhere}topic = ? AND partition = ?`, (p) => [...this.key, p]);
  }

  /** Records why a partition was stopped, for `checkpoints list`. */
  async recordStop(partition: number, stop: { code: string; message: string; epoch: number | null; by: string }): Promise<void> {
    await this.session.execute(
      `UPDATE ${this.t.partitionState} SET stopped_code = ?, stopped_message = ?, stopped_epoch = ?, stopped_at = ?, stopped_by = ? WHERE ${this.t.jobWhere}topic = ? AND partition = ?`,
      [stop.code, stop.message, stop.epoch, new Date(), stop.by, ...this.key, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
  }

  /** Forgets why the partitions were stopped (they were reset, or assigned and found readable). */
  async clearStop(partitions: readonly number[]): Promise<void> {
    await this.batch(
      partitions,
      `DELETE stopped_code, stopped_message, stopped_epoch, stopped_at, stopped_by FROM ${this.t.partitionState} WHERE ${this.t.jobWhere}topic = ? AND partition = ?`,
      (p) => [...this.key, p],
    );
  }

  /** One statement per partition in one unlogged batch (every row is in the topic's (and job's) Cassandra partition). */
  private async batch(partitions: readonly number[], query: string, params: (p: number) => unknown[]): Promise<void> {
    if (partitions.length === 0) return;
    await this.session.batch(
      partitions.map((p) => ({ query, params: params(p) })),
      { prepare: true, logged: false, consistency: consistencies.localQuorum },
    );
  }
}

/**
 * Whether a recorded stop still describes the partition: not when it was stopped in an older epoch
 * than its checkpoint's (a reset came after it; a zombie's late record of an old stop is ignored too).
 */
export function stopIsCurrent(stop: StopRecord, checkpoint: StoredCheckpoint | undefined): boolean {
  return stop.epoch === null || stop.epoch >= (checkpoint?.epoch ?? 0);
}

// ---- What `exactlyonce checkpoints list` and `reset` share: pure functions over what was read. ----

/** Where `checkpoints reset --to` moves a checkpoint: the log start, the log end, or an offset. */
export type ResetTarget = 'earliest' | 'latest' | bigint;

/** Parses `--to` (EO_CONFIG_INVALID naming the flag otherwise). */
export function parseResetTarget(value: string): ResetTarget {
  const v = value.trim();
  if (v === 'earliest' || v === 'latest') return v;
  if (/^\d+$/.test(v)) return BigInt(v);
  throw new ExactlyOnceError('EO_CONFIG_INVALID', `--to: expected earliest, latest or an offset (a whole number from 0) (got '${value}')`);
}

/** One partition's reset: from its stored checkpoint (null: never checkpointed) to the new one. */
export interface ResetPlan {
  partition: number;
  from: StoredCheckpoint | null;
  to: StoredCheckpoint;
  logStart: bigint;
  logEnd: bigint;
}

/** The log start and end of a partition (the brokers' watermarks), and its last stable offset (src/kafka/admin.ts). */
export interface LogBounds {
  partition: number;
  low: bigint;
  high: bigint;
  stable: bigint;
}

/**
 * What a reset of `partitions` to `target` writes: `earliest` is the log start, `latest` the log end, an
 * offset must lie in [log start, log end]; the new epoch is the stored one + 1. Throws EO_CONFIG_INVALID
 * naming --partition (no such partition) or --to (offset outside the log).
 */
export function planResets(topic: string, partitions: readonly number[], target: ResetTarget, marks: readonly LogBounds[], stored: ReadonlyMap<number, StoredCheckpoint>): ResetPlan[] {
  return partitions.map((p) => {
    const w = marks.find((m) => m.partition === p);
    if (w === undefined) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `--partition: topic ${topic} has partitions 0..${marks.length - 1} (got ${p})`);
    }
    const to = target === 'earliest' ? w.low : target === 'latest' ? w.high : target;
    if (to < w.low || to > w.high) {
      throw new ExactlyOnceError(
        'EO_CONFIG_INVALID',
        `--to: offset ${to} is outside partition ${p}'s log [${w.low}, ${w.high}] (log start, log end); a checkpoint there would skip records or wait for ones that do not exist`,
      );
    }
    checkpointTimestamp(0, to); // refuses offsets beyond 2^44, before anything is written
    const from = stored.get(p) ?? null;
    return { partition: p, from, to: { next: to, epoch: (from?.epoch ?? 0) + 1 }, logStart: w.low, logEnd: w.high };
  });
}

/** One line of `checkpoints list`. */
export interface PartitionReport {
  partition: number;
  /** The next offset to read; null when never checkpointed. */
  checkpoint: bigint | null;
  epoch: number | null;
  /** Null for a partition the topic no longer has. */
  logStart: bigint | null;
  logEnd: bigint | null;
  /**
   * Last stable offset − checkpoint (from the log start when never checkpointed): what is left to read.
   * Transactions: the end of what a read_committed consumer can read, not the log end.
   */
  lag: bigint | null;
  /** Log end − last stable offset: records an open transaction holds back (readable once it ends). */
  held: bigint | null;
  owner: string | null;
  /** Why it is stopped, when that still holds (see stopIsCurrent). */
  stopped: StopRecord | null;
}

/** Every partition of the topic (and any other one that has a checkpoint), in order. */
export function partitionReports(marks: readonly LogBounds[], stored: ReadonlyMap<number, StoredCheckpoint>, states: ReadonlyMap<number, PartitionState>): PartitionReport[] {
  const partitions = [...new Set([...marks.map((m) => m.partition), ...stored.keys()])].sort((a, b) => a - b);
  return partitions.map((p) => {
    const w = marks.find((m) => m.partition === p);
    const c = stored.get(p);
    const state = states.get(p);
    const stop = state?.stopped ?? null;
    return {
      partition: p,
      checkpoint: c?.next ?? null,
      epoch: c?.epoch ?? null,
      logStart: w?.low ?? null,
      logEnd: w?.high ?? null,
      lag: w === undefined ? null : w.stable - (c?.next ?? w.low),
      held: w === undefined ? null : w.high - w.stable,
      owner: state?.owner ?? null,
      stopped: stop !== null && stopIsCurrent(stop, c) ? stop : null,
    };
  });
}
