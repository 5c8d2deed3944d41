// The TailSkipper (src/engine/tail-skipper.ts) over the fake engine: which partitions it reads the end
// of the log for, and when a checkpoint steps over aborted records and transaction markers. The real
// read (a read_committed LogReader) is exercised against Kafka by test/integration/transactions.test.ts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TailSkipper, type RangeReader } from '../../src/engine/tail-skipper.js';
import { ExactlyOnceError } from '../../src/errors.js';
import type { Watermarks } from '../../src/kafka/admin.js';
import { fakeEngine, rec, twoPartitions } from './engine-fakes.js';

/** A reader answering from `firsts` (partition → its one readable offset, null: none), logging each question. */
function fakeReader(firsts: Map<number, bigint | null>, asked: string[], fail?: Error) {
  let opened = 0;
  let closed = 0;
  const open = async (): Promise<RangeReader> => {
    opened++;
    if (fail !== undefined) throw fail;
    return {
      firstOffset: async (_t, p, from, until) => {
        asked.push(`${p}:[${from},${until})`);
        const first = firsts.get(p) ?? null;
        return first !== null && first >= from && first < until ? first : null;
      },
      close: async () => void closed++,
    };
  };
  return { open, counts: () => ({ opened, closed }) };
}

const marks = (stable: readonly [bigint, bigint], high: readonly [bigint, bigint] = stable, low = 0n): Watermarks[] =>
  [0, 1].map((p) => ({ partition: p, low, high: high[p]!, stable: stable[p]! }));

async function setUp(firsts: Map<number, bigint | null>, o: { fail?: Error; low?: bigint } = {}) {
  const e = fakeEngine(twoPartitions([5n, 8n], [10n, 10n]));
  await e.tasks.assign([0, 1]);
  const asked: string[] = [];
  const reader = fakeReader(firsts, asked, o.fail);
  const skipper = new TailSkipper({
    topic: 't',
    tasks: () => e.tasks.tasks,
    openReader: reader.open,
    logStarts: async () => new Map([[0, o.low ?? 0n], [1, o.low ?? 0n]]),
    log: e.log,
  });
  /** One refresh, and the round it started. */
  const refresh = (m: Watermarks[]) => skipper.check(m);
  return { ...e, asked, reader, skipper, refresh };
}

test('an idle partition below the stable offset whose range holds no record steps to it; one holding a record does not', async () => {
  // Partition 0: 5..9 are an aborted transaction and its marker. Partition 1: 8 is a record not yet delivered.
  const s = await setUp(new Map([[0, null], [1, 8n]]));
  await s.refresh(marks([10n, 10n]));
  assert.deepEqual(s.asked, [], 'the first refresh only notes where each partition stands');
  await s.refresh(marks([10n, 10n]));
  assert.deepEqual(s.asked, ['0:[5,10)', '1:[8,10)']);
  assert.deepEqual(s.world.events, ['checkpoint 0:10@0']);
  assert.equal(s.tasks.tasks.get(0)!.status.next, 10n);
  assert.deepEqual(s.reader.counts(), { opened: 1, closed: 1 });
  // Partition 1 held a record from 8: not asked again while its checkpoint stays there; partition 0 is at the stable offset.
  await s.refresh(marks([10n, 10n]));
  assert.deepEqual(s.asked, ['0:[5,10)', '1:[8,10)']);
  // The record arrives and is stored; then 9 (its commit marker) is left: asked once the partition is idle again.
  await s.tasks.process(1, [rec(8n, 'ok', 1)]);
  await s.tasks.tasks.get(1)!.flush();
  await s.refresh(marks([10n, 10n]));
  await s.refresh(marks([10n, 10n]));
  assert.deepEqual(s.asked, ['0:[5,10)', '1:[8,10)', '1:[9,10)']);
  assert.equal(s.tasks.tasks.get(1)!.status.next, 10n);
});

test('a partition that moved since the last refresh, is at the stable offset, or waits on an open transaction is not read', async () => {
  const s = await setUp(new Map());
  await s.refresh(marks([10n, 10n]));
  await s.tasks.process(0, [rec(5n)]); // moved: not idle at the next refresh
  await s.refresh(marks([6n, 8n], [10n, 10n])); // partition 1 at its stable offset: records after 8 wait on an open transaction
  assert.deepEqual(s.asked, []);
  assert.deepEqual(s.world.events, ['rows 0:5', 'checkpoint 0:6@0']);
});

test('nothing moves when the read fails, or when the log start passed the range start meanwhile (the reader would have started there)', async () => {
  const failing = await setUp(new Map(), { fail: new Error('Kafka at 127.0.0.1:9092 did not answer') });
  await failing.refresh(marks([10n, 10n]));
  await failing.refresh(marks([10n, 10n]));
  assert.deepEqual(failing.world.events, []);
  assert.match(failing.skipper.lastFailure?.message ?? '', /did not answer/);

  const deleted = await setUp(new Map([[0, null], [1, null]]), { low: 6n });
  await deleted.refresh(marks([10n, 10n]));
  await deleted.refresh(marks([10n, 10n]));
  assert.deepEqual(deleted.asked, ['0:[5,10)', '1:[8,10)']);
  assert.deepEqual(deleted.world.events, ['checkpoint 1:10@0'], 'partition 0 was read from its new log start 6, not from 5');
});

test('a stopped or revoked partition is never read, and a closed skipper starts no round', async () => {
  const s = await setUp(new Map([[0, null], [1, null]]));
  await s.refresh(marks([10n, 10n]));
  s.tasks.revoke([1], false);
  await s.refresh(marks([10n, 10n]));
  assert.deepEqual(s.asked, ['0:[5,10)']);
  s.skipper.close();
  await s.skipper.check(marks([20n, 20n]));
  await s.skipper.check(marks([20n, 20n]));
  assert.deepEqual(s.asked, ['0:[5,10)']);

  const stopped = await setUp(new Map([[0, null], [1, null]]));
  stopped.tasks.tasks.get(0)!.stop(new ExactlyOnceError('EO_PERMANENT_ERROR', 'partition 0: a write failed for good'));
  await stopped.refresh(marks([10n, 10n]));
  await stopped.refresh(marks([10n, 10n]));
  assert.deepEqual(stopped.asked, ['1:[8,10)']);
  assert.deepEqual(stopped.world.events, ['stop 0:EO_PERMANENT_ERROR', 'checkpoint 1:10@0']);
});
