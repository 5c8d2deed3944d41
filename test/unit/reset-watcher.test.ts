// `checkpoints reset`, `--rebind` and a settings change picked up while running (ResetWatcher over the
// fake engine and a fake consumer). No servers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BoundJob } from '../../src/engine/job-binding.js';
import { ResetWatcher } from '../../src/engine/reset-watcher.js';
import { fakeEngine, twoPartitions } from './engine-fakes.js';

function watcher(engine: ReturnType<typeof fakeEngine>, stored: () => Partial<BoundJob>) {
  const calls: string[] = [];
  const w = new ResetWatcher({
    topic: 't',
    keyspace: 'ks',
    settings: {},
    readJob: async () => ({ name: 'test', inputTopic: 't', inputTopicId: 'topic-A', inputPartitions: null, outputTopics: [], settings: {}, ...stored() }),
    checkpoints: engine.store,
    planner: engine.planner,
    tasks: engine.tasks,
    binding: engine.binding,
    consumer: { pause: (ps) => void calls.push(`pause ${ps.join(',')}`), restartAt: (p, o) => void calls.push(`restartAt ${p}:${o}`) },
    log: engine.log,
    workerId: 'w1',
  });
  return { w, calls };
}

test('a partition reset to a higher epoch gets a new task at the stored offset and epoch, and the consumer is moved there', async () => {
  const engine = fakeEngine({ stored: new Map([[0, { next: 5n, epoch: 0 }]]), marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }] });
  await engine.tasks.assign([0]);
  const old = engine.tasks.tasks.get(0)!;
  const { w, calls } = watcher(engine, () => ({}));
  await w.tick();
  assert.deepEqual(calls, [], 'nothing reset yet');
  engine.world.stored.set(0, { next: 2n, epoch: 1 });
  await w.tick();
  assert.deepEqual(calls, ['restartAt 0:2']);
  const now = engine.tasks.tasks.get(0)!;
  assert.notEqual(now, old);
  assert.deepEqual([old.status.state, now.status.state, now.status.next, now.epoch], ['revoked', 'running', 2n, 1]);
  // A reset beyond the log end stops the partition instead, as an assignment would.
  engine.world.stored.set(0, { next: 50n, epoch: 2 });
  await w.tick();
  assert.deepEqual(calls, ['restartAt 0:2', 'pause 0']);
  assert.equal(engine.tasks.tasks.get(0)!.status.error?.code, 'EO_CHECKPOINT_OUT_OF_RANGE');
});

test('a rebind to the re-created topic plans the stopped partitions again', async () => {
  const engine = fakeEngine({ stored: new Map([[0, { next: 5n, epoch: 0 }]]), marks: [{ partition: 0, low: 0n, high: 10n, stable: 10n }], topicId: 'topic-B' }, { bound: 'topic-A' });
  await engine.tasks.assign([0]);
  assert.equal(engine.tasks.tasks.get(0)!.status.error?.code, 'EO_TOPIC_RECREATED');
  let inputTopicId = 'topic-A';
  const { w, calls } = watcher(engine, () => ({ inputTopicId }));
  engine.world.stored.set(0, { next: 0n, epoch: 1 }); // `checkpoints reset --all --to earliest --rebind`
  inputTopicId = 'topic-B';
  await w.tick();
  assert.equal(engine.binding.topicId, 'topic-B');
  assert.deepEqual(calls, ['restartAt 0:0']);
  assert.deepEqual(engine.tasks.tasks.get(0)!.status, { state: 'running', next: 0n, error: undefined });
});

test("the job's settings changed under the worker: every partition stops, once", async () => {
  const engine = fakeEngine({
    ...twoPartitions([5n, 5n]),
  });
  await engine.tasks.assign([0, 1]);
  const { w, calls } = watcher(engine, () => ({ settings: { maxRecordBytes: 10 } }));
  await w.tick();
  await w.tick();
  assert.deepEqual(calls, ['pause 0,1']);
  assert.deepEqual(engine.world.events, ['stop 0:EO_JOB_CONFIG_MISMATCH', 'stop 1:EO_JOB_CONFIG_MISMATCH']);
  assert.match(engine.tasks.tasks.get(0)!.status.error!.message, /^the job's settings stored in keyspace ks changed under this worker: /);
  // A later assignment stops with the same error.
  await engine.tasks.assign([2]);
  assert.equal(engine.tasks.tasks.get(2)!.status.error, engine.binding.settingsChanged);
});
