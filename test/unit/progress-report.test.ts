import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EngineMetrics } from '../../src/engine/metrics.js';
import { progressLine, progressSnapshot } from '../../src/engine/progress-report.js';

test("the progress line reads the worker's own metrics: stored, quarantined, lag over owned partitions, stopped ones named", async () => {
  const m = new EngineMetrics(false);
  assert.equal(progressLine(undefined, await progressSnapshot(m), 10), 'progress: 0 records stored, 0 quarantined, lag unknown, no partitions owned (yet)');
  for (const p of ['0', '1', '2']) m.owned.set({ partition: p }, 1);
  const first = await progressSnapshot(m);
  m.stored.inc({ partition: '0' }, 70);
  m.stored.inc({ partition: '2' }, 30);
  m.quarantined.inc({ partition: '1', reason: 'bad_json' }, 2);
  m.quarantined.inc({ partition: '2', reason: 'missing_field' });
  m.lag.set({ partition: '0' }, 5);
  m.lag.set({ partition: '1' }, 7);
  m.stoppedPartitions.set({ partition: '1' }, 1);
  m.stoppedPartitions.set({ partition: '0' }, 0);
  assert.equal(progressLine(first, await progressSnapshot(m), 10), 'progress: 100 records stored (+100 in 10 s), 3 quarantined, lag 12, partitions 0,1,2; stopped: 1 (exactlyonce status says why)');
});
