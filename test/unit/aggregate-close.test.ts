// closeAfter (src/jobs/sink/aggregate-close.ts) against a model of Cassandra (cell by cell, the highest
// write timestamp wins, a range delete shadows what was written at or below its timestamp) and of a
// topic (the latest message per key is the last to land). Three partitions' workers run at once, every
// statement and publish lands after a random delay, merges read partials and land late, batches are
// replayed after a crash and by a zombie (the previous owner writing, in order, the batches it had read
// from where the current owner resumed, possibly ahead of it) — over 1,000 seeded schedules. At the end: a window that a
// contributing partition closed has a message; one that every contributing partition closed has its
// latest message equal to its row; one that none closed has none.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { types } from 'cassandra-driver';
import { toLong } from '../../src/cassandra/session.js';
import { closeAt, WindowCloser, type Statements, type WindowSlot } from '../../src/jobs/sink/aggregate-close.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { keyText } from '../../src/jobs/sink/record-key.js';
import { prng } from '../../src/prng.js';

const MIN = 60_000;
const config = sinkConfig({
  topic: 't',
  table: 't',
  mode: 'aggregate',
  groupBy: ['customer'],
  window: { time: 'at', size: '1m' },
  closeAfter: '30s',
  columns: { customer: 'text', at: 'timestamp' },
  aggregates: { orders: 'count' },
});
const spec = config.aggregate!;

interface Rec { offset: bigint; customer: string; at: number }
const slotOf = (r: Rec): WindowSlot => {
  const start = Math.floor(r.at / MIN) * MIN;
  const key = [r.customer, new Date(start)];
  return { key, text: keyText(key), windowStart: start };
};
const result = (rows: Array<Record<string, unknown>>) => ({ rows, first: () => rows[0] ?? null }) as unknown as types.ResultSet;

/** Cassandra as the closer uses it, with every statement applied after a random delay. */
class Store implements Statements {
  entries = new Map<string, { partition: number; closeAt: number; customer: string; start: number; at: bigint }>();
  tombstones: Array<{ partition: number; upTo: number; at: bigint }> = [];
  marks = new Map<number, { watermark: number; at: bigint }>();
  /** The result rows: orders, written at a merge timestamp. */
  rows = new Map<string, { orders: bigint; at: bigint }>();
  constructor(private readonly rand: () => number) {}

  async later(): Promise<void> {
    for (let n = Math.floor(this.rand() * 4); n > 0; n--) await new Promise((r) => setImmediate(r));
  }

  visible(e: { partition: number; closeAt: number; at: bigint }): boolean {
    return !this.tombstones.some((t) => t.partition === e.partition && e.closeAt <= t.upTo && t.at >= e.at);
  }

  async execute(cql: string, p: unknown[]): Promise<types.ResultSet> {
    await this.later();
    const n = (v: unknown) => BigInt(String(v));
    if (cql.startsWith('SELECT watermark')) {
      const m = this.marks.get(p[0] as number);
      return result(m === undefined ? [] : [{ watermark: new Date(m.watermark) }]);
    }
    if (cql.startsWith('INSERT') && cql.includes('close_at')) {
      const [partition, close, customer, start, at] = p as [number, Date, string, Date, types.Long];
      const k = `${partition}|${customer}|${start.getTime()}`;
      const had = this.entries.get(k);
      if (had === undefined || n(at) >= had.at) this.entries.set(k, { partition, closeAt: close.getTime(), customer, start: start.getTime(), at: n(at) });
      return result([]);
    }
    if (cql.startsWith('SELECT customer, window_start FROM')) {
      const [partition, upTo] = p as [number, Date];
      return result([...this.entries.values()].filter((e) => e.partition === partition && e.closeAt <= upTo.getTime() && this.visible(e)).map((e) => ({ customer: e.customer, window_start: new Date(e.start) })));
    }
    if (cql.startsWith('DELETE')) {
      const [at, partition, upTo] = p as [types.Long, number, Date];
      this.tombstones.push({ partition, upTo: upTo.getTime(), at: n(at) });
      return result([]);
    }
    if (cql.startsWith('INSERT') && cql.includes('watermark')) {
      const [partition, w, , at] = p as [number, Date, unknown, types.Long];
      const had = this.marks.get(partition);
      if (had === undefined || n(at) > had.at || (n(at) === had.at && w.getTime() > had.watermark)) this.marks.set(partition, { watermark: w.getTime(), at: n(at) });
      return result([]);
    }
    if (cql.startsWith('SELECT window_start, window_end')) {
      const [customer, start] = p as [string, Date];
      const row = this.rows.get(keyText([customer, start]));
      return result(row === undefined ? [] : [{ window_start: start, window_end: new Date(start.getTime() + MIN), orders: toLong(row.orders), merged_at: toLong(row.at) }]);
    }
    throw new Error(`unexpected CQL: ${cql}`);
  }
}

for (const seed of Array.from({ length: 1000 }, (_, i) => 9000 + i)) {
  test(`seed ${seed}`, { concurrency: false }, async () => {
    const rand = prng(seed);
    const store = new Store(rand);
    const topic = new Map<string, string>();
    const publish = async (_: string, records: ReadonlyArray<{ key: string | Buffer | null; value: string | Buffer | null }>) => {
      await store.later();
      for (const r of records) topic.set(String(r.key), String(r.value));
    };
    // Each partition's records: times mostly rising, some late by up to three minutes.
    const partitions = [0, 1, 2].map((p) => {
      let max = 0;
      const recs: Rec[] = Array.from({ length: 6 + Math.floor(rand() * 14) }, (_, i) => {
        const at = Math.max(0, rand() < 0.25 ? max - Math.floor(rand() * 3 * MIN) : max + Math.floor(rand() * 40_000));
        max = Math.max(max, at);
        return { offset: BigInt(i), customer: 'abc'[Math.floor(rand() * 3)]!, at };
      });
      const batches: Rec[][] = [];
      for (let i = 0; i < recs.length; ) {
        const size = 1 + Math.floor(rand() * 4);
        batches.push(recs.slice(i, i + size));
        i += size;
      }
      return { p, recs, batches };
    });
    // The partials: per partition and window, the count through an offset (the highest through wins).
    const partials = new Map<string, Map<number, { through: bigint; count: bigint }>>();
    const writePartial = (p: number, slot: string, through: bigint, count: bigint) => {
      const byP = partials.get(slot) ?? new Map<number, { through: bigint; count: bigint }>();
      partials.set(slot, byP);
      if ((byP.get(p)?.through ?? -1n) < through) byP.set(p, { through, count });
    };
    /** One batch as the sink runs it: partials, merges (reading partials, landing later), then the closer. */
    const runBatch = async (closer: WindowCloser, part: (typeof partitions)[number], batch: Rec[]) => {
      const first = batch[0]!.offset;
      const last = batch[batch.length - 1]!.offset;
      const before = await closer.before(part.p, first);
      let after = before;
      const slots = new Map<string, WindowSlot>();
      for (const r of batch) {
        after = Math.max(after, r.at);
        const s = slotOf(r);
        slots.set(s.text, s);
      }
      for (const s of slots.values()) {
        await store.later();
        writePartial(part.p, s.text, last, BigInt(part.recs.filter((r) => r.offset <= last && slotOf(r).text === s.text).length));
      }
      await Promise.all(
        [...slots.values()].map(async (s) => {
          await store.later();
          const read = [...(partials.get(s.text)?.values() ?? [])];
          const orders = read.reduce((n, x) => n + x.count, 0n);
          const at = read.reduce((n, x) => n + x.through + 1n, 0n);
          await store.later();
          const had = store.rows.get(s.text);
          if (had === undefined || at > had.at || (at === had.at && orders > had.orders)) store.rows.set(s.text, { orders, at });
        }),
      );
      await closer.close(part.p, last, before, after, slots.values());
    };
    /** Per partition, the batches its current owner has written. */
    const done = partitions.map(() => 0);
    const worker = async (part: (typeof partitions)[number]) => {
      const closer = new WindowCloser(config, 'ks', store, publish);
      for (let i = 0; i < part.batches.length; i++) {
        await runBatch(closer, part, part.batches[i]!);
        // A crash after the batch's writes, before its checkpoint: a new owner replays it from the store.
        if (rand() < 0.15) await runBatch(new WindowCloser(config, 'ks', store, publish), part, part.batches[i]!);
        done[part.p] = i + 1;
      }
    };
    // A zombie: the partition's previous owner, which had read on from where the current owner resumed
    // (at most where it is now) and writes those batches, in order, while the current owner goes on.
    const zombie = async () => {
      const part = partitions[Math.floor(rand() * 3)]!;
      const wait = Math.floor(rand() * part.batches.length);
      while (done[part.p]! < wait) await new Promise((r) => setImmediate(r));
      const closer = new WindowCloser(config, 'ks', store, publish);
      const from = Math.floor(rand() * (done[part.p]! + 1));
      for (let i = from; i < Math.min(part.batches.length, from + 1 + Math.floor(rand() * 4)); i++) await runBatch(closer, part, part.batches[i]!);
    };
    await Promise.all([...partitions.map(worker), zombie()]);

    const watermark = new Map(partitions.map((x) => [x.p, Math.max(...x.recs.map((r) => r.at))]));
    const windows = new Map<string, { slot: WindowSlot; by: Set<number> }>();
    for (const x of partitions) for (const r of x.recs) {
      const s = slotOf(r);
      const w = windows.get(s.text) ?? { slot: s, by: new Set<number>() };
      w.by.add(x.p);
      windows.set(s.text, w);
    }
    for (const [text, { slot, by }] of windows) {
      const closedBy = [...by].filter((p) => watermark.get(p)! >= closeAt(spec, slot.windowStart!));
      const latest = topic.get(text);
      if (closedBy.length === 0) {
        assert.equal(latest, undefined, `window ${text}: no partition closed it, yet it was published`);
        continue;
      }
      assert.notEqual(latest, undefined, `window ${text}: closed by partition ${closedBy.join(', ')}, never published`);
      if (closedBy.length === by.size) {
        const row = store.rows.get(text)!;
        assert.equal((JSON.parse(latest!) as { orders: string }).orders, String(row.orders), `window ${text}: the latest message is the row`);
        const all = partitions.reduce((n, x) => n + x.recs.filter((r) => slotOf(r).text === text).length, 0);
        assert.equal(String(row.orders), String(all), `window ${text}: the row counts every record`);
      }
    }
  });
}
