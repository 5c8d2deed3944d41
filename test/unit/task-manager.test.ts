// Rebalances and shutdown while batches are in flight (TaskManager and PartitionTask over fakes whose
// writes complete when the test says so). No servers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ExactlyOnceError } from '../../src/errors.js';
import { deferred, fakeEngine, rec, series, settle, twoPartitions } from './engine-fakes.js';

test('revoke during an in-flight batch: the batch finishes rows-then-checkpoint, nothing new starts, the partition leaves /metrics', async () => {
  const rows = deferred();
  let writes = 0;
  const { tasks, world, metrics } = fakeEngine({
    stored: new Map([[0, { next: 0n, epoch: 0 }]]),
    marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }],
    write: async () => {
      writes++;
      await rows.promise;
    },
  });
  await tasks.assign([0]);
  const task = tasks.tasks.get(0)!;
  const inFlight = tasks.process(0, [rec(0n), rec(1n)]);
  await settle();
  assert.equal(writes, 1);

  tasks.revoke([0], false);
  assert.equal(task.status.state, 'revoked');
  assert.equal(tasks.tasks.has(0), false);
  // The next batch the client hands over for the revoked partition is dropped: no rows, no checkpoint.
  assert.equal(await tasks.process(0, [rec(2n)]), false);
  assert.equal(writes, 1);

  rows.resolve();
  assert.equal(await inFlight, false);
  // The batch already started finishes (its rows are idempotent, and its checkpoint carries the epoch it
  // was read in: a reset's higher epoch would win over it), rows first.
  assert.deepEqual(world.events, ['rows 0:0,1', 'checkpoint 0:2@0']);
  // Its late checkpoint does not bring the revoked partition's series back.
  for (const name of ['partition_owned', 'checkpoint_offset', 'log_end_offset', 'lag_records', 'partition_stopped']) {
    assert.deepEqual(await series(metrics, name), [], name);
  }
  assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns no partition' });
});

test('shutdown with batches in flight: a healthy batch finishes with its checkpoint; one still retrying is abandoned before its checkpoint, not stopped', async () => {
  const abort = new AbortController();
  const healthy = deferred();
  let failedAttempts = 0;
  const { tasks, world, metrics } = fakeEngine(
    {
      ...twoPartitions([0n, 0n]),
      write: async (p) => {
        if (p === 0) return healthy.promise;
        failedAttempts++;
        throw new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', 'Cassandra at 127.0.0.1:9042 is not reachable');
      },
    },
    { signal: abort.signal },
  );
  await tasks.assign([0, 1]);
  const batch0 = tasks.process(0, [rec(0n, 'ok', 0), rec(1n, 'ok', 0)]);
  const batch1 = tasks.process(1, [rec(0n, 'ok', 1)]);
  while (failedAttempts < 2) await settle(1);

  abort.abort(); // Runner.stop(): retries end, first attempts still run
  healthy.resolve();
  assert.deepEqual(await Promise.all([batch0, batch1]), [false, false]);

  assert.deepEqual(world.events, ['rows 0:0,1', 'checkpoint 0:2@0'], 'partition 1 has no checkpoint: the next owner reads its batch again');
  assert.equal(tasks.tasks.get(0)!.status.next, 2n);
  assert.deepEqual(tasks.tasks.get(1)!.status, { state: 'running', next: 0n, error: undefined }, 'abandoned, not stopped');
  assert.deepEqual(await series(metrics, 'partition_stops_total'), []);
});

test("shutdown: a job's write that throws on the aborted signal (the platform's AbortError, as the sink's does) abandons the batch, never a coded stop", async () => {
  const abort = new AbortController();
  const { tasks, world, metrics } = fakeEngine(
    {
      ...twoPartitions([0n, 0n]),
      write: async (_p, _records, signal) => {
        abort.abort(); // Runner.stop() while the write runs
        signal.throwIfAborted();
      },
    },
    { signal: abort.signal },
  );
  await tasks.assign([0]);
  assert.equal(await tasks.process(0, [rec(0n, 'ok', 0), rec(1n, 'ok', 0)]), false);
  assert.deepEqual(world.events, [], 'no checkpoint, no stop, nothing quarantined: the next owner reads the batch again');
  assert.deepEqual(tasks.tasks.get(0)!.status, { state: 'running', next: 0n, error: undefined });
  assert.deepEqual(await series(metrics, 'partition_stops_total'), []);
});

test('an error no retry can fix stops the partition at its checkpoint (EO_PERMANENT_ERROR) and the poll loop is told to pause it', async () => {
  const { tasks, world } = fakeEngine({
    stored: new Map([[0, { next: 5n, epoch: 0 }]]),
    marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }],
    write: async () => {
      throw Object.assign(new Error('Undefined column name x'), { name: 'ResponseError', code: 0x2200 });
    },
  });
  await tasks.assign([0]);
  assert.equal(await tasks.process(0, [rec(5n), rec(6n), rec(8n)]), true);
  const { state, next, error } = tasks.tasks.get(0)!.status;
  assert.deepEqual([state, next, error?.code], ['stopped', 5n, 'EO_PERMANENT_ERROR']);
  // It names the first record the store refuses (every one, here: the batch was written again by halves).
  assert.match(error!.message, /^partition 0: a write of the record at offset 5 failed for good \(ResponseError: Undefined column name x\); retrying cannot fix it/);
  assert.deepEqual(world.events, ['stop 0:EO_PERMANENT_ERROR']);
});

test('the Kafka client refuses to assign planned partitions: each stops with EO_ASSIGNMENT_FAILED (metric, stop record), a partition already stopped keeps its own error', async () => {
  const { tasks, world, metrics } = fakeEngine({
    // Partition 1's checkpoint is beyond its log end: its plan stops it before the client is asked.
    stored: new Map([
      [0, { next: 3n, epoch: 0 }],
      [1, { next: 50n, epoch: 0 }],
    ]),
    marks: [
      { partition: 0, low: 0n, high: 10n, stable: 10n },
      { partition: 1, low: 0n, high: 10n, stable: 10n },
    ],
  });
  assert.deepEqual(await tasks.assign([0, 1]), new Map<number, unknown>([[0, 3n], [1, 'stopped']]));
  assert.deepEqual(world.events, ['stop 1:EO_CHECKPOINT_OUT_OF_RANGE']);

  tasks.assignFailed([0, 1], new Error('Local: Erroneous state\nmore'));
  const s0 = tasks.tasks.get(0)!.status;
  assert.deepEqual([s0.state, s0.next, s0.error?.code], ['stopped', 3n, 'EO_ASSIGNMENT_FAILED']);
  assert.equal(s0.error!.message, 'partitions 0,1: the Kafka client could not assign them (Local: Erroneous state); they are stopped, not read. Restart the worker once the cause is fixed');
  assert.equal(tasks.tasks.get(1)!.status.error?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.deepEqual(world.events, ['stop 1:EO_CHECKPOINT_OUT_OF_RANGE', 'stop 0:EO_ASSIGNMENT_FAILED']);
  assert.deepEqual(await series(metrics, 'partition_stops_total'), [
    'exactlyonce_partition_stops_total{code="EO_CHECKPOINT_OUT_OF_RANGE"} 1',
    'exactlyonce_partition_stops_total{code="EO_ASSIGNMENT_FAILED"} 1',
  ]);
  // A batch the client still hands over (it cannot, it holds nothing of them) would write nothing.
  assert.equal(await tasks.process(0, [rec(3n)]), true);
  assert.deepEqual(world.events.filter((e) => e.startsWith('rows')), []);
});
