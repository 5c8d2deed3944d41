// The engine's exactly-once aggregation (src/engine/aggregation.ts) against a model of Cassandra's
// cell-by-cell last-write-wins (the highest write timestamp; on a tie, the greater value): partial
// writes and merges of three partitions land in every order a seeded schedule makes, merges read
// stale partials and land late, batches are replayed — and the row always ends equal to the merge of
// the final partials, and its write timestamp never goes back.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applyBatch, mergePartials, mergeTimestamp, PartialCache, type Fold, type Partial } from '../../src/engine/aggregation.js';
import { prng } from '../../src/prng.js';

interface S {
  count: number;
  sum: number;
  max: number | null;
}
const fold: Fold<number, S> = {
  empty: () => ({ count: 0, sum: 0, max: null }),
  add: (s, v) => {
    s.count++;
    s.sum += v;
    s.max = s.max === null || v > s.max ? v : s.max;
    return s;
  },
  merge: (a, b) => ({ count: a.count + b.count, sum: a.sum + b.sum, max: a.max === null ? b.max : b.max === null ? a.max : Math.max(a.max, b.max) }),
};

/** A cell as Cassandra keeps it: the write with the highest timestamp, on a tie the greater value. */
class Cell<T> {
  at = -1n;
  value: T | undefined;
  write(at: bigint, value: T): void {
    const text = (v: unknown) => JSON.stringify(v, (_, x: unknown) => (typeof x === 'bigint' ? String(x) : x)) ?? '';
    if (at > this.at || (at === this.at && text(value) > text(this.value))) {
      this.at = at;
      this.value = value;
    }
  }
}

test('mergeTimestamp is Σ (through + 1): more of any partition, nothing less of another, is strictly higher', () => {
  assert.equal(mergeTimestamp([]), 0n);
  assert.equal(mergeTimestamp([-1n, 4n, 9n]), 15n);
  assert.ok(mergeTimestamp([3n, 7n]) > mergeTimestamp([3n, 6n]));
  assert.ok(mergeTimestamp([0n, 7n]) > mergeTimestamp([-1n, 7n]), 'a partition first seen counts');
});

test('applyBatch adds only the records above a partial\'s through offset, and never changes the partial it started from', async () => {
  const start: Partial<S> = { through: 5n, state: { count: 2, sum: 10, max: 7 } };
  const records = [4n, 5n, 6n, 8n].map((offset) => ({ key: 'k', offset, value: Number(offset) }));
  const out = await applyBatch(fold, 0, records, async () => start);
  assert.deepEqual(out.get('k'), { partial: { through: 8n, state: { count: 4, sum: 24, max: 8 } }, added: 2 });
  assert.deepEqual(start, { through: 5n, state: { count: 2, sum: 10, max: 7 } }, 'the cached partial is left as it was (a failed write retries from it)');
  const replay = await applyBatch(fold, 0, records, async () => out.get('k')!.partial);
  assert.deepEqual(replay.get('k'), { partial: { through: 8n, state: { count: 4, sum: 24, max: 8 } }, added: 0 }, 'a replay adds nothing');
});

test('PartialCache: a batch that continues the last one sees its partials; any other, and a forgotten partition, starts empty; at most limit keys', () => {
  const c = new PartialCache<S>(2);
  const p = (n: number): Partial<S> => ({ through: BigInt(n), state: { count: n, sum: n, max: n } });
  assert.equal(c.begin(0, 0n).size, 0);
  c.commit(0, 0n, 9n, new Map([['a', p(1)], ['b', p(2)]]));
  assert.deepEqual([...c.begin(0, 10n).keys()], ['a', 'b']);
  assert.equal(c.begin(0, 5n).size, 0, 'a replay from 5 reads back');
  c.commit(0, 0n, 9n, new Map([['a', p(1)]]));
  c.commit(0, 10n, 19n, new Map([['c', p(3)], ['a', p(4)]]));
  assert.deepEqual([...c.begin(0, 20n).entries()].map(([k, v]) => [k, v.through]), [['c', 3n], ['a', 4n]], 'the least recently touched (b) is forgotten first');
  c.forget(0);
  assert.equal(c.begin(0, 20n).size, 0);
});

test('merges landing out of order, stale and replayed: the row ends the merge of the final partials, its timestamp never going back (500 seeded schedules)', async () => {
  for (let seed = 1; seed <= 500; seed++) {
    const rand = prng(seed);
    const partitions = 3;
    // Each partition's records of the one (group, window), in offset order.
    const log = Array.from({ length: partitions }, () => Array.from({ length: 1 + Math.floor(rand() * 12) }, (_, i) => ({ offset: BigInt(i * 3 + Math.floor(rand() * 3)), value: Math.floor(rand() * 200) - 100 })));
    for (const l of log) l.sort((a, b) => (a.offset < b.offset ? -1 : 1)).forEach((r, i, all) => i > 0 && r.offset <= all[i - 1]!.offset && (r.offset = all[i - 1]!.offset + 1n));
    const partials = Array.from({ length: partitions }, () => new Cell<Partial<S>>());
    const row = { count: new Cell<number>(), sum: new Cell<number>(), max: new Cell<number | null>() };
    const landed: bigint[] = [];
    // Merges in flight: written later, in any order.
    const inFlight: Array<{ at: bigint; state: S }> = [];
    const land = (m: { at: bigint; state: S }) => {
      row.count.write(m.at, m.state.count);
      row.sum.write(m.at, m.state.sum);
      row.max.write(m.at, m.state.max);
      landed.push(row.count.at);
    };
    const merge = () => {
      const read = partials.filter((c) => c.value !== undefined).map((c) => c.value!);
      inFlight.push({ at: mergeTimestamp(read.map((p) => p.through)), state: mergePartials(fold as Fold<unknown, S>, read.map((p) => p.state)) });
    };
    // Each partition's batches, interleaved at random; some batches run twice (a replay), some merges land late.
    const next = log.map(() => 0);
    const history = log.map(() => [] as Array<{ before: Partial<S>; batch: Array<{ key: string; offset: bigint; value: number }> }>);
    while (next.some((n, p) => n < log[p]!.length)) {
      const p = Math.floor(rand() * partitions);
      if (next[p]! >= log[p]!.length) continue;
      const size = 1 + Math.floor(rand() * 4);
      const batch = log[p]!.slice(next[p], next[p]! + size).map((r) => ({ key: 'k', ...r }));
      const before = partials[p]!.value ?? { through: -1n, state: fold.empty() };
      const replays = rand() < 0.2 ? 2 : 1;
      for (let i = 0; i < replays; i++) {
        const out = (await applyBatch(fold, p, batch, async () => partials[p]!.value ?? before)).get('k')!;
        partials[p]!.write(out.partial.through, out.partial);
        merge();
      }
      history[p]!.push({ before, batch });
      next[p]! += size;
      // A zombie: an earlier batch of some partition written again from the partial it started from, and merged.
      if (rand() < 0.2) {
        const z = Math.floor(rand() * partitions);
        const old = history[z]![Math.floor(rand() * history[z]!.length)];
        if (old !== undefined) {
          const out = (await applyBatch(fold, z, old.batch, async () => old.before)).get('k')!;
          partials[z]!.write(out.partial.through, out.partial);
          merge();
        }
      }
      // Land some merges now, in random order; the rest later.
      while (inFlight.length > 0 && rand() < 0.5) land(inFlight.splice(Math.floor(rand() * inFlight.length), 1)[0]!);
    }
    while (inFlight.length > 0) land(inFlight.splice(Math.floor(rand() * inFlight.length), 1)[0]!);

    const truth = log.reduce((s, l) => l.reduce((x, r) => fold.add(x, r.value, { partition: 0, offset: r.offset }), s), fold.empty());
    assert.deepEqual({ count: row.count.value, sum: row.sum.value, max: row.max.value }, truth, `seed ${seed}: the row is the merge of every record`);
    assert.deepEqual(
      partials.map((c) => c.value!.through),
      log.map((l) => l[l.length - 1]!.offset),
      `seed ${seed}: each partial reaches its partition's last record`,
    );
    for (let i = 1; i < landed.length; i++) assert.ok(landed[i]! >= landed[i - 1]!, `seed ${seed}: the row's timestamp never goes back`);
  }
});
