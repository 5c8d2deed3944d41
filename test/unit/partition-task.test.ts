// The checkpoint arithmetic of PartitionTask, with in-memory stand-ins for the stores (the real ones
// are exercised against Cassandra by the integration tests).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import type { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import type { Job, SourceRecord } from '../../src/engine/job.js';
import { LagWatcher } from '../../src/engine/lag-watcher.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import { LostWrites } from '../../src/engine/lost-writes.js';
import { LostWritesFound } from '../../src/engine/task-errors.js';
import { PartitionTask } from '../../src/engine/partition-task.js';
import type { Quarantine, QuarantineEntry } from '../../src/engine/quarantine.js';

function harness(logStart = 0n) {
  const written: bigint[] = [];
  const quarantined: bigint[] = [];
  const checkpoints: bigint[] = [];
  /** Offsets an operator quarantined by hand (`quarantine add`). */
  const byHand: bigint[] = [];
  const job: Job<string> = {
    name: 'test',
    decode: (r) => (r.value?.toString() === 'bad' ? { ok: false, reason: 'invalid_json', detail: '' } : { ok: true, value: r.value!.toString() }),
    open: async () => undefined,
    write: async (_p, records) => void written.push(...records.map((r) => r.record.offset)),
  };
  const metrics = new EngineMetrics();
  const ctx = {
    job: job as Job<unknown>,
    checkpoints: { write: async (_p: number, next: bigint) => void checkpoints.push(next) } as unknown as CheckpointStore,
    quarantine: {
      write: async (e: readonly QuarantineEntry[]) => void quarantined.push(...e.map((x) => x.record.offset)),
      reasonOf: async (_p: number, offset: bigint) => (byHand.includes(offset) ? 'refused' : null),
    } as unknown as Quarantine,
    metrics,
    lag: new LagWatcher(metrics),
    log: pino({ level: 'silent' }),
    withRetry: <T>(fn: () => Promise<T>) => fn(),
    logStart: async () => logStart,
  };
  return { ctx, written, quarantined, checkpoints, byHand };
}

const rec = (offset: bigint, value = 'ok', fetchedFrom?: bigint | 'log-start'): SourceRecord => ({ topic: 't', partition: 0, offset, key: null, value: Buffer.from(value), timestampMs: 0, fetchedFrom });

/**
 * Retries as the Runner does against Cassandra: a failed operation counts an outage (`failures` gets its
 * message), then runs again; a loss found is not retried.
 */
function retryCountingOutages(lostWrites: LostWrites, failures: string[] = []) {
  return async <T>(fn: () => Promise<T>): Promise<T> => {
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (e instanceof LostWritesFound) throw e;
        failures.push((e as Error).message);
        lostWrites.outage();
      }
    }
  };
}

test('the checkpoint is the offset after the last record of the batch, even across offset gaps', async () => {
  const h = harness();
  const task = new PartitionTask(0, null, h.ctx);
  await task.process([rec(0n), rec(1n), rec(5n, 'bad'), rec(9n)]);
  assert.deepEqual(h.written, [0n, 1n, 9n]);
  assert.deepEqual(h.quarantined, [5n]);
  assert.deepEqual(h.checkpoints, [10n]);
  assert.equal(task.status.next, 10n);
});

test('records before the checkpoint (a re-delivery) are skipped; a batch of only those writes nothing', async () => {
  const h = harness();
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(8n), rec(9n)]);
  await task.process([rec(9n), rec(10n), rec(11n)]);
  assert.deepEqual(h.written, [10n, 11n]);
  assert.deepEqual(h.checkpoints, [12n]);
});

test('a jump past the checkpoint is normal when the reading began at or below it (markers, aborted records: gaps are not loss)', async () => {
  const h = harness(0n);
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(12n, 'ok', 10n)]);
  // A re-delivery read from below the checkpoint, then a jump over markers.
  await task.process([rec(11n, 'ok', 8n), rec(13n, 'ok', 12n), rec(20n, 'ok', 14n)]);
  assert.equal(task.status.state, 'running');
  assert.deepEqual(h.written, [12n, 13n, 20n]);
  assert.deepEqual(h.checkpoints, [13n, 21n]);
});

test('a jump past the checkpoint read from the log start is proved by the log start (it only grows)', async () => {
  const h = harness(10n);
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(12n, 'ok', 'log-start')]);
  assert.equal(task.status.state, 'running');
  assert.deepEqual(h.checkpoints, [13n]);
});

test('a jump past the checkpoint from a reading begun beyond it (a restart that did not take place) stops the partition with EO_OFFSET_GAP, nothing skipped', async () => {
  const h = harness(0n);
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(15n, 'ok', 14n), rec(16n, 'ok', 16n)]);
  assert.equal(task.status.state, 'stopped');
  assert.equal(task.status.error?.code, 'EO_OFFSET_GAP');
  assert.equal(
    task.status.error!.message,
    'partition 0: the batch starts at offset 15, but the partition resumes at 10 and the client read it from offset 14, not from 10: nothing proves that offsets 10..14 hold no record ' +
      '(a restart of the reading that did not take place?). The partition is stopped at its checkpoint and nothing is skipped; restart the worker (it reads from the checkpoint), ' +
      'or run `exactlyonce checkpoints reset --job test --partition 0 --to 10` (workers pick it up while running).',
  );
  assert.equal(task.status.next, 10n);
  assert.deepEqual(h.written, []);
  assert.deepEqual(h.checkpoints, []);
  await task.process([rec(17n, 'ok', 17n)]);
  assert.deepEqual(h.checkpoints, [], 'a stopped partition never checkpoints');
});

test('a jump past the checkpoint from a source that does not say where it read from stops the partition with EO_OFFSET_GAP', async () => {
  const h = harness(0n);
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(12n)]);
  assert.equal(task.status.error?.code, 'EO_OFFSET_GAP');
  assert.match(task.status.error!.message, /^partition 0: the batch starts at offset 12, but the partition resumes at 10 and the client read it from a position its source does not tell, not from 10: /);
  assert.deepEqual(h.checkpoints, []);
});

test('a jump past the checkpoint because retention deleted records stops the partition, checkpoint unmoved', async () => {
  const h = harness(50n);
  const task = new PartitionTask(0, 10n, h.ctx);
  await task.process([rec(50n), rec(51n)]);
  assert.equal(task.status.state, 'stopped');
  assert.equal(task.status.error?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.match(task.status.error!.message, /checkpoint 10 is below the log start 50: records 10\.\.49 were deleted/);
  assert.deepEqual(h.written, []);
  assert.deepEqual(h.checkpoints, []);
  await task.process([rec(52n)]);
  assert.deepEqual(h.checkpoints, [], 'a stopped partition never checkpoints');
});

test('a revoked task finishes nothing new', async () => {
  const h = harness();
  const task = new PartitionTask(0, 0n, h.ctx);
  task.revoke();
  await task.process([rec(0n)]);
  assert.deepEqual(h.written, []);
  assert.deepEqual(h.checkpoints, []);
});

test('the checkpoint is written only after the records are stored', async () => {
  const order: string[] = [];
  const h = harness();
  h.ctx.job = { ...h.ctx.job, write: async () => void order.push('rows') } as Job<unknown>;
  h.ctx.checkpoints = { write: async () => void order.push('checkpoint') } as unknown as CheckpointStore;
  await new PartitionTask(0, null, h.ctx).process([rec(0n)]);
  assert.deepEqual(order, ['rows', 'checkpoint']);
});

/**
 * Fakes that complete `ms` later and record into `order` when each is called and done (named by
 * `name`, or by what `name` makes of the call's arguments): a write made concurrently with another
 * (called before it finished) shows up, which a fake recording only calls cannot show.
 */
function recorder(order: string[]) {
  return (name: string | ((args: unknown[]) => string), ms: number) =>
    async (...args: unknown[]) => {
      const what = typeof name === 'string' ? name : name(args);
      order.push(`${what} called`);
      await new Promise((r) => setTimeout(r, ms));
      order.push(`${what} done`);
    };
}

test('the checkpoint is written only once the rows and the quarantine rows are stored, not while they are in flight', async () => {
  const order: string[] = [];
  const later = recorder(order);
  const h = harness();
  h.ctx.job = { ...h.ctx.job, write: later('rows', 30) } as Job<unknown>;
  h.ctx.quarantine = { write: later('quarantine', 10) } as unknown as Quarantine;
  h.ctx.checkpoints = { write: later('checkpoint', 1) } as unknown as CheckpointStore;
  const task = new PartitionTask(0, null, h.ctx);
  await task.process([rec(0n), rec(1n, 'bad')]);
  await task.flush();
  assert.deepEqual(order, ['rows called', 'quarantine called', 'quarantine done', 'rows done', 'checkpoint called', 'checkpoint done']);
  assert.equal(task.status.next, 2n, 'the task moves on once the rows are durable');
});

test("a batch's checkpoint is written while the next batch's rows are, and sent only once the one before landed", async () => {
  const order: string[] = [];
  const later = recorder(order);
  const h = harness();
  h.ctx.job = { ...h.ctx.job, write: later((a) => `rows ${(a[1] as Array<{ record: { offset: bigint } }>)[0]!.record.offset}`, 10) } as Job<unknown>;
  h.ctx.checkpoints = { write: later((a) => `checkpoint ${a[1] as bigint}`, 30) } as unknown as CheckpointStore;
  const task = new PartitionTask(0, null, h.ctx);
  await task.process([rec(0n), rec(1n)]);
  assert.deepEqual(order, ['rows 0 called', 'rows 0 done', 'checkpoint 2 called'], 'returns once the rows are stored, the checkpoint in flight');
  assert.equal(task.status.next, 2n);
  await task.process([rec(2n)]);
  await task.flush();
  assert.deepEqual(order, [
    'rows 0 called',
    'rows 0 done',
    'checkpoint 2 called',
    'rows 2 called', // the next batch's rows while the checkpoint is in flight
    'rows 2 done',
    'checkpoint 2 done', // waited for before the next checkpoint is sent
    'checkpoint 3 called',
    'checkpoint 3 done',
  ]);
});

test('a checkpoint write that fails for good stops the partition, even with no batch after it', async () => {
  const h = harness();
  const stops: string[] = [];
  h.ctx.checkpoints = {
    write: async () => {
      throw Object.assign(new Error('Undefined column name next_offset'), { code: 0x2200 });
    },
  } as unknown as CheckpointStore;
  const task = new PartitionTask(0, null, { ...h.ctx, onStop: (_p, _epoch, e) => void stops.push(e.code) });
  await task.process([rec(0n)]);
  await task.flush();
  assert.equal(task.status.state, 'stopped');
  assert.equal(task.status.error!.code, 'EO_PERMANENT_ERROR');
  assert.deepEqual(stops, ['EO_PERMANENT_ERROR']);
  assert.deepEqual(h.written, [0n], 'its rows were stored; the next owner writes them again (idempotent)');
  await task.process([rec(1n)]);
  assert.deepEqual(h.written, [0n], 'a stopped partition stores nothing more');
});

test('rows acknowledged before a Cassandra outage are written again before their checkpoint; rows acknowledged after one are not', async () => {
  const h = harness();
  const lostWrites = new LostWrites();
  const failures: string[] = [];
  // As the Runner retries: a failed Cassandra operation counts an outage, then runs again.
  h.ctx.withRetry = retryCountingOutages(lostWrites, failures);
  let failNext: { on: 'rows' | 'checkpoint'; message: string } | undefined;
  const failOnce = (on: 'rows' | 'checkpoint') => {
    const what = failNext;
    if (what?.on !== on) return;
    failNext = undefined;
    throw new Error(what.message);
  };
  h.ctx.job = { ...h.ctx.job, write: async (_p: number, records: ReadonlyArray<{ record: SourceRecord }>) => (failOnce('rows'), void h.written.push(...records.map((r) => r.record.offset))) } as Job<unknown>;
  h.ctx.checkpoints = {
    write: async (_p: number, next: bigint) => (failOnce('checkpoint'), void h.checkpoints.push(next)),
    readOne: async () => ({ next: h.checkpoints.at(-1)!, epoch: 0 }),
  } as unknown as CheckpointStore;
  const task = new PartitionTask(0, null, { ...h.ctx, lostWrites });
  // The outage comes after the rows were acknowledged, on the checkpoint's write: the node may have
  // crashed and taken them back with it.
  failNext = { on: 'checkpoint', message: 'checkpoint 3: connection lost' };
  await task.process([rec(0n), rec(1n), rec(2n)]);
  await task.flush();
  assert.deepEqual(failures, ['checkpoint 3: connection lost']);
  assert.deepEqual(h.written, [0n, 1n, 2n, 0n, 1n, 2n], 'written again before the checkpoint');
  assert.deepEqual(h.checkpoints, [3n]);
  const rewritten = async () => (await h.ctx.metrics.rowsRewritten.get()).values.map((v) => [v.labels['partition'], v.value]);
  assert.deepEqual(await rewritten(), [['0', 1]], 'counted in exactlyonce_rows_rewritten_total');
  // The outage comes while the rows are written: they are acknowledged after it, and written once.
  failNext = { on: 'rows', message: 'rows 3: connection lost' };
  await task.process([rec(3n), rec(4n)]);
  await task.flush();
  assert.deepEqual(failures, ['checkpoint 3: connection lost', 'rows 3: connection lost']);
  assert.deepEqual(h.written, [0n, 1n, 2n, 0n, 1n, 2n, 3n, 4n]);
  assert.deepEqual(h.checkpoints, [3n, 5n]);
  assert.deepEqual(await rewritten(), [['0', 1]]);
});

test('a batch whose write is retried across an outage writes nothing once its partition was rewound meanwhile (the new task writes it)', async () => {
  const h = harness();
  const lostWrites = new LostWrites();
  let failRows = false;
  const stops: string[] = [];
  let task: PartitionTask | undefined;
  h.ctx.withRetry = async <T>(fn: () => Promise<T>) => {
    for (;;) {
      try {
        return await fn();
      } catch (e) {
        if (!(e instanceof Error) || e.message !== 'connection lost') throw e;
        lostWrites.outage();
        // Meanwhile the partition was rewound (another of its writes found the loss): a new task reads
        // it from the reset checkpoint, one epoch up.
        task!.abandon();
      }
    }
  };
  h.ctx.job = {
    ...h.ctx.job,
    write: async (_p: number, records: ReadonlyArray<{ record: SourceRecord }>) => {
      if (failRows) {
        failRows = false;
        throw new Error('connection lost');
      }
      h.written.push(...records.map((r) => r.record.offset));
    },
  } as Job<unknown>;
  h.ctx.checkpoints = {
    write: async (_p: number, next: bigint) => void h.checkpoints.push(next),
    readOne: async () => ({ next: 0n, epoch: 1 }),
  } as unknown as CheckpointStore;
  task = new PartitionTask(0, null, { ...h.ctx, lostWrites, onStop: (_p, _e, err) => void stops.push(err.code) }, 0);
  await task.process([rec(0n), rec(1n)]);
  await task.flush();
  failRows = true;
  await task.process([rec(2n), rec(3n)]);
  await task.flush();
  assert.deepEqual(h.written, [0n, 1n], 'nothing of the second batch is written by the old task');
  assert.deepEqual(h.checkpoints, [2n]);
  assert.deepEqual([task.status.state, stops], ['revoked', []]);
});

test('skipTo: a checkpoint at the start of an unreadable range (aborted records, markers) moves to its end; from anywhere else it does not move', async () => {
  const h = harness();
  const task = new PartitionTask(0, null, h.ctx);
  await task.process([rec(0n), rec(1n)]); // next 2; 2..4 are an aborted transaction and its marker
  assert.equal(await task.skipTo(3n, 5n), false, 'the proof started after the checkpoint: 2 was not proved unreadable');
  assert.equal(await task.skipTo(0n, 2n), false, 'nothing to move');
  assert.equal(await task.skipTo(2n, 5n), true);
  await task.flush();
  assert.deepEqual(h.checkpoints, [2n, 5n]);
  assert.equal(task.status.next, 5n);
  assert.equal(Number((await h.ctx.metrics.skippedOffsets.get()).values[0]?.value), 3);
  // A batch after the range continues from there.
  await task.process([rec(5n), rec(6n)]);
  await task.flush();
  assert.deepEqual(h.checkpoints, [2n, 5n, 7n]);
  // Never checkpointed yet (null): a range from the log start moves it.
  const fresh = new PartitionTask(0, null, h.ctx);
  assert.equal(await fresh.skipTo(0n, 3n), true);
  await fresh.flush();
  assert.equal(fresh.status.next, 3n);
  // A revoked or stopped task never moves.
  const revoked = new PartitionTask(0, 2n, h.ctx);
  revoked.revoke();
  assert.equal(await revoked.skipTo(2n, 5n), false);
});

test('skipTo waits for the checkpoint in flight; a batch stored meanwhile (beyond the range) follows it, one write at a time', async () => {
  const order: string[] = [];
  const later = recorder(order);
  const h = harness();
  h.ctx.checkpoints = { write: later((a) => `checkpoint ${a[1] as bigint}`, 30) } as unknown as CheckpointStore;
  const task = new PartitionTask(0, null, h.ctx);
  await task.process([rec(0n), rec(1n)]); // checkpoint 2 in flight
  const skipped = task.skipTo(2n, 5n);
  await task.process([rec(5n)]); // the next transaction's record, delivered while the skip waits
  assert.equal(await skipped, true);
  await task.flush();
  assert.deepEqual(
    order,
    ['checkpoint 2 called', 'checkpoint 2 done', 'checkpoint 5 called', 'checkpoint 5 done', 'checkpoint 6 called', 'checkpoint 6 done'],
    'one write at a time, never backwards',
  );
  assert.equal(task.status.next, 6n);

  order.length = 0;
  const idle = new PartitionTask(0, null, h.ctx);
  await idle.process([rec(0n)]); // checkpoint 1 in flight
  assert.equal(await idle.skipTo(1n, 4n), true);
  await idle.flush();
  assert.deepEqual(order, ['checkpoint 1 called', 'checkpoint 1 done', 'checkpoint 4 called', 'checkpoint 4 done']);
});

test('every stage of a batch is timed: idle between batches, and queued, decode, rows, checkpoint_wait, checkpoint for each', async () => {
  const h = harness();
  const task = new PartitionTask(0, null, h.ctx);
  const now = Date.now();
  await task.process([{ ...rec(0n), timestampMs: now - 2000 }, { ...rec(1n), timestampMs: now - 1000 }, rec(2n)]);
  await task.process([{ ...rec(3n), timestampMs: now + 60_000 }]); // a producer clock ahead: no queued time
  await task.flush();
  const { values } = await h.ctx.metrics.batchStages.get();
  const count = (stage: string) => values.find((v) => v.metricName === 'exactlyonce_batch_stage_seconds_count' && v.labels['stage'] === stage)?.value;
  const sum = (stage: string) => values.find((v) => v.metricName === 'exactlyonce_batch_stage_seconds_sum' && v.labels['stage'] === stage)?.value;
  assert.deepEqual(
    ['idle', 'queued', 'decode', 'rows', 'checkpoint_wait', 'checkpoint'].map((s) => [s, count(s)]),
    [['idle', 1], ['queued', 1], ['decode', 2], ['rows', 2], ['checkpoint_wait', 2], ['checkpoint', 2]],
  );
  // The first batch's middle record was produced 1 s before it was handed over (to within the
  // sub-millisecond between Date.now and performance.now).
  assert.ok(sum('queued')! >= 0.99 && sum('queued')! < 60, String(sum('queued')));
});

test('queued ends when the batch is handed over: the wait for the identity check after it is the identity stage alone, not counted twice', async () => {
  const h = harness();
  const task = new PartitionTask(0, null, h.ctx);
  // Handed over 500 ms ago (it waited for the identity check since); its middle record was produced 1,500 ms ago.
  const arrived = performance.now() - 500;
  const now = Date.now();
  await task.process([{ ...rec(0n), timestampMs: now - 1500 }], arrived);
  await task.flush();
  const { values } = await h.ctx.metrics.batchStages.get();
  const sum = (stage: string) => values.find((v) => v.metricName === 'exactlyonce_batch_stage_seconds_sum' && v.labels['stage'] === stage)?.value;
  assert.ok(sum('identity')! >= 0.5 && sum('identity')! < 0.6, `identity ${sum('identity')}`);
  assert.ok(sum('queued')! >= 0.99 && sum('queued')! < 1.1, `queued ${sum('queued')}`);
});

test("after an outage, the next batch's rows wait for the rewrite of the batch before (acknowledged before the outage): a job that builds on what it stored never reads the row before the rewrite lands", async () => {
  const h = harness();
  const lostWrites = new LostWrites();
  const order: string[] = [];
  h.ctx.withRetry = retryCountingOutages(lostWrites);
  // The rewrite of batch 0..1 is held until the test releases it; the checkpoint of batch 0..1 fails
  // once (the outage after its rows were acknowledged).
  let rewrite: { promise: Promise<void>; resolve: () => void } | undefined;
  let writes = 0;
  h.ctx.job = {
    ...h.ctx.job,
    write: async (_p: number, records: ReadonlyArray<{ record: SourceRecord }>) => {
      const offsets = records.map((r) => String(r.record.offset)).join(',');
      writes++;
      if (writes === 2) {
        order.push(`rewrite ${offsets} starts`);
        await rewrite!.promise;
      }
      order.push(`rows ${offsets}`);
    },
  } as Job<unknown>;
  let failCheckpoint = true;
  h.ctx.checkpoints = {
    write: async (_p: number, next: bigint) => {
      if (failCheckpoint) {
        failCheckpoint = false;
        throw new Error('connection lost');
      }
      order.push(`checkpoint ${next}`);
    },
    readOne: async () => ({ next: 0n, epoch: 0 }),
  } as unknown as CheckpointStore;
  let release!: () => void;
  rewrite = { promise: new Promise<void>((r) => (release = r)), resolve: () => release() };
  const task = new PartitionTask(0, 0n, { ...h.ctx, lostWrites }, 0);
  await task.process([rec(0n), rec(1n)]);
  for (let i = 0; i < 100 && !order.includes('rewrite 0,1 starts'); i++) await new Promise((r) => setTimeout(r, 1));
  assert.deepEqual(order, ['rows 0,1', 'rewrite 0,1 starts']);
  // Batch 2..3 arrives while batch 0..1's checkpoint, retried across the outage, writes its rows again.
  const second = task.process([rec(2n), rec(3n)]);
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(order, ['rows 0,1', 'rewrite 0,1 starts'], 'the next batch has not written while the rewrite is in flight');
  rewrite.resolve();
  await second;
  await task.flush();
  assert.deepEqual(order, ['rows 0,1', 'rewrite 0,1 starts', 'rows 0,1', 'checkpoint 2', 'rows 2,3', 'checkpoint 4']);
});

test("a stop's way out names the job (`--job`) unless it is the events job, which the operator commands address by default", async () => {
  for (const [legacyTables, want] of [
    [false, '`exactlyonce checkpoints reset --job test --partition 0 --to earliest`'],
    [true, '`exactlyonce checkpoints reset --partition 0 --to earliest`'],
  ] as const) {
    const h = harness(50n);
    const errors: string[] = [];
    const task = new PartitionTask(0, 10n, { ...h.ctx, job: { ...h.ctx.job, legacyTables }, onStop: (_p, _e, err) => void errors.push(err.message) }, 0);
    await task.process([rec(60n)]);
    assert.equal(task.status.error?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
    assert.ok(errors[0]!.includes(want), errors[0]);
    assert.equal(task.status.error?.message, errors[0]);
  }
});

test('rows acknowledged while the quarantine rows of their batch are retried across an outage count as acknowledged before it: written again before the checkpoint (chaos lost 467 rows so)', async () => {
  const h = harness();
  const lostWrites = new LostWrites();
  h.ctx.withRetry = retryCountingOutages(lostWrites);
  let failQuarantine = true;
  h.ctx.quarantine = {
    write: async (e: readonly QuarantineEntry[]) => {
      // The rows were acknowledged just before the crash; the quarantine write was cut by it.
      await new Promise((r) => setTimeout(r, 5));
      if (failQuarantine) {
        failQuarantine = false;
        throw new Error('Socket was closed');
      }
      h.quarantined.push(...e.map((x) => x.record.offset));
    },
  } as unknown as Quarantine;
  h.ctx.checkpoints = {
    write: async (_p: number, next: bigint) => void h.checkpoints.push(next),
    readOne: async () => ({ next: 0n, epoch: 0 }),
  } as unknown as CheckpointStore;
  const task = new PartitionTask(0, 0n, { ...h.ctx, lostWrites }, 0);
  await task.process([rec(0n), rec(1n, 'bad'), rec(2n)]);
  await task.flush();
  assert.deepEqual(h.written, [0n, 2n, 0n, 2n], 'written again before the checkpoint');
  assert.deepEqual(h.quarantined, [1n, 1n]);
  assert.deepEqual(h.checkpoints, [3n]);
});

test('a batch refused for good names the one record the store refuses: prefixes are written again in order, nothing after it', async () => {
  const h = harness();
  const tried: string[] = [];
  h.ctx.job = {
    ...h.ctx.job,
    write: async (_p, records) => {
      const offsets = records.map((r) => r.record.offset);
      tried.push(offsets.join(','));
      if (offsets.includes(13n)) throw Object.assign(new Error('Key length of 70000 is longer than maximum of 65535'), { code: 0x2200 });
      h.written.push(...offsets);
    },
  };
  const task = new PartitionTask(0, 10n, h.ctx, 0);
  await assert.rejects(task.process([...Array(10).keys()].map((i) => rec(10n + BigInt(i)))), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'EO_PERMANENT_ERROR');
    assert.match(e.message, /^partition 0: a write of the record at offset 13 failed for good \(Error: Key length of 70000/);
    assert.match(e.message, /quarantine it by hand: `exactlyonce quarantine add --partition 0 --offset 13`/);
    return true;
  });
  assert.deepEqual(h.written, [10n, 11n, 12n], 'the records before it are stored, in order; none after it');
  assert.deepEqual(tried, ['10,11,12,13,14,15,16,17,18,19', '10,11,12,13,14', '10,11', '12', '13']);
  assert.deepEqual(h.checkpoints, [], 'the checkpoint does not move');
});

test('a refusal of records together (a batch too large), not of one alone, names the batch', async () => {
  const h = harness();
  h.ctx.job = {
    ...h.ctx.job,
    write: async (_p, records) => {
      if (records.length > 4) throw Object.assign(new Error('Batch too large'), { code: 0x2200 });
      h.written.push(...records.map((r) => r.record.offset));
    },
  };
  const task = new PartitionTask(0, 10n, h.ctx, 0);
  await assert.rejects(task.process([...Array(10).keys()].map((i) => rec(10n + BigInt(i)))), /^EO_PERMANENT_ERROR|partition 0: a write of offsets 10\.\.19 failed for good \(Error: Batch too large\)/);
  assert.deepEqual(h.checkpoints, []);
});

test('a record the store refuses that an operator quarantined by hand is passed over: the records after it are written, in order, and the checkpoint passes it', async () => {
  const h = harness();
  h.byHand.push(13n, 17n);
  h.ctx.job = {
    ...h.ctx.job,
    write: async (_p, records) => {
      const offsets = records.map((r) => r.record.offset);
      if (offsets.includes(13n) || offsets.includes(17n)) throw Object.assign(new Error('Key length of 70000 is longer than maximum of 65535'), { code: 0x2200 });
      h.written.push(...offsets);
    },
  };
  const task = new PartitionTask(0, 10n, h.ctx, 0);
  await task.process([...Array(10).keys()].map((i) => rec(10n + BigInt(i))));
  await task.flush();
  assert.deepEqual(h.written, [10n, 11n, 12n, 14n, 15n, 16n, 18n, 19n]);
  assert.deepEqual(h.checkpoints, [20n]);
  assert.equal(task.status.state, 'running');
});
