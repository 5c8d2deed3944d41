// The aggregate audit's judgement of partials against the log (src/verify/aggregate-audit.ts), on
// tables given as rows (the reads answered from memory; test/integration/sink-aggregate*.test.ts run it
// against Cassandra): every violation by its exact message, what a batch in flight wrote left unjudged,
// and memory that does not grow with the records (it once held every contributing record).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { Client, Row } from '../../src/cassandra/session.js';
import type { AggregateAudit as Described } from '../../src/engine/job-audit.js';
import { AggregateAudit } from '../../src/verify/aggregate-audit.js';
import { ViolationLog } from '../../src/verify/report.js';

/** A count and a sum per slot; a record's value is its number, and its slot is `s<value % slots>`. */
const described: Described = {
  partialsTable: 'totals_partials',
  resultColumns: ['slot', 'n', 'sum'],
  partialColumns: ['slot', 'partition', 'through', 'n', 'sum'],
  fold: {
    empty: () => ({ n: 0, sum: 0 }),
    add: (s, v) => {
      const st = s as { n: number; sum: number };
      st.n++;
      st.sum += v as number;
      return st;
    },
    merge: (a, b) => ({ n: (a as { n: number }).n + (b as { n: number }).n, sum: (a as { sum: number }).sum + (b as { sum: number }).sum }),
  },
  partial: (row: Row) => ({ slot: row['slot'] as string, partition: row['partition'] as number, through: BigInt(row['through'] as number), state: { n: row['n'], sum: row['sum'] } }),
  result: (row: Row) => ({ slot: row['slot'] as string, values: { n: String(row['n']), sum: String(row['sum']) } }),
  resultValues: (s) => ({ n: String((s as { n: number }).n), sum: String((s as { sum: number }).sum) }),
  stateText: (s) => JSON.stringify(s),
  timedColumn: 'n',
};

interface PartialRow {
  slot: string;
  partition: number;
  through: number;
  n: number;
  sum: number;
}

/** Answers the audit's two reads: the partials table and the result table (each row with its merge timestamp). */
function tables(partials: PartialRow[], results: Array<{ slot: string; n: number; sum: number; merged_at: bigint }>): Client {
  return {
    execute: async (query: string) => {
      const rows = query.includes('totals_partials') ? partials.map((p) => ({ ...p })) : results.map((r) => ({ ...r, merged_at: { toString: () => String(r.merged_at), low: Number(r.merged_at), high: 0 } }));
      return { rows, pageState: null };
    },
  } as unknown as Client;
}

function audit(session: Client, ends: Record<number, number>, highs: Record<number, number>, logEndsNow: Record<number, number> = highs) {
  const violations = new ViolationLog();
  const counts: string[] = [];
  let ahead = 0;
  const a = new AggregateAudit({
    connection: {} as never,
    session,
    keyspace: 'ks',
    table: 'totals',
    described,
    violations,
    unattributed: { missing: 0, extra: 0, mismatched: 0 },
    ends: new Map(Object.entries(ends).map(([p, e]) => [Number(p), BigInt(e)])),
    highs: new Map(Object.entries(highs).map(([p, e]) => [Number(p), BigInt(e)])),
    logEnds: async () => new Map(Object.entries(logEndsNow).map(([p, e]) => [Number(p), BigInt(e)])),
    aheadOfCheckpoint: () => void ahead++,
    count: (p, kind) => void counts.push(`${p}:${kind}`),
  });
  return { a, violations, counts, ahead: () => ahead };
}

/** Records offset 0..n-1 of a partition, value = offset, slot s<offset % 2>. */
const addAll = (a: AggregateAudit, partition: number, n: number) => {
  for (let o = 0; o < n; o++) a.add(partition, BigInt(o), [`s${o % 2}`], o);
};

test('partials that are the fold of their records up to their offset, and rows that are their merge: no violation', async () => {
  // Partition 0: offsets 0..9 (s0: 0,2,4,6,8; s1: 1,3,5,7,9); partition 1: 0..3.
  const partials = [
    { slot: 's0', partition: 0, through: 8, n: 5, sum: 20 },
    { slot: 's1', partition: 0, through: 9, n: 5, sum: 25 },
    { slot: 's0', partition: 1, through: 2, n: 2, sum: 2 },
    { slot: 's1', partition: 1, through: 3, n: 2, sum: 4 },
  ];
  const results = [
    { slot: 's0', n: 7, sum: 22, merged_at: 9n + 3n },
    { slot: 's1', n: 7, sum: 29, merged_at: 10n + 4n },
  ];
  const { a, violations, counts } = audit(tables(partials, results), { 0: 10, 1: 4 }, { 0: 10, 1: 4 });
  await a.prepare();
  addAll(a, 0, 10);
  addAll(a, 1, 4);
  await a.judge();
  assert.deepEqual(violations.kept, []);
  assert.deepEqual(counts, []);
});

test('a record below the checkpoint left out, a wrong state, a partial without records and records without a partial: each named exactly', async () => {
  const partials = [
    { slot: 's0', partition: 0, through: 4, n: 3, sum: 6 }, // leaves out 6 and 8 (below the checkpoint 10)
    { slot: 's1', partition: 0, through: 9, n: 5, sum: 26 }, // the records give 25
    { slot: 's9', partition: 0, through: 5, n: 1, sum: 9 }, // no record falls in s9
    // s0 and s1 of partition 1 have no partial, though their records are below its checkpoint
  ];
  const { a, violations, counts } = audit(tables(partials, []), { 0: 10, 1: 3 }, { 0: 10, 1: 3 });
  await a.prepare();
  addAll(a, 0, 10);
  addAll(a, 1, 3);
  await a.judge();
  assert.deepEqual(
    violations.kept.filter((v) => v.message.startsWith('partition')).map((v) => [v.kind, v.partition, v.offset, v.message]),
    [
      ['missing', 0, '6', 'partition 0: the partial of s0 includes records up to offset 4, below the checkpoint 10: the record at offset 6 is not included'],
      ['missing', 1, '0', 'partition 1: no partial of s0 in totals_partials, though 2 record(s) of it are below the checkpoint 3 (the first at offset 0)'],
      ['mismatch', 0, '9', 'partition 0: the partial of s1 through offset 9 holds {"n":5,"sum":26}, its records give {"n":5,"sum":25}'],
      ['missing', 1, '1', 'partition 1: no partial of s1 in totals_partials, though 1 record(s) of it are below the checkpoint 3 (the first at offset 1)'],
      ['extra', 0, '5', 'partition 0: a partial of s9 in totals_partials (through offset 5), though no record of the partition falls in it'],
    ],
  );
  // The proof of partition 0 stops at the first record left out.
  assert.equal(violations.provedTo(0, 10n), 5n);
  assert.deepEqual(counts.slice(0, 5), ['0:missing', '1:missing', '0:mismatched', '1:missing', '0:extra']);
});

test('records beyond the checkpoint may be in a partial (a batch in flight); a partial past the log end the audit read to is not judged, unless it is past the log end now', async () => {
  const partials = [
    { slot: 's0', partition: 0, through: 8, n: 5, sum: 20 }, // checkpoint 6: 6 and 8 in flight, included
    { slot: 's1', partition: 0, through: 13, n: 7, sum: 49 }, // beyond the log end 10 the audit read to: records 11 and 13 unseen
    { slot: 's2', partition: 0, through: 12, n: 1, sum: 12 }, // a slot only records beyond the log end fall in
    { slot: 's3', partition: 0, through: 50, n: 1, sum: 1 }, // beyond the log end now (14): no such record
  ];
  const { a, violations, ahead } = audit(tables(partials, []), { 0: 6 }, { 0: 10 }, { 0: 14 });
  await a.prepare();
  addAll(a, 0, 10);
  await a.judge();
  assert.deepEqual(
    violations.kept.filter((v) => v.message.startsWith('partition')).map((v) => [v.kind, v.partition, v.offset, v.message]),
    [['mismatch', 0, '50', 'partition 0: the partial of s3 in totals_partials is through offset 50, beyond the log end 14: no record there']],
  );
  assert.equal(ahead(), 2);
});

test('memory does not grow with the records: 1,000,000 records of 4 slots', async () => {
  const partials = [0, 1, 2, 3].map((i) => ({ slot: `s${i}`, partition: 0, through: 1_000_000, n: 0, sum: 0 }));
  const { a } = audit(tables(partials, []), { 0: 1_000_000 }, { 0: 1_000_001 });
  await a.prepare();
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  const before = v8.getHeapStatistics().used_heap_size;
  for (let o = 0; o < 1_000_000; o++) a.add(0, BigInt(o), [`s${o % 4}`], o);
  gc();
  const grown = v8.getHeapStatistics().used_heap_size - before;
  // Every record held (an offset and a value in an object of a list) would be over 40 MB.
  assert.ok(grown < 8 * 2 ** 20, `the heap grew by ${(grown / 2 ** 20).toFixed(1)} MiB`);
  await a.judge();
});
