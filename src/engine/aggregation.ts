/**
 * Exactly-once aggregation into Cassandra, for any job: the mechanism, without the tables (a job says
 * what a group is, what it folds and where the rows go; src/jobs/sink/sink-aggregate.ts is one).
 *
 * 1. Partials. The state of one (group, window) is kept per Kafka partition: the fold of the
 *    partition's records of that group and window whose offset is at most `through`. A partial is a
 *    pure function of (partition, through): the log's prefix. A batch adds its records with offsets
 *    above `through` (a replay or a zombie brings none above it, so nothing is counted twice) and writes
 *    the partial `USING TIMESTAMP through`: of two writes of one partial, the one that includes more of
 *    the log wins whatever order they land in, and two writes with the same `through` hold the same
 *    state. The partial a batch adds to comes from a per-partition cache while the partition is read
 *    contiguously (PartialCache); otherwise it is read back, which also picks up a partial Cassandra
 *    forgot (the batch is written again from a lower `through`).
 * 2. The merge. After the batch's partials are acknowledged, each touched (group, window) reads all its
 *    partials (one Cassandra partition) and writes the merged row `USING TIMESTAMP mergeTimestamp`:
 *    Σ (through + 1) over the partials read. Each partial's `through` only grows, so a merge that read
 *    a newer partial of some partition and no older one of any has a strictly higher timestamp: a stale
 *    merge landing late loses, cell by cell (Cassandra keeps the highest timestamp). Of two workers
 *    merging one window after writing their own partials, the one that reads last sees both (each reads
 *    after its own write was acknowledged, at a quorum), so the last merge of the batch that brought the
 *    final partial reads every final partial and wins over every merge that read less. Two merges that
 *    read different partials with the same sum can tie; the merge that follows both reads more and
 *    overwrites each of their cells.
 * 3. Everything runs before the batch's checkpoint: a crash at any point replays the batch, which adds
 *    nothing already included and merges again.
 * A group's records need not share a partition: a topic that gains partitions adds partials.
 */

/** What a job folds: its state and how a record's contribution and two partitions' states combine. */
export interface Fold<V, S> {
  /** The state of no records. */
  empty(): S;
  /** The state with one more record; may change `state` in place and return it. */
  add(state: S, value: V, at: { partition: number; offset: bigint }): S;
  /** Two partitions' states as one; must not change either. */
  merge(a: S, b: S): S;
}

/** One partition's partial of one (group, window). */
export interface Partial<S> {
  /** The highest offset included (−1: none). */
  readonly through: bigint;
  readonly state: S;
}

/**
 * The write timestamp of a merged row: Σ over the partials read of (through + 1), so that reading a
 * newer partial of any partition (and no older one of any) gives a higher one (see the file comment).
 */
export function mergeTimestamp(throughs: Iterable<bigint>): bigint {
  let t = 0n;
  for (const x of throughs) t += x + 1n;
  return t;
}

/** The merged state of partials (none: `fold.empty()`). */
export function mergePartials<S>(fold: Fold<unknown, S>, partials: Iterable<S>): S {
  let out = fold.empty();
  for (const p of partials) out = fold.merge(out, p);
  return out;
}

/**
 * Adds a batch's records (in offset order) to partials: those with offsets above a partial's `through`.
 * `partialOf` gives the partial a key starts from (cached or read back). Returns, per key the batch
 * touched, the partial after the batch and whether the batch added to it (a partial it added nothing to
 * need not be written again; it is merged again all the same).
 */
export async function applyBatch<V, S>(
  fold: Fold<V, S>,
  partition: number,
  records: Iterable<{ key: string; offset: bigint; value: V }>,
  partialOf: (key: string) => Promise<Partial<S>>,
): Promise<Map<string, { partial: Partial<S>; added: number }>> {
  const byKey = new Map<string, Array<{ offset: bigint; value: V }>>();
  for (const r of records) {
    const list = byKey.get(r.key);
    if (list === undefined) byKey.set(r.key, [{ offset: r.offset, value: r.value }]);
    else list.push({ offset: r.offset, value: r.value });
  }
  const out = new Map<string, { partial: Partial<S>; added: number }>();
  await Promise.all(
    [...byKey].map(async ([key, list]) => {
      const start = await partialOf(key);
      let { through, state } = start;
      let added = 0;
      for (const r of list) {
        if (r.offset <= through) continue; // included already (a replay)
        state = fold.add(added === 0 ? structuredClone(state) : state, r.value, { partition, offset: r.offset });
        through = r.offset;
        added++;
      }
      out.set(key, { partial: { through, state }, added });
    }),
  );
  return out;
}

/**
 * What a worker knows of its partitions' partials, valid while it reads each partition contiguously: a
 * batch that starts where the last one stored ended continues it; any other (a replay, a rewind, a batch
 * written again after an outage) starts from partials read back. At most `limit` keys per partition
 * (the least recently touched are forgotten, then read back when touched again).
 */
export class PartialCache<S> {
  private readonly partitions = new Map<number, { next: bigint; keys: Map<string, Partial<S>> }>();

  constructor(private readonly limit = 4096) {}

  /** The partials known for a batch of `partition` starting at `first` (empty unless it continues the last). */
  begin(partition: number, first: bigint): ReadonlyMap<string, Partial<S>> {
    const p = this.partitions.get(partition);
    if (p !== undefined && p.next === first) return p.keys;
    this.partitions.delete(partition);
    return new Map();
  }

  /** The batch [first, last] of `partition` is stored with these partials. */
  commit(partition: number, first: bigint, last: bigint, stored: ReadonlyMap<string, Partial<S>>): void {
    const p = this.partitions.get(partition);
    const keys = p !== undefined && p.next === first ? p.keys : new Map<string, Partial<S>>();
    for (const [k, v] of stored) {
      keys.delete(k);
      keys.set(k, v);
    }
    for (const k of keys.keys()) {
      if (keys.size <= this.limit) break;
      keys.delete(k);
    }
    this.partitions.set(partition, { next: last + 1n, keys });
  }

  /** Forgets a partition (revoked, rewound). */
  forget(partition: number): void {
    this.partitions.delete(partition);
  }
}
