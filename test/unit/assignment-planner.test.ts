// Where an assigned partition resumes, or why it stops (AssignmentPlanner through the TaskManager, as
// the consumer's assignment callback calls it), with a fake checkpoint store and a fake Kafka admin.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startError } from '../../src/engine/assignment-planner.js';
import { ExactlyOnceError } from '../../src/errors.js';
import { fakeEngine, series, settle, twoPartitions } from './engine-fakes.js';

const state = (tasks: ReturnType<typeof fakeEngine>['tasks']) =>
  Object.fromEntries([...tasks.tasks].map(([p, t]) => [p, { state: t.status.state, next: t.status.next, epoch: t.epoch, code: t.status.error?.code }]));

test('assignment resumes each partition at its stored checkpoint and epoch; one never checkpointed starts at the log start', async () => {
  const { tasks, metrics, world } = fakeEngine({
    stored: new Map([
      [0, { next: 42n, epoch: 3 }],
      [1, { next: 100n, epoch: 0 }], // exactly at the log end: nothing new yet, not out of range
    ]),
    marks: [
      { partition: 0, low: 0n, high: 50n, stable: 50n },
      { partition: 1, low: 0n, high: 100n, stable: 100n },
      { partition: 2, low: 10n, high: 20n, stable: 20n },
    ],
  });
  const starts = await tasks.assign([0, 1, 2]);
  assert.deepEqual(starts, new Map<number, unknown>([[0, 42n], [1, 100n], [2, 'beginning']]));
  assert.deepEqual(state(tasks), {
    0: { state: 'running', next: 42n, epoch: 3, code: undefined },
    1: { state: 'running', next: 100n, epoch: 0, code: undefined },
    2: { state: 'running', next: null, epoch: 0, code: undefined },
  });
  assert.deepEqual(world.events, []);
  assert.deepEqual(await series(metrics, 'lag_records'), [
    'exactlyonce_lag_records{partition="0"} 8',
    'exactlyonce_lag_records{partition="1"} 0',
    'exactlyonce_lag_records{partition="2"} 10',
  ]);
  // The task writes its checkpoints in the epoch it was read with (a reset's higher epoch wins over them).
  await tasks.process(0, [{ topic: 't', partition: 0, offset: 42n, key: null, value: Buffer.from('ok'), timestampMs: 0 }]);
  assert.deepEqual(world.events, ['rows 0:42', 'checkpoint 0:43@3']);
});

test('a checkpoint beyond the log end stops its partition; the others resume', async () => {
  const { tasks, world, metrics } = fakeEngine({
    ...twoPartitions([50n, 5n], [0n, 10n]),
  });
  const starts = await tasks.assign([0, 1]);
  assert.deepEqual(starts, new Map<number, unknown>([[0, 'stopped'], [1, 5n]]));
  assert.equal(tasks.tasks.get(0)!.status.error?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.match(tasks.tasks.get(0)!.status.error!.message, /^partition 0: checkpoint 50 is beyond the log end 0 \(was the topic deleted and re-created\?\)/);
  assert.equal(tasks.tasks.get(0)!.status.next, 50n, 'the checkpoint stays where it is');
  assert.equal(tasks.tasks.get(1)!.status.state, 'running');
  assert.deepEqual(world.events, ['stop 0:EO_CHECKPOINT_OUT_OF_RANGE']);
  assert.deepEqual(await series(metrics, 'partition_stops_total'), ['exactlyonce_partition_stops_total{code="EO_CHECKPOINT_OUT_OF_RANGE"} 1']);
  // A batch the client still hands over for the stopped partition is not stored.
  assert.equal(await tasks.process(0, [{ topic: 't', partition: 0, offset: 0n, key: null, value: Buffer.from('ok'), timestampMs: 0 }]), true);
  assert.deepEqual(world.events, ['stop 0:EO_CHECKPOINT_OUT_OF_RANGE']);
});

test('a checkpoint below the log start (records deleted before they were read) stops its partition', async () => {
  const { tasks, world } = fakeEngine({
    stored: new Map([[0, { next: 3n, epoch: 1 }]]),
    marks: [{ partition: 0, low: 10n, high: 20n, stable: 20n }],
  });
  assert.deepEqual(await tasks.assign([0]), new Map([[0, 'stopped']]));
  const error = tasks.tasks.get(0)!.status.error!;
  assert.equal(error.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.match(error.message, /^partition 0: checkpoint 3 is below the log start 10: records 3\.\.9 were deleted \(retention\) before they were processed/);
  assert.deepEqual(world.events, ['stop 0:EO_CHECKPOINT_OUT_OF_RANGE']);
});

test('a checkpoint beyond 2^53 stops its partition: the client could not seek there', async () => {
  const big = 2n ** 53n + 1n;
  const { tasks } = fakeEngine({ stored: new Map([[0, { next: big, epoch: 0 }]]), marks: [{ partition: 0, low: 0n, high: big, stable: big }] });
  assert.deepEqual(await tasks.assign([0]), new Map([[0, 'stopped']]));
  assert.match(tasks.tasks.get(0)!.status.error!.message, /^partition 0: checkpoint 9007199254740993 is beyond 2\^53/);
});

test('a topic re-created under the job (a new topic ID) stops every assigned partition, checkpointed or not', async () => {
  const { tasks, world } = fakeEngine(
    { stored: new Map([[0, { next: 5n, epoch: 0 }]]), marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }, { partition: 1, low: 0n, high: 10n, stable: 10n }], topicId: 'topic-B' },
    { bound: 'topic-A' },
  );
  assert.deepEqual(await tasks.assign([0, 1]), new Map([[0, 'stopped'], [1, 'stopped']]));
  for (const p of [0, 1]) {
    assert.equal(tasks.tasks.get(p)!.status.error?.code, 'EO_TOPIC_RECREATED');
    assert.match(tasks.tasks.get(p)!.status.error!.message, /checkpoints belong to topic ID topic-A, the topic now has ID topic-B/);
  }
  assert.deepEqual(world.events, ['stop 0:EO_TOPIC_RECREATED', 'stop 1:EO_TOPIC_RECREATED']);
});

test("the job's settings changed under the worker: every assigned partition stops with that error", async () => {
  const changed = new ExactlyOnceError('EO_JOB_CONFIG_MISMATCH', 'settings changed');
  const { tasks } = fakeEngine({ marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }] }, { settingsChanged: changed });
  assert.deepEqual(await tasks.assign([0]), new Map([[0, 'stopped']]));
  assert.equal(tasks.tasks.get(0)!.status.error, changed);
});

test('a failure while planning stops the partitions with EO_ASSIGNMENT_FAILED, never a default position', async () => {
  // Kafka answers, but not what the planner needs (a permanent error: not retried).
  const watermarksFail = fakeEngine({ stored: new Map([[0, { next: 5n, epoch: 0 }]]), marksError: new TypeError('fetchTopicOffsets is not a function') });
  // Cassandra refuses the read for good.
  const readFails = fakeEngine({ readError: new ExactlyOnceError('EO_CASSANDRA_QUERY', 'keyspace ks does not exist') });
  for (const [{ tasks, world }, cause] of [
    [watermarksFail, 'fetchTopicOffsets is not a function'],
    [readFails, 'keyspace ks does not exist'],
  ] as const) {
    const starts = await tasks.assign([0, 1]);
    assert.deepEqual(starts, new Map([[0, 'stopped'], [1, 'stopped']]));
    for (const p of [0, 1]) {
      const error = tasks.tasks.get(p)!.status.error!;
      assert.equal(error.code, 'EO_ASSIGNMENT_FAILED');
      assert.equal(
        error.message,
        `partitions 0,1: planning where they resume failed (${cause}); they are stopped, not read from a default position. Restart the worker once the cause is fixed`,
      );
      assert.equal(tasks.tasks.get(p)!.epoch, undefined, 'a task whose checkpoint was not read never writes one');
    }
    assert.deepEqual(world.events, ['stop 0:EO_ASSIGNMENT_FAILED', 'stop 1:EO_ASSIGNMENT_FAILED']);
  }
});

test('shutdown while planning (the checkpoint read still retrying): nothing is read and nothing is stopped', async () => {
  const abort = new AbortController();
  const { tasks, world } = fakeEngine({ readError: new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', 'down') }, { signal: abort.signal });
  const planning = tasks.assign([0]);
  await settle(10);
  abort.abort();
  assert.deepEqual(await planning, new Map([[0, 'stopped']]));
  assert.equal(tasks.tasks.get(0)!.status.state, 'revoked');
  assert.deepEqual(world.events, []);
});

test('a reset picked up while running is checked like an assignment (planResets)', async () => {
  const { planner, world } = fakeEngine({
    marks: [
      { partition: 0, low: 0n, high: 10n, stable: 10n },
      { partition: 1, low: 0n, high: 10n, stable: 10n },
      { partition: 2, low: 5n, high: 10n, stable: 10n },
    ],
  });
  const plans = await planner.planResets(
    new Map([
      [0, { next: 7n, epoch: 2 }],
      [1, { next: 11n, epoch: 2 }],
      [2, { next: 4n, epoch: 2 }],
    ]),
  );
  assert.deepEqual(
    plans.map((p) => [p.partition, p.checkpoint, p.epoch, p.stop?.code ?? null]),
    [
      [0, 7n, 2, null],
      [1, 11n, 2, 'EO_CHECKPOINT_OUT_OF_RANGE'],
      [2, 4n, 2, 'EO_CHECKPOINT_OUT_OF_RANGE'],
    ],
  );
  world.topicId = 'topic-B';
  const [recreated] = await planner.planResets(new Map([[0, { next: 7n, epoch: 3 }]]));
  assert.equal(recreated!.stop?.code, 'EO_TOPIC_RECREATED');
});

test('startError: the log bounds are inclusive at the end, a never-checkpointed partition is always readable', () => {
  const topic = { name: 't', bound: 'A', now: 'A' };
  const marks = { partition: 0, low: 10n, high: 20n, stable: 20n };
  assert.equal(startError(0, 10n, marks, topic), null);
  assert.equal(startError(0, 20n, marks, topic), null);
  assert.equal(startError(0, 21n, marks, topic)?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.equal(startError(0, 9n, marks, topic)?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
  assert.equal(startError(0, null, marks, topic), null);
  assert.equal(startError(0, 15n, undefined, topic), null, 'no watermarks reported: nothing to check against');
  assert.equal(startError(0, 15n, marks, { name: 't', bound: 'A', now: null }), null, 'a topic gone for now is left to the group');
  assert.equal(startError(0, 15n, marks, { name: 't', bound: undefined, now: 'B' }), null, 'not bound yet');
});

test('settings changed since the worker started (a command marked them): the assigned partitions stop with the coded error, after the worker is recorded as their owner', async () => {
  const calls: string[] = [];
  let changed: ExactlyOnceError | null = null;
  const { tasks, world } = fakeEngine(twoPartitions([5n, 7n], [10n, 10n]), {
    settingsNow: async (assigned) => {
      calls.push(`owner ${assigned.join(',')}, then settings`);
      return changed;
    },
  });
  assert.deepEqual(await tasks.assign([0]), new Map<number, unknown>([[0, 5n]]));
  changed = new ExactlyOnceError('EO_JOB_CONFIG_MISMATCH', "the job's settings stored in keyspace k changed under this worker: columnsMoving: the job has \"started\", this worker none");
  assert.deepEqual(await tasks.assign([1]), new Map<number, unknown>([[1, 'stopped']]));
  assert.deepEqual(calls, ['owner 0, then settings', 'owner 1, then settings']);
  assert.equal(tasks.tasks.get(1)!.status.error, changed);
  assert.equal(tasks.tasks.get(1)!.status.next, 7n, 'the checkpoint stays where it is');
  assert.equal(tasks.tasks.get(0)!.status.state, 'running', 'a partition planned before the change is the ResetWatcher\'s to stop');
  assert.deepEqual(world.events, ['stop 1:EO_JOB_CONFIG_MISMATCH']);
});
