// The bench's drain timing (bench/drain.ts): what is measured against the rate (the processes' CPU
// time, through `sample`) is read at the poll the rate is counted from. A drain seen whole at its first
// reading is counted from the last poll that saw nothing, and so is its CPU (before, it was read at the
// end and came out 0: the sink's CPU ratio in bench-smoke was then null).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { measureDrain } from '../../bench/drain.js';
import type { BenchContext } from '../../bench/context.js';

const ctx = { options: { caseTimeoutSeconds: 60 }, status: () => undefined, signal: new AbortController().signal } as unknown as BenchContext;

test('measureDrain: a drain over by its first reading takes its baseline from the last poll that saw nothing', async () => {
  const counts = [0, 0, 0, 3000];
  let poll = 0;
  let samples = 0;
  const r = await measureDrain(ctx, { label: 't', total: 3000, progress: async () => counts[Math.min(poll++, counts.length - 1)]!, check: () => undefined, sample: () => ++samples, intervalMs: 5 });
  // Samples: 1 at the start, 2-4 at the three polls that saw nothing, 5 at the one that saw it all.
  assert.equal(samples, 5);
  assert.equal(r.baseline, 4);
  assert.equal(r.countedFrom, 0);
});

test('measureDrain: a drain seen in progress for a second or more takes its baseline from the first poll that saw progress', async () => {
  const started = Date.now();
  let samples = 0;
  const r = await measureDrain(ctx, {
    label: 't',
    total: 1000,
    progress: async () => {
      const t = Date.now() - started;
      return t < 50 ? 0 : t < 1300 ? 100 : 1000;
    },
    check: () => undefined,
    sample: () => ++samples,
    intervalMs: 20,
  });
  assert.equal(r.countedFrom, 100);
  // The sample after the last zero poll's: the first that saw progress.
  assert.equal(r.baseline, samples);
  assert.ok(samples >= 2);
});
