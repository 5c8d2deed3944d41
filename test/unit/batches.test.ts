// src/cassandra/batches.ts: rows cut into batches by count and by bytes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cutBatches } from '../../src/cassandra/batches.js';

test('cutBatches: runs in order, at most maxRows each and at most maxBytes, an oversized item alone', () => {
  const sizes = [10, 10, 10, 10, 10, 35, 10, 50, 1];
  const cut = (maxRows: number, maxBytes: number) => cutBatches(sizes.map((size, i) => ({ i, size })), maxRows, maxBytes, (x) => x.size).map((b) => b.map((x) => x.i));
  assert.deepEqual(cut(3, 1000), [[0, 1, 2], [3, 4, 5], [6, 7, 8]]);
  assert.deepEqual(cut(100, 30), [[0, 1, 2], [3, 4], [5], [6], [7], [8]]);
  assert.deepEqual(cut(2, 25), [[0, 1], [2, 3], [4], [5], [6], [7], [8]]);
  assert.deepEqual(cutBatches([], 10, 10, () => 1), []);
});
