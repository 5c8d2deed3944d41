import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateWindowSpec, windowEnds } from '../../src/jobs/events/windows.js';

const tumbling = { sizeMs: 5000, slideMs: 5000 };

test('tumbling windows: each ts is in exactly one window, named by its end', () => {
  assert.deepEqual(windowEnds(0, tumbling), [5000]);
  assert.deepEqual(windowEnds(1, tumbling), [5000]);
  assert.deepEqual(windowEnds(4999, tumbling), [5000]);
  assert.deepEqual(windowEnds(1_700_000_002_345, tumbling), [1_700_000_005_000]);
});

test('a ts exactly on an edge belongs to the window starting there', () => {
  assert.deepEqual(windowEnds(5000, tumbling), [10000]);
  assert.deepEqual(windowEnds(-5000, tumbling), [0]);
});

test('negative ts (before the epoch) floor correctly', () => {
  assert.deepEqual(windowEnds(-1, tumbling), [0]);
  assert.deepEqual(windowEnds(-4999, tumbling), [0]);
  assert.deepEqual(windowEnds(-5001, tumbling), [-5000]);
});

test('very large and very small ts stay exact', () => {
  const big = 8_640_000_000_000_000; // the largest JS Date
  assert.deepEqual(windowEnds(big, tumbling), [big + 5000]);
  assert.deepEqual(windowEnds(-big, tumbling), [-big + 5000]);
  assert.deepEqual(windowEnds(big - 1, tumbling), [big]);
});

test('sliding windows: an event counts in every window that contains it', () => {
  const sliding = { sizeMs: 5000, slideMs: 1000 };
  assert.deepEqual(windowEnds(0, sliding), [1000, 2000, 3000, 4000, 5000]);
  assert.deepEqual(windowEnds(4500, sliding), [5000, 6000, 7000, 8000, 9000]);
  assert.deepEqual(windowEnds(5000, sliding), [6000, 7000, 8000, 9000, 10000]);
  assert.deepEqual(windowEnds(-1, sliding), [0, 1000, 2000, 3000, 4000]);
  // Every window containing ts satisfies end - size <= ts < end, and no other does.
  for (const ts of [-7777, -1, 0, 1, 999, 1000, 123456789]) {
    for (const spec of [sliding, { sizeMs: 5000, slideMs: 2000 }, { sizeMs: 7, slideMs: 3 }, tumbling]) {
      const ends = windowEnds(ts, spec);
      for (const end of ends) assert.ok(end - spec.sizeMs <= ts && ts < end, `${ts} in ${end} (${JSON.stringify(spec)})`);
      const k0 = Math.floor((ts - 3 * spec.sizeMs) / spec.slideMs);
      const all = Array.from({ length: Math.ceil((6 * spec.sizeMs) / spec.slideMs) }, (_, i) => (k0 + i) * spec.slideMs + spec.sizeMs);
      assert.deepEqual(ends, all.filter((end) => end - spec.sizeMs <= ts && ts < end));
    }
  }
});

test('a slide that does not divide the size', () => {
  // starts 6 and 9: [6,11) and [9,14) contain 10.
  assert.deepEqual(windowEnds(10, { sizeMs: 5, slideMs: 3 }), [11, 14]);
});

test('window specs are validated', () => {
  assert.equal(validateWindowSpec(tumbling), undefined);
  assert.equal(validateWindowSpec({ sizeMs: 5000, slideMs: 5 }), undefined);
  assert.match(validateWindowSpec({ sizeMs: 5000, slideMs: 6000 })!, /slide must not exceed/);
  assert.match(validateWindowSpec({ sizeMs: 5000, slideMs: 4 })!, /at most 1000/);
  assert.match(validateWindowSpec({ sizeMs: 0, slideMs: 1 })!, /size/);
});
