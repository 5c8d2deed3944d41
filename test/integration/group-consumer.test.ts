// The worker's consumer (src/kafka/consumer.ts) on its own against the real broker: what the engine
// relies on when it pauses a stopped partition and restarts one at a reset offset, with batches still
// in flight and records fetched ahead.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { GroupConsumer, type ConsumerOptions } from '../../src/kafka/consumer.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshTopic, testConfig, waitFor } from '../helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
/** The consumer's options in these tests: small batches and prefetch, so that records wait in its queues. */
const optionsFor = (config: ConnectionConfig, more: Partial<ConsumerOptions> = {}): ConsumerOptions => ({
  groupId: config.group,
  topic: config.topic,
  maxBatchSize: 100,
  concurrency: 2,
  maxBufferKb: 64,
  sessionTimeoutMs: 6000,
  metadataRefreshMs: 300_000,
  ...more,
});

test('GroupConsumer: after restartAt (backwards) or pause returns, nothing of the old position is handed over; batches in offset order, within maxBatch and the concurrency', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 2);
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const perPartition = 2000;
  await producer.send(
    config.topic,
    range(0, 2 * perPartition).map((i) => ({ key: `k${i}`, value: `v${i}`, partition: i % 2 })),
  );

  const consumer = new GroupConsumer(config, optionsFor(config));
  t.after(() => consumer.stop());
  // Per partition, the offsets handed over, in order; a phase marks each restart or pause.
  const seen = new Map<number, number[][]>([[0, [[]]], [1, [[]]]]);
  const note = (p: number, offsets: number[]) => seen.get(p)!.at(-1)!.push(...offsets);
  const newPhase = (p: number) => seen.get(p)!.push([]);
  // Batches in flight at once, over both partitions, and per partition.
  let inFlight = 0;
  const busy = new Set<number>();
  let maxInFlight = 0;
  let maxBatch = 0;
  let restarted0 = false;
  let paused1 = false;
  await consumer.start(
    { onAssign: async (ps) => new Map(ps.map((p) => [p, 'beginning' as const])), onRevoke: () => undefined, onAssignFailed: () => assert.fail('assignment refused') },
    async (partition, records) => {
      assert.ok(!busy.has(partition), `partition ${partition}: one batch at a time`);
      busy.add(partition);
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      maxBatch = Math.max(maxBatch, records.length);
      try {
        note(partition, records.map((r) => Number(r.offset)));
        assert.ok(records.every((r) => r.value!.toString() === `v${Number(r.offset) * 2 + partition}`), 'each record is the one produced');
        // Slow batches: the loop fetches ahead of them, so the restart has fetched records to drop.
        await sleep(15);
        if (partition === 0 && !restarted0 && records.at(-1)!.offset >= 600n) {
          // While this batch is in flight: back to offset 100.
          consumer.restartAt(0, 100n);
          restarted0 = true;
          newPhase(0);
        }
        if (partition === 1 && !paused1 && records.at(-1)!.offset >= 400n) {
          consumer.pause([1]);
          paused1 = true;
          newPhase(1);
        }
      } finally {
        inFlight--;
        busy.delete(partition);
      }
    },
  );
  await waitFor(() => (seen.get(0)![1]?.at(-1) === perPartition - 1 ? true : undefined), { timeoutMs: 120_000, message: 'partition 0 read to its end after the restart' });
  // Partition 1 was paused: nothing of it arrived after pause() returned, however long we wait.
  await sleep(1000);
  assert.deepEqual(seen.get(1)![1], []);
  consumer.restartAt(1, 1500n);
  newPhase(1);
  await waitFor(() => (seen.get(1)![2]?.at(-1) === perPartition - 1 ? true : undefined), { timeoutMs: 120_000, message: 'partition 1 read to its end after its restart' });
  await consumer.stop();

  const [before0, after0] = seen.get(0)!;
  assert.deepEqual(before0, range(0, before0!.length), 'partition 0 before the restart: from 0, each offset once, in order');
  assert.ok(before0!.at(-1)! >= 600);
  assert.deepEqual(after0, range(100, perPartition), 'partition 0 after restartAt(100): exactly 100..1999');
  const [before1, paused, after1] = seen.get(1)!;
  assert.deepEqual(before1, range(0, before1!.length));
  assert.ok(before1!.at(-1)! >= 400);
  assert.deepEqual(paused, []);
  assert.deepEqual(after1, range(1500, perPartition), 'partition 1 after restartAt(1500): exactly 1500..1999');
  assert.ok(maxInFlight >= 1 && maxInFlight <= 2, `at most two batches at once (concurrency 2): ${maxInFlight}`);
  assert.equal(maxBatch, 100, 'batches of at most maxBatchSize, and full ones while behind');
});

test('GroupConsumer: the client refuses an assignment: the handler is told, nothing is handed over, and the partitions move on cleanly to another member', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 2);
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const perPartition = 300;
  await producer.send(config.topic, range(0, 2 * perPartition).map((i) => ({ key: `k${i}`, value: `v${i}`, partition: i % 2 })));

  const options = optionsFor(config);
  const clientErrors: string[] = [];
  const a = new GroupConsumer(config, { ...options, onClientLog: (level, m) => void (level === 'error' && clientErrors.push(m)) });
  // Bounded: a client left in its rebalance never finishes closing, and the test must fail, not hang.
  t.after(() => Promise.race([a.stop(), sleep(30_000)]));
  // The fault: the native client refuses the first assignment it is asked for (as librdkafka does in
  // an erroneous state); everything else is the real client against the real broker.
  const native = (a as unknown as { consumer: { incrementalAssign(x: unknown): void } }).consumer;
  const realAssign = native.incrementalAssign.bind(native);
  let refused = 0;
  native.incrementalAssign = (x) => {
    if (refused++ === 0) throw new Error('Local: Erroneous state');
    realAssign(x);
  };
  const failed: Array<{ partitions: number[]; message: string }> = [];
  const handedToA: number[] = [];
  await a.start(
    {
      onAssign: async (ps) => new Map(ps.map((p) => [p, 'beginning' as const])),
      onRevoke: () => undefined,
      onAssignFailed: (partitions, e) => void failed.push({ partitions, message: e.message }),
    },
    async (_p, records) => void handedToA.push(...records.map((r) => Number(r.offset))),
  );
  await waitFor(() => (failed.length > 0 ? true : undefined), { timeoutMs: 60_000, message: 'the refused assignment is reported' });
  assert.deepEqual(failed, [{ partitions: [0, 1], message: 'Local: Erroneous state' }]);
  await sleep(2000);
  assert.deepEqual(handedToA, [], 'nothing of a partition the client did not take is handed over');

  // Another member joins, then the first leaves: each partition reaches it whole, in order.
  const seenByB = new Map<number, number[]>([[0, []], [1, []]]);
  const b = new GroupConsumer(config, options);
  t.after(() => Promise.race([b.stop(), sleep(30_000)]));
  await b.start(
    { onAssign: async (ps) => new Map(ps.map((p) => [p, 'beginning' as const])), onRevoke: () => undefined, onAssignFailed: () => assert.fail('b refused') },
    async (p, records) => void seenByB.get(p)!.push(...records.map((r) => Number(r.offset))),
  );
  await waitFor(() => ([...seenByB.values()].some((s) => s.length === perPartition) ? true : undefined), { timeoutMs: 120_000, message: 'the joining member reads a partition' });
  await Promise.race([a.stop(), sleep(30_000).then(() => assert.fail('the first member never finished leaving'))]);
  await waitFor(() => ([...seenByB.values()].every((s) => s.length >= perPartition) ? true : undefined), { timeoutMs: 120_000, message: 'the joining member reads both partitions after the first leaves' });
  await b.stop();
  assert.deepEqual([...seenByB.values()], [range(0, perPartition), range(0, perPartition)]);
  assert.deepEqual(handedToA, []);
  assert.deepEqual(clientErrors, [], 'no rebalance failed: what the client never took is not unassigned');
});

test('GroupConsumer: each batch carries when its last record was fetched: after it was produced, announced by onFetched, and before the hand-over when the batch waited behind its partition', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 1);
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const announced: number[] = [];
  const consumer = new GroupConsumer(config, optionsFor(config, { concurrency: 1, onFetched: (at) => void announced.push(at) }));
  t.after(() => consumer.stop());
  const batches: Array<{ offsets: number[]; fetchedAt: number; handedOver: number; announced: boolean; finished: number }> = [];
  let assigned = false;
  await consumer.start(
    {
      onAssign: async (ps) => {
        assigned = true;
        return new Map(ps.map((p) => [p, 'beginning' as const]));
      },
      onRevoke: () => undefined,
      onAssignFailed: () => assert.fail('assignment refused'),
    },
    async (_p, records, fetchedAt) => {
      const batch = { offsets: records.map((r) => Number(r.offset)), fetchedAt, handedOver: performance.now(), announced: announced.includes(fetchedAt), finished: 0 };
      batches.push(batch);
      // The first batch is slow: what is produced meanwhile is fetched, and waits behind it.
      if (batches.length === 1) await sleep(3000);
      batch.finished = performance.now();
    },
  );
  await waitFor(() => (assigned ? true : undefined), { timeoutMs: 60_000, message: 'the partition is assigned' });
  // Two waves: nothing of a wave can be fetched before it is sent.
  const sentAt: number[] = [];
  sentAt.push(performance.now());
  await producer.send(config.topic, range(0, 10).map((i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 })));
  await waitFor(() => (batches.length > 0 ? true : undefined), { timeoutMs: 60_000, message: 'the first wave is handed over' });
  sentAt.push(performance.now());
  await producer.send(config.topic, range(10, 20).map((i) => ({ key: `k${i}`, value: `v${i}`, partition: 0 })));
  await waitFor(() => (batches.flatMap((b) => b.offsets).length === 20 && batches.every((b) => b.finished > 0) ? true : undefined), { timeoutMs: 60_000, message: 'both waves are handed over' });
  await consumer.stop();

  assert.deepEqual(batches.flatMap((b) => b.offsets), range(0, 20), 'each record once, in order');
  for (const b of batches) {
    const wave = b.offsets.at(-1)! < 10 ? 0 : 1;
    assert.ok(b.fetchedAt > sentAt[wave]!, `batch ${b.offsets[0]}..${b.offsets.at(-1)}: fetched after its last record was sent`);
    assert.ok(b.fetchedAt <= b.handedOver, 'fetched before it was handed over');
    assert.ok(b.announced, 'its fetch was announced by onFetched');
  }
  // The second wave was fetched while the first batch was in flight: its stamp is its fetch, not its hand-over.
  const waited = batches.filter((b) => b.offsets[0]! >= 10);
  assert.ok(waited.length > 0);
  for (const b of waited) {
    assert.ok(b.handedOver >= batches[0]!.finished, 'handed over after the first batch finished');
    assert.ok(b.fetchedAt < batches[0]!.finished, `fetched while the first batch was in flight (${(batches[0]!.finished - b.fetchedAt).toFixed(0)} ms before it finished)`);
  }
});
