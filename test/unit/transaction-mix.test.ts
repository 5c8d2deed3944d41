// `chaos --transactional`'s generator policy (src/harness/transaction-mix.ts) over a fake producer: which
// transactions are committed and aborted, and what is counted as produced.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { OutgoingRecord, TransactionOutcome } from '../../src/kafka/producer.js';
import { TransactionMix } from '../../src/harness/transaction-mix.js';

const records = (n: number): OutgoingRecord[] => Array.from({ length: n }, (_, i) => ({ key: null, value: String(i) }));

test('two of every three transactions committed, the 2nd of each three and the last aborted; only committed records count as produced', async () => {
  const asked: string[] = [];
  // The 4th transaction's commit is cut short by a crash (outcome unknown).
  const producer = {
    write: async (_t: string, rs: readonly OutgoingRecord[], commit: boolean): Promise<TransactionOutcome> => {
      asked.push(`${rs.length}:${commit ? 'commit' : 'abort'}`);
      return !commit ? 'aborted' : asked.length === 4 ? 'unknown' : 'committed';
    },
  };
  const mix = new TransactionMix(producer);
  for (const n of [10, 20, 30, 40, 50, 60, 70]) await mix.send('t', records(n));
  await mix.endAborted('t', records(5));
  assert.deepEqual(asked, ['10:commit', '20:abort', '30:commit', '40:commit', '50:abort', '60:commit', '70:commit', '5:abort']);
  assert.deepEqual(mix.transactions, { committed: 4, aborted: 3, unknown: 1 });
  assert.equal(mix.committedRecords, 10 + 30 + 60 + 70);
  assert.equal(mix.uncertainRecords, 40);
});
