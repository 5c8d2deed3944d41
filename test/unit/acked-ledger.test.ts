// The chaos harness's per-partition account of acknowledged records: it names the acknowledged offsets a
// log lacks (Kafka's loss) and tells them from a count that merely differs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AckedLedger } from '../../src/harness/acked-ledger.js';

test('every acknowledged record held: nothing to say', () => {
  const l = new AckedLedger();
  for (let o = 0n; o < 5n; o++) l.add(5, o);
  l.add(1, 0n);
  assert.equal(l.total, 6);
  assert.deepEqual(l.compare(new Map([[5, { records: 5, end: 5n }], [1, { records: 1, end: 1n }]])), []);
});

test('acknowledged offsets beyond the log end are named as lost by Kafka', () => {
  const l = new AckedLedger();
  for (let o = 0n; o < 8017n; o++) l.add(5, o);
  assert.deepEqual(l.compare(new Map([[5, { records: 8015, end: 8015n }]])), [
    'partition 5: 8017 records acknowledged, the log holds 8015 (log end 8015); acknowledged at offsets 8015, 8016, beyond the log end: lost by Kafka',
  ]);
});

test('a record reported twice, or a log holding what was not acknowledged, is a count that differs', () => {
  const l = new AckedLedger();
  l.add(0, 0n);
  l.add(0, 0n);
  l.add(0, 1n);
  assert.deepEqual(l.compare(new Map([[0, { records: 3, end: 3n }]])), [
    'partition 0: 3 records acknowledged (1 offsets acknowledged twice), the log holds 3 (log end 3); every acknowledged offset is below the log end',
  ]);
});
