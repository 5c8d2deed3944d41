// The worker's consumer (src/kafka/consumer.ts) on its own against the real broker: what the engine
// relies on when it pauses a stopped partition and restarts one at a reset offset, with batches still
// in flight and records fetched ahead.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { GroupConsumer } from '../../src/kafka/consumer.js';
import { TransactionalProducer } from '../../src/kafka/producer.js';
import type { AssignmentHandler, ConsumerOptions } from '../../src/kafka/consumer-contract.js';
import { pino } from 'pino';
import type { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import type { Job, SourceRecord } from '../../src/engine/job.js';
import { LagWatcher } from '../../src/engine/lag-watcher.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import { PartitionTask } from '../../src/engine/partition-task.js';
import type { TaskContext } from '../../src/engine/ports.js';
import type { Quarantine } from '../../src/engine/quarantine.js';
import { connectedProducer, freshTopic, testConfig, waitFor } from '../helpers.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
/** Records k<i>/v<i> for i in from..to-1, on the partition `partition(i)` says. */
const numbered = (from: number, to: number, partition: (i: number) => number) => range(from, to).map((i) => ({ key: `k${i}`, value: `v${i}`, partition: partition(i) }));
/** Handlers that read each assigned partition from its beginning; a refused assignment goes to `onAssignFailed` (by default: the test fails). */
const fromBeginning = (onAssignFailed: AssignmentHandler['onAssignFailed'] = () => assert.fail('assignment refused')): AssignmentHandler => ({
  onAssign: async (ps) => new Map(ps.map((p) => [p, 'beginning' as const])),
  onRevoke: () => undefined,
  onAssignFailed,
});
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
  const producer = await connectedProducer(t, config);
  const perPartition = 2000;
  await producer.send(
    config.topic,
    numbered(0, 2 * perPartition, (i) => i % 2),
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
    fromBeginning(),
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
  const producer = await connectedProducer(t, config);
  const perPartition = 300;
  await producer.send(config.topic, numbered(0, 2 * perPartition, (i) => i % 2));

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
    fromBeginning((partitions, e) => void failed.push({ partitions, message: e.message })),
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
    fromBeginning(() => assert.fail('b refused')),
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
  const producer = await connectedProducer(t, config);
  const announced: number[] = [];
  const consumer = new GroupConsumer(config, optionsFor(config, { concurrency: 1, onFetched: (at) => void announced.push(at) }));
  t.after(() => consumer.stop());
  const batches: Array<{ offsets: number[]; fetchedAt: number; handedOver: number; announced: boolean; finished: number }> = [];
  // When each wave was sent: nothing of a wave can be fetched before it is sent.
  const sentAt: number[] = [];
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
      // The first batch is slow: what is produced meanwhile is fetched, and waits behind it. It lasts
      // until the second wave's fetch is announced (a fixed pause could end first on a busy machine).
      if (batches.length === 1) {
        await waitFor(() => (sentAt.length === 2 && announced.some((a) => a > sentAt[1]!) ? true : undefined), { timeoutMs: 60_000, message: 'the second wave is fetched while the first batch is in flight' });
      }
      batch.finished = performance.now();
    },
  );
  await waitFor(() => (assigned ? true : undefined), { timeoutMs: 60_000, message: 'the partition is assigned' });
  sentAt.push(performance.now());
  await producer.send(config.topic, numbered(0, 10, () => 0));
  await waitFor(() => (batches.length > 0 ? true : undefined), { timeoutMs: 60_000, message: 'the first wave is handed over' });
  sentAt.push(performance.now());
  await producer.send(config.topic, numbered(10, 20, () => 0));
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

test('GroupConsumer: a restart asked for while the assignment is planned (an async onAssign) replaces the planned start; each record says where its reading began', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 1);
  const producer = await connectedProducer(t, config);
  await producer.send(config.topic, numbered(0, 300, () => 0));
  const consumer = new GroupConsumer(config, optionsFor(config));
  t.after(() => consumer.stop());
  const seen: Array<{ offset: bigint; from: bigint | 'log-start' | undefined }> = [];
  await consumer.start(
    {
      onAssign: async (ps) => {
        // The partition's task is replaced while its start is planned (a reset picked up meanwhile).
        consumer.restartAt(0, 120n);
        await sleep(500);
        return new Map(ps.map((p) => [p, 0n]));
      },
      onRevoke: () => undefined,
      onAssignFailed: () => assert.fail('assignment refused'),
    },
    async (_p, records) => void seen.push(...records.map((r) => ({ offset: r.offset, from: r.fetchedFrom }))),
  );
  await waitFor(() => (seen.at(-1)?.offset === 299n ? true : undefined), { timeoutMs: 120_000, message: 'the partition read to its end' });
  await consumer.stop();
  assert.deepEqual(seen.map((s) => Number(s.offset)), range(120, 300), 'read from the restart, not from the planned start');
  assert.deepEqual(seen.map((s) => s.from), range(120, 300).map((o) => BigInt(o)), 'each record read on from the one before it, the first from the restart');
});

test('GroupConsumer: a restart of a partition the client refused to assign assigns it there, and a refusal again is reported again', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 1);
  const producer = await connectedProducer(t, config);
  await producer.send(config.topic, numbered(0, 300, () => 0));
  const clientErrors: string[] = [];
  const consumer = new GroupConsumer(config, { ...optionsFor(config), onClientLog: (level, m) => void (level === 'error' && clientErrors.push(m)) });
  t.after(() => Promise.race([consumer.stop(), sleep(30_000)]));
  // The fault: the native client refuses to take partitions while `refusing` (as librdkafka does in an erroneous state).
  const native = (consumer as unknown as { consumer: { incrementalAssign(x: unknown[]): void } }).consumer;
  const realAssign = native.incrementalAssign.bind(native);
  let refusing = true;
  native.incrementalAssign = (x) => {
    if (refusing && x.length > 0) throw new Error('Local: Erroneous state');
    realAssign(x);
  };
  const failed: Array<{ partitions: number[]; message: string }> = [];
  const seen: Array<{ offset: number; from: bigint | 'log-start' | undefined }> = [];
  await consumer.start(
    fromBeginning((partitions, e) => void failed.push({ partitions, message: e.message })),
    async (_p, records) => void seen.push(...records.map((r) => ({ offset: Number(r.offset), from: r.fetchedFrom }))),
  );
  await waitFor(() => (failed.length > 0 ? true : undefined), { timeoutMs: 60_000, message: 'the refused assignment is reported' });
  consumer.restartAt(0, 50n);
  await waitFor(() => (failed.length > 1 ? true : undefined), { timeoutMs: 60_000, message: 'the refused restart is reported' });
  assert.deepEqual(failed, [{ partitions: [0], message: 'Local: Erroneous state' }, { partitions: [0], message: 'Local: Erroneous state' }]);
  refusing = false;
  consumer.restartAt(0, 100n);
  await waitFor(() => (seen.at(-1)?.offset === 299 ? true : undefined), { timeoutMs: 120_000, message: 'the partition read from the restart to its end' });
  await Promise.race([consumer.stop(), sleep(30_000).then(() => assert.fail('the member never finished leaving'))]);
  assert.deepEqual(seen.map((s) => s.offset), range(100, 300));
  assert.equal(seen[0]!.from, 100n);
  assert.equal(failed.length, 2);
  assert.deepEqual(clientErrors, [], 'the partition taken by the restart is unassigned cleanly when the member leaves');
});

// A restart moves a partition the client holds: unassign, then assign at the new offset. When the
// client refused the assign, the throw ended the fetch loop with nothing to handle it, and the process.
test('GroupConsumer: the client refuses to move a partition a restart moves (its assign, then its unassign): the handler is told each time, the other partition flows on, a later restart reads it', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 2);
  const producer = await connectedProducer(t, config);
  await producer.send(config.topic, numbered(0, 400, (i) => i % 2));
  const clientErrors: string[] = [];
  const consumer = new GroupConsumer(config, { ...optionsFor(config), onClientLog: (level, m) => void (level === 'error' && clientErrors.push(m)) });
  t.after(() => Promise.race([consumer.stop(), sleep(30_000)]));
  const native = (consumer as unknown as { consumer: { incrementalAssign(x: unknown[]): void; incrementalUnassign(x: unknown[]): void } }).consumer;
  const realAssign = native.incrementalAssign.bind(native);
  const realUnassign = native.incrementalUnassign.bind(native);
  let refusing: 'assign' | 'unassign' | undefined;
  native.incrementalAssign = (x) => {
    if (refusing === 'assign' && x.length > 0) throw new Error('Local: Erroneous state');
    realAssign(x);
  };
  native.incrementalUnassign = (x) => {
    if (refusing === 'unassign' && x.length > 0) throw new Error('Local: Invalid argument');
    realUnassign(x);
  };
  const failed: Array<{ partitions: number[]; message: string }> = [];
  const seen = new Map<number, number[]>([[0, []], [1, []]]);
  await consumer.start(
    fromBeginning((partitions, e) => void failed.push({ partitions, message: e.message })),
    async (p, records) => void seen.get(p)!.push(...records.map((r) => Number(r.offset))),
  );
  await waitFor(() => (seen.get(0)!.at(-1) === 199 && seen.get(1)!.at(-1) === 199 ? true : undefined), { timeoutMs: 120_000, message: 'both partitions read to their end' });
  // The client let go of partition 0 and refuses to take it back at 50.
  refusing = 'assign';
  consumer.restartAt(0, 50n);
  await waitFor(() => (failed.length > 0 ? true : undefined), { timeoutMs: 60_000, message: 'the refused restart is reported' });
  assert.deepEqual(failed, [{ partitions: [0], message: 'Local: Erroneous state' }]);
  refusing = undefined;
  // The fetch loop lives: partition 1 reads what comes next; partition 0 reads nothing until restarted.
  await producer.send(config.topic, numbered(400, 440, (i) => i % 2));
  await waitFor(() => (seen.get(1)!.at(-1) === 219 ? true : undefined), { timeoutMs: 60_000, message: 'partition 1 reads on' });
  assert.equal(seen.get(0)!.at(-1), 199, 'nothing of partition 0 handed over while it is not assigned');
  consumer.restartAt(0, 100n);
  await waitFor(() => (seen.get(0)!.at(-1) === 219 ? true : undefined), { timeoutMs: 120_000, message: 'partition 0 read from the restart to its end' });
  // The client refuses to let go of partition 0 to move it to 150: it keeps it, paused.
  refusing = 'unassign';
  consumer.restartAt(0, 150n);
  await waitFor(() => (failed.length > 1 ? true : undefined), { timeoutMs: 60_000, message: 'the refused unassign is reported' });
  assert.deepEqual(failed[1], { partitions: [0], message: 'Local: Invalid argument' });
  refusing = undefined;
  await producer.send(config.topic, numbered(440, 480, (i) => i % 2));
  await waitFor(() => (seen.get(1)!.at(-1) === 239 ? true : undefined), { timeoutMs: 60_000, message: 'partition 1 reads on again' });
  assert.equal(seen.get(0)!.at(-1), 219, 'nothing of partition 0 handed over while it is held');
  consumer.restartAt(0, 200n);
  await waitFor(() => (seen.get(0)!.at(-1) === 239 ? true : undefined), { timeoutMs: 120_000, message: 'partition 0 read from the second restart to its end' });
  await Promise.race([consumer.stop(), sleep(30_000).then(() => assert.fail('the member never finished leaving'))]);
  assert.deepEqual(seen.get(0), [...range(0, 200), ...range(100, 220), ...range(200, 240)]);
  assert.deepEqual(seen.get(1), range(0, 240));
  assert.equal(failed.length, 2);
  assert.deepEqual(clientErrors, [], 'the partition taken again by the restart is unassigned cleanly when the member leaves');
});

test('GroupConsumer and PartitionTask: jumps over transaction markers and aborted records are stored; a restart that is lost stops the task with EO_OFFSET_GAP, nothing skipped', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 1);
  const txn = new TransactionalProducer(config, `eo-test-txn-${config.topic}`);
  t.after(() => txn.close());
  await txn.connect();
  // Committed, committed, aborted, committed: a marker after each, aborted records between.
  let n = 0;
  for (const commit of [true, true, false, true]) {
    await txn.write(config.topic, numbered(n, n + 10, () => 0), commit);
    n += 10;
  }
  const { ctx, written, checkpoints } = taskStores();
  let task = new PartitionTask(0, null, ctx);
  const consumer = new GroupConsumer(config, optionsFor(config, { maxBatchSize: 4 }));
  t.after(() => consumer.stop());
  await consumer.start(
    fromBeginning(),
    async (_p, records) => task.process(records),
  );
  await waitFor(() => (written.length === 30 ? true : undefined), { timeoutMs: 120_000, message: 'the committed records stored' });
  await task.flush();
  assert.equal(task.status.state, 'running', String(task.status.error?.message));
  // Each transaction's marker after it: committed 0-9 (10), 11-20 (21), aborted 22-31 (32), committed 33-42 (43).
  assert.deepEqual(written.map((r) => Number(r.offset)), [...range(0, 10), ...range(11, 21), ...range(33, 43)]);
  assert.equal(checkpoints.at(-1), 43n);
  const end = 44n; // the next record's offset, past the last marker

  // A rewind to offset 5 whose restart of the reading is lost (the consumer is never told): the next
  // records come from where the reading was, and the task must not take them as following offset 5.
  task = new PartitionTask(0, 5n, ctx);
  const producer = await connectedProducer(t, config);
  await producer.send(config.topic, [{ key: 'k', value: 'after', partition: 0 }]);
  await waitFor(() => (task.status.state === 'stopped' ? true : undefined), { timeoutMs: 120_000, message: 'the task stops' });
  await consumer.stop();
  assert.equal(task.status.error?.code, 'EO_OFFSET_GAP');
  assert.equal(
    task.status.error!.message,
    `partition 0: the batch starts at offset ${end}, but the partition resumes at 5 and the client read it from offset ${end - 1n}, not from 5: nothing proves that offsets 5..${end - 1n} hold no record ` +
      '(a restart of the reading that did not take place?). The partition is stopped at its checkpoint and nothing is skipped; restart the worker (it reads from the checkpoint), ' +
      'or run `exactlyonce checkpoints reset --job test --partition 0 --to 5` (workers pick it up while running).',
  );
  assert.equal(written.length, 30, 'nothing of the new reading stored');
  assert.equal(checkpoints.at(-1), end - 1n, 'no checkpoint written past the gap');
});

/** A PartitionTask's stores, in memory (the Kafka side is the real one here). */
function taskStores() {
  const written: SourceRecord[] = [];
  const checkpoints: bigint[] = [];
  const job: Job<string> = {
    name: 'test',
    decode: (r) => ({ ok: true, value: r.value!.toString() }),
    open: async () => undefined,
    write: async (_p, records) => void written.push(...records.map((r) => r.record)),
  };
  const metrics = new EngineMetrics();
  const ctx: TaskContext = {
    job: job as Job<unknown>,
    checkpoints: { write: async (_p: number, next: bigint) => void checkpoints.push(next) } as unknown as CheckpointStore,
    quarantine: { write: async () => assert.fail('nothing is quarantined') } as unknown as Quarantine,
    metrics,
    lag: new LagWatcher(metrics),
    log: pino({ level: 'silent' }),
    withRetry: <T>(fn: () => Promise<T>) => fn(),
    // A fresh topic: nothing deleted, its log starts at 0.
    logStart: async () => 0n,
  };
  return { ctx, written, checkpoints };
}
