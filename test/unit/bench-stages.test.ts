import assert from 'node:assert/strict';
import { test } from 'node:test';
import { stagesBetween, type StageTotals } from '../../bench/stages.js';

test("a stage's window mean and p99 come from the histogram read at the window's two ends, not from what came before it", () => {
  // Before the window: 100 batches, all under 1 ms (they must not pull the window's p99 down).
  const from: StageTotals = { rows: { count: 100, sum: 0.05, buckets: { '0.001': 100, '0.01': 100, '0.1': 100, '+Inf': 100 } } };
  // In the window: 100 more, 90 between 1 and 10 ms and 10 between 10 and 100 ms.
  const to: StageTotals = {
    rows: { count: 200, sum: 0.05 + 0.9, buckets: { '0.001': 100, '0.01': 190, '0.1': 200, '+Inf': 200 } },
    idle: { count: 5, sum: 0.005 },
  };
  const w = stagesBetween(from, to);
  // rank 99 of 100: the 9th of the 10 in (10 ms, 100 ms], interpolated as Prometheus does: 10 + 90 × 9/10.
  assert.deepEqual(w['rows'], { batches: 100, meanMs: 9, p99Ms: 91 });
  // A stage served without buckets has a mean only.
  assert.deepEqual(w['idle'], { batches: 5, meanMs: 1 });
});
