import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CheckpointWatch, isDrained, waitDrained } from '../../src/harness/drain.js';

const marks = [
  { partition: 0, low: 0n, high: 10n, stable: 10n },
  { partition: 1, low: 5n, high: 5n, stable: 5n },
  { partition: 2, low: 3n, high: 8n, stable: 8n },
];

test('drained: every checkpoint at its log end; an empty log needs no checkpoint', () => {
  assert.equal(isDrained(marks, new Map([[0, 10n], [2, 8n]])), true);
  assert.equal(isDrained(marks, new Map([[0, 10n], [1, 5n], [2, 8n]])), true);
  assert.equal(isDrained(marks, new Map([[0, 9n], [2, 8n]])), false);
  assert.equal(isDrained(marks, new Map([[0, 10n]])), false, 'partition 2 has records and no checkpoint');
  assert.equal(isDrained([], new Map()), true);
});

test('waitDrained polls until drained, through failing reads, and returns the log ends', async () => {
  const cps = [new Map([[0, 3n]]), 'fail', new Map([[0, 10n], [2, 7n]]), new Map([[0, 10n], [2, 8n]])] as const;
  let reads = 0;
  const r = await waitDrained(
    async () => marks,
    async () => {
      const c = cps[Math.min(reads++, cps.length - 1)]!;
      if (c === 'fail') throw new Error('Cassandra restarting');
      return c;
    },
    { intervalMs: 1, timeoutMs: 5000 },
  );
  assert.deepEqual(r, marks);
  assert.equal(reads, 4);
});

test('waitDrained gives up at the deadline, and at once when aborted', async () => {
  const never = async () => new Map<number, bigint>();
  assert.equal(await waitDrained(async () => marks, never, { intervalMs: 5, timeoutMs: 30 }), undefined);
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 20);
  const started = Date.now();
  assert.equal(await waitDrained(async () => marks, never, { intervalMs: 10_000, signal: abort.signal }), undefined);
  assert.ok(Date.now() - started < 1000);
});

/**
 * A watch over the polls `seq` (the last one repeated), stopped once every poll was made; Cassandra
 * counts as SIGKILLed before the poll numbered `crashBefore`.
 */
async function watchOver<T extends bigint | { next: bigint; epoch: number }>(seq: ReadonlyArray<Map<number, T>>, crashBefore?: number): Promise<CheckpointWatch> {
  let i = 0;
  let done!: () => void;
  const seen = new Promise<void>((r) => (done = r));
  let watch!: CheckpointWatch;
  watch = new CheckpointWatch(async () => {
    if (i === crashBefore) watch.storeCrashed();
    if (i === seq.length) done();
    return seq[Math.min(i++, seq.length - 1)]!;
  }, 1);
  await seen;
  await watch.stop();
  return watch;
}

test('the checkpoint watch records every move backwards and keeps the highest', async () => {
  const seq = [new Map([[0, 5n]]), new Map([[0, 7n], [1, 2n]]), new Map([[0, 6n], [1, 1n]]), new Map([[0, 8n], [1, 2n]])];
  const watch = await watchOver(seq);
  await watch.stop();
  assert.deepEqual(watch.regressions, ['partition 0: checkpoint 7 -> 6', 'partition 1: checkpoint 2 -> 1']);
  assert.deepEqual([...watch.highest], [[0, 8n], [1, 2n]]);
  assert.ok(watch.polls >= seq.length);
});

test('drained on a transactional topic: at the last stable offset, past aborted records and markers; not waiting for a transaction still open', () => {
  // Partition 0: the log ends with an aborted transaction and its marker (stable = high = 735).
  // Partition 1: a transaction open from 700 on holds back 700..719 (stable 700, high 720).
  const txn = [
    { partition: 0, low: 0n, high: 735n, stable: 735n },
    { partition: 1, low: 0n, high: 720n, stable: 700n },
  ];
  assert.equal(isDrained(txn, new Map([[0, 699n], [1, 700n]])), false, 'the aborted tail of partition 0 is not stepped over yet');
  assert.equal(isDrained(txn, new Map([[0, 735n], [1, 700n]])), true);
  assert.equal(isDrained(txn, new Map([[0, 735n], [1, 699n]])), false);
});

test('a move backwards across a Cassandra crash is a loss (acknowledged writes the store forgot), not a regression', async () => {
  // Polls: 7, then Cassandra is SIGKILLed, then 5 (lost), then 9, then 8 with no crash since (a regression).
  const seq = [new Map([[0, 7n]]), new Map([[0, 5n]]), new Map([[0, 9n]]), new Map([[0, 8n]])];
  const watch = await watchOver(seq, 1);
  assert.deepEqual(watch.losses, ['partition 0: checkpoint 7 -> 5']);
  // (The last value is polled again until the watch stops: each poll below the highest counts.)
  assert.deepEqual([...new Set(watch.regressions)], ['partition 0: checkpoint 9 -> 8']);
});

test('read with epochs: a move back into a higher epoch is a rewind (a reset, a worker reading again), not a regression; a lower epoch or offset in the same one is', async () => {
  const seq = [
    new Map([[0, { next: 7n, epoch: 0 }]]),
    new Map([[0, { next: 3n, epoch: 1 }]]),
    new Map([[0, { next: 9n, epoch: 1 }]]),
    new Map([[0, { next: 8n, epoch: 1 }]]),
  ];
  const watch = await watchOver(seq);
  assert.deepEqual(watch.rewinds, ['partition 0: checkpoint 7 -> 3 (epoch 0 -> 1)']);
  assert.deepEqual([...new Set(watch.regressions)], ['partition 0: checkpoint 9 -> 8']);
  assert.deepEqual(watch.losses, []);
});

test('a loss is recorded with its partition, where to, and when the crash before it was', async () => {
  const seq = [new Map([[2, { next: 7n, epoch: 0 }]]), new Map([[2, { next: 5n, epoch: 0 }]])];
  const before = Date.now();
  const watch = await watchOver(seq, 1);
  assert.deepEqual(watch.losses, ['partition 2: checkpoint 7 -> 5']);
  assert.deepEqual(watch.lossDetails.map((l) => [l.partition, l.to]), [[2, 5n]]);
  assert.ok(watch.lossDetails[0]!.crashAt >= before && watch.lossDetails[0]!.crashAt <= Date.now());
});
