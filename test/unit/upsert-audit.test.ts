/**
 * The upsert audit's reduction of a key's records to the row it must find (src/verify/upsert-audit.ts),
 * for what the integration tests reach only rarely: a tie of versions among records that leave cells
 * unset (columns added to a versioned sink by `schema apply --job`). The table's row is handed over by
 * a stand-in for the point read; the reduction and judgeKey are the real ones.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Client } from '../../src/cassandra/session.js';
import type { Violation } from '../../src/verify/report.js';
import { UpsertAudit, type UpsertContext } from '../../src/verify/upsert-audit.js';

type Row = Record<string, unknown>;

/** Judges key {id: 1} whose records are `records` (partition 0, offsets 0..) against `row` (null: none). */
async function judge(records: Array<{ row?: Row; del?: true; unset?: string[]; version: number }>, row: Row | null): Promise<string[]> {
  const violations: Violation[] = [];
  const session = { execute: async () => ({ first: () => row, rows: row === null ? [] : [row] }) } as unknown as Client;
  const ctx: UpsertContext = {
    session,
    keyspace: 'ks',
    table: 't',
    keyColumns: ['id'],
    valueColumns: ['a', 'b'],
    writeTimestamp: undefined,
    counts: () => ({ missing: 0, extra: 0, mismatched: 0, aheadOfCheckpoint: 0, skipped: {} }) as never,
    violations: { add: (v: Violation) => void violations.push(v) } as never,
    unattributed: { missing: 0, extra: 0, mismatched: 0 },
    memoryBytes: 1 << 20,
  };
  const audit = new UpsertAudit(ctx);
  try {
    let offset = 0n;
    for (const r of records) {
      const key = { id: 1 };
      const e = r.del === true ? { kind: 'delete' as const, key, version: r.version } : { kind: 'row' as const, key, row: { a: null, b: null, ...r.row }, version: r.version, ...(r.unset ? { unset: r.unset } : {}) };
      await audit.add(0, offset++, e, false);
    }
    await audit.judgeTouched();
  } finally {
    await audit.close();
  }
  return violations.map((v) => v.message);
}

/** A table row as read: the key, the values, and each value's write time (the version). */
const stored = (a: unknown, b: unknown, wt: number): Row => ({ id: 1, a, b, wt0: a === null ? null : wt, wt1: b === null ? null : wt });

test('a tied record that leaves a cell unset: the cell keeps what the records before it wrote', async () => {
  // Version 5 writes a and b; a second record at version 5 (an older schema: b unset) writes a only.
  const records = [{ row: { a: 'x', b: 'kept' }, version: 5 }, { row: { a: 'y' }, unset: ['b'], version: 5 }];
  // Cassandra keeps the greater a of the tie and b from the only record that wrote it.
  assert.deepEqual(await judge(records, stored('y', 'kept', 5)), []);
  assert.deepEqual(await judge(records, stored('x', 'kept', 5)), []);
  // A b no record wrote is caught.
  assert.deepEqual(await judge(records, stored('y', 'forged', 5)), ['t key {"id":1}: b is "forged", its last record (partition 0 offset 1) says "kept"']);
});

test('a tie whose first record leaves the cell unset takes it from the version before', async () => {
  const records = [{ row: { a: 'old', b: 'older' }, version: 3 }, { row: { a: 'x' }, unset: ['b'], version: 5 }, { row: { a: 'y', b: 'new' }, version: 5 }];
  // b: the version-5 record that wrote it (timestamp 5) shadows version 3's.
  assert.deepEqual(await judge(records, { id: 1, a: 'x', b: 'new', wt0: 5, wt1: 5 }), []);
  assert.deepEqual(await judge(records, { id: 1, a: 'x', b: 'older', wt0: 5, wt1: 3 }), ['t key {"id":1}: b is "older", its last record (partition 0 offset 2) says "new"']);
});

test('a delete wins a tie, whichever comes first', async () => {
  const late = [{ row: { a: 'x', b: 'y' }, version: 7 }, { del: true as const, version: 7 }];
  const early = [{ del: true as const, version: 7 }, { row: { a: 'x', b: 'y' }, version: 7 }];
  for (const records of [late, early]) {
    assert.deepEqual(await judge(records, null), []);
    assert.equal((await judge(records, stored('x', 'y', 7))).length, 1);
  }
});

test('a tie at a lower version, under a record that leaves the cell unset: the cell may hold either tied value', async () => {
  // Versions 3 and 3 write b (a tie Cassandra settles by the greater, 'q'); version 5 leaves b unset.
  const records = [{ row: { a: 'x', b: 'q' }, version: 3 }, { row: { a: 'y', b: 'p' }, version: 3 }, { row: { a: 'z' }, unset: ['b'], version: 5 }];
  assert.deepEqual(await judge(records, { id: 1, a: 'z', b: 'q', wt0: 5, wt1: 3 }), []);
  assert.deepEqual(await judge(records, { id: 1, a: 'z', b: 'p', wt0: 5, wt1: 3 }), []);
  assert.deepEqual(await judge(records, { id: 1, a: 'z', b: 'r', wt0: 5, wt1: 3 }), ['t key {"id":1}: b is "r", its last record (partition 0 offset 2) says "p"']);
});

test("a versioned row's write time is the highest version that wrote one of its values: a top record of nulls and unset cells leaves an older one", async () => {
  const records = [{ row: { a: 'x', b: 'y' }, version: 3 }, { row: { a: null }, unset: ['b'], version: 5 }];
  assert.deepEqual(await judge(records, { id: 1, a: null, b: 'y', wt0: null, wt1: 3 }), []);
  // Written above by another writer: caught.
  assert.deepEqual(await judge(records, { id: 1, a: null, b: 'y', wt0: null, wt1: 9 }), ['t key {"id":1}: written at timestamp 9, not 3 (the highest version that wrote a value of it): another writer touched the table']);
});
