// The checks while running (PositionWatcher over the fake engine and a fake consumer): a position
// beyond the log end stops at once, one below the log start only once it stands still, a re-created
// topic stops every partition. No servers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PositionWatcher } from '../../src/engine/position-watcher.js';
import { fakeEngine, twoPartitions } from './engine-fakes.js';

async function running() {
  const engine = fakeEngine({
    ...twoPartitions([5n, 5n]),
  });
  await engine.tasks.assign([0, 1]);
  const paused: number[][] = [];
  const watcher = new PositionWatcher({
    topic: 't',
    admin: engine.admin,
    tasks: () => engine.tasks.tasks,
    binding: engine.binding,
    consumer: { pause: (ps) => void paused.push(ps), restartAt: () => assert.fail('not moved') },
  });
  return { engine, watcher, paused };
}

test('a position beyond the log end (the log was truncated) stops the partition at once, quoting the client', async () => {
  const { engine, watcher, paused } = await running();
  engine.world.marks = [
    { partition: 0, low: 0n, high: 3n, stable: 3n },
    { partition: 1, low: 0n, high: 10n, stable: 10n },
  ];
  await watcher.check('Broker: Offset out of range');
  assert.deepEqual(paused, [[0]]);
  const error = engine.tasks.tasks.get(0)!.status.error!;
  assert.equal(error.code, 'EO_POSITION_OUT_OF_RANGE');
  assert.match(error.message, /^partition 0: offset 5 is outside the log \[0, 3\] \(the Kafka client: Broker: Offset out of range\): the log was truncated or re-created/);
  assert.equal(engine.tasks.tasks.get(1)!.status.state, 'running');
});

test('a position below the log start stops the partition only once it stood still between two checks', async () => {
  const { engine, watcher, paused } = await running();
  engine.world.marks = [
    { partition: 0, low: 8n, high: 10n, stable: 10n },
    { partition: 1, low: 0n, high: 10n, stable: 10n },
  ];
  await watcher.check();
  assert.deepEqual(paused, [[]], 'first sight: the next batch may still come from the prefetch');
  await watcher.check();
  assert.deepEqual(paused, [[], [0]]);
  assert.match(engine.tasks.tasks.get(0)!.status.error!.message, /^partition 0: offset 5 is outside the log \[8, 10\]: the log was deleted/);
});

test('a topic re-created under the running worker stops every partition', async () => {
  const { engine, watcher, paused } = await running();
  engine.world.topicId = 'topic-B';
  await watcher.check();
  assert.deepEqual(paused, [[0, 1]]);
  assert.deepEqual(engine.world.events, ['stop 0:EO_TOPIC_RECREATED', 'stop 1:EO_TOPIC_RECREATED']);
});
