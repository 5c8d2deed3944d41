/**
 * The durable checkpoint of each partition: the next offset to read. Kafka-side committed offsets are
 * never used to resume; this table is the only source of truth.
 *
 * Zombie safety: every write is `USING TIMESTAMP <next_offset>`. Cassandra keeps, per cell, the
 * write with the highest timestamp, so of any two checkpoint writes for a partition the one with the
 * higher offset wins, whatever order they arrive in and whoever sends them. A worker that lost the
 * partition (paused past its session timeout, then woken) can therefore never move the checkpoint
 * backwards; and it only ever writes a checkpoint after all records before it are stored, so even its
 * late write never claims an offset whose output is not durable. No Paxos round per batch is needed.
 * (Two writes with the same timestamp carry the same value, so Cassandra's tie-break cannot matter.)
 * The price: never write this table with server-side timestamps, and reset it only with TRUNCATE.
 */
import { consistencies, fromLong, toLong, type Client } from '../cassandra/session.js';

export class CheckpointStore {
  constructor(
    private readonly session: Client,
    private readonly keyspace: string,
    private readonly topic: string,
  ) {}

  /** The next offset to read, or null when the partition was never checkpointed. */
  async read(partition: number): Promise<bigint | null> {
    const r = await this.session.execute(
      `SELECT next_offset FROM ${this.keyspace}.checkpoints WHERE topic = ? AND partition = ?`,
      [this.topic, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    const row = r.first();
    return row === null ? null : fromLong(row['next_offset']);
  }

  async readAll(): Promise<Map<number, bigint>> {
    const r = await this.session.execute(
      `SELECT partition, next_offset FROM ${this.keyspace}.checkpoints WHERE topic = ?`,
      [this.topic],
      { prepare: true, consistency: consistencies.localQuorum },
    );
    return new Map(r.rows.map((row) => [row['partition'] as number, fromLong(row['next_offset'])]));
  }

  /**
   * Records that every record of `partition` before `nextOffset` is stored. Idempotent, and monotonic
   * by construction (see above): replaying it, or sending an older one late, changes nothing.
   */
  async write(partition: number, nextOffset: bigint): Promise<void> {
    await this.session.execute(
      `UPDATE ${this.keyspace}.checkpoints USING TIMESTAMP ? SET next_offset = ? WHERE topic = ? AND partition = ?`,
      [toLong(nextOffset), toLong(nextOffset), this.topic, partition],
      { prepare: true, consistency: consistencies.localQuorum },
    );
  }
}
