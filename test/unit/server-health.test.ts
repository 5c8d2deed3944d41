// /readyz from src/engine/server-health.ts as the engine feeds it (through the LagWatcher, as a
// PartitionTask's stop does): a worker whose every owned partition is stopped is not ready (issue 43
// item 5); one with some stopped is ready and names them; a new assignment clears a stop.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LagWatcher } from '../../src/engine/lag-watcher.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import { serveMetrics } from '../../src/engine/metrics-server.js';

const marks = { low: 0n, high: 10n, stable: 10n };

test('readiness: every owned partition stopped is 503 naming them and their codes; some stopped is 200 naming them', async (t) => {
  const metrics = new EngineMetrics();
  const lag = new LagWatcher(metrics);
  t.after(() => lag.close());
  lag.partitionAssigned(0, 10n, marks);
  lag.partitionAssigned(1, 10n, marks);
  lag.partitionAssigned(2, 10n, marks);
  assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns partitions 0,1,2' });

  lag.partitionStopped(1, 'EO_TOPIC_RECREATED');
  assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns partitions 0,1,2 (stopped: 1 EO_TOPIC_RECREATED)' });
  lag.partitionStopped(0, 'EO_CHECKPOINT_OUT_OF_RANGE');
  lag.partitionStopped(2, 'EO_PERMANENT_ERROR');
  const allStopped = {
    ready: false,
    detail: 'not ready: every partition it owns is stopped: 0 EO_CHECKPOINT_OUT_OF_RANGE, 1 EO_TOPIC_RECREATED, 2 EO_PERMANENT_ERROR (the error log says why; `exactlyonce checkpoints list` too)',
  };
  assert.deepEqual(metrics.health.readiness(), allStopped);

  // Served as such on /readyz.
  const server = await serveMetrics(metrics, 0, () => true, '127.0.0.1');
  t.after(() => server.close());
  const res = await fetch(`http://127.0.0.1:${(server.address() as { port: number }).port}/readyz`);
  assert.equal(res.status, 503);
  assert.equal(await res.text(), `${allStopped.detail}\n`);

  // A revoked partition leaves the list; the rest are still all stopped.
  lag.partitionRevoked(2);
  assert.deepEqual(metrics.health.readiness(), {
    ready: false,
    detail: 'not ready: every partition it owns is stopped: 0 EO_CHECKPOINT_OUT_OF_RANGE, 1 EO_TOPIC_RECREATED (the error log says why; `exactlyonce checkpoints list` too)',
  });
  // A new task for a stopped partition (a reset picked up while running) is not stopped any more.
  lag.partitionAssigned(1, 0n, marks);
  assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns partitions 0,1 (stopped: 0 EO_CHECKPOINT_OUT_OF_RANGE)' });
  // Owning nothing (more workers than partitions) is ready, as before.
  lag.partitionRevoked(0);
  lag.partitionRevoked(1);
  assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns no partition' });
});
