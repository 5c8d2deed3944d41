import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Counter, Registry } from 'prom-client';
import type { BenchProcess } from '../../bench/processes.js';
import { readWorkers, stagesBetween, workerLoopBetween, type StageTotals, type WorkerReading } from '../../bench/stages.js';

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

test("the worker's loop in a window: collections of every kind between the two readings, those over 10 ms from the buckets, and the delay the second reading reports", () => {
  const from: WorkerReading = {
    stages: {},
    identityChecks: 0,
    gc: { minor: { count: 50, sum: 0.1, buckets: { '0.001': 10, '0.01': 50, '0.1': 50, '+Inf': 50 } } },
    loopDelay: { p99Ms: 200, maxMs: 900 }, // since the process started: not the window's
  };
  const to: WorkerReading = {
    stages: {},
    identityChecks: 0,
    gc: {
      minor: { count: 80, sum: 0.16, buckets: { '0.001': 12, '0.01': 78, '0.1': 80, '+Inf': 80 } },
      major: { count: 1, sum: 0.035, buckets: { '0.001': 0, '0.01': 0, '0.1': 1, '+Inf': 1 } },
    },
    loopDelay: { p99Ms: 12.34, maxMs: 48.26 },
  };
  assert.deepEqual(workerLoopBetween(from, to), { delayP99Ms: 12.3, delayMaxMs: 48.3, gcCount: 31, gcSeconds: 0.095, gcOver10Ms: 3 });
});

test("readWorkers reads prom-client's own default metrics: the event-loop delay since the last reading, and the GC histogram by kind", async (t) => {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'exactlyonce_' });
  const checks = new Counter({ name: 'exactlyonce_identity_checks_total', help: 'as the worker serves it', registers: [registry] });
  const server = createServer((_req, res) => void registry.metrics().then((text) => res.end(text)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const metricsPort = (server.address() as AddressInfo).port;
  const procs = [{ metricsPort }] as unknown as BenchProcess[];
  await readWorkers(procs);
  // Garbage for the young generation, and the loop held up for 500 ms.
  let kept = 0;
  for (let i = 0; i < 200_000; i++) kept += [i, String(i)].length;
  await new Promise((resolve) => setTimeout(resolve, 50));
  const until = performance.now() + 500;
  while (performance.now() < until);
  await new Promise((resolve) => setTimeout(resolve, 100));
  const reading = await readWorkers(procs);
  assert.equal(kept, 400_000);
  assert.equal(reading.identityChecks, 0);
  checks.inc(3);
  assert.equal((await readWorkers(procs)).identityChecks, 3);
  assert.ok(reading.loopDelay !== undefined && reading.loopDelay.maxMs >= 500, `max delay ${reading.loopDelay?.maxMs} ms`);
  assert.ok((reading.gc['minor']?.count ?? 0) > 0, 'minor collections counted');
  assert.deepEqual(Object.keys(reading.gc['minor']!.buckets!).sort(), ['+Inf', '0.001', '0.01', '0.1', '1', '2', '5']);
  // The delay restarts at each reading: the next one, with the loop free, no longer shows the 500 ms.
  await new Promise((resolve) => setTimeout(resolve, 200));
  const next = await readWorkers(procs);
  assert.ok(next.loopDelay!.maxMs < 500, `max delay after the reading ${next.loopDelay!.maxMs} ms`);
});
