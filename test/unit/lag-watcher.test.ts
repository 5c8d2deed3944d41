// The lag and stall watching of src/engine/lag-watcher.ts with a fake log end source (no servers):
// lag grows between batches, a stall is logged once and its recovery once.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePrometheus, select } from '../../src/dashboard/prometheus.js';
import { LagWatcher } from '../../src/engine/lag-watcher.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import type { Logger } from '../../src/log.js';
import { waitFor } from '../helpers.js';

/** A watcher over fresh metrics, a log that keeps only its warnings, and a partition's gauge as /metrics has it. */
function watcher(partition: number) {
  const metrics = new EngineMetrics();
  const lag = new LagWatcher(metrics);
  const warned: string[] = [];
  const log = { info: () => undefined, warn: (_o: unknown, msg: string) => warned.push(msg), debug: () => undefined } as unknown as Logger;
  const gauge = async (name: string) => select(parsePrometheus(await metrics.registry.metrics()), `exactlyonce_${name}`, { partition: String(partition) })[0]?.value;
  return { metrics, lag, warned, log, gauge };
}

test('lag between batches, stall and recovery: one log line each, from the log end refresh', async () => {
  const metrics = new EngineMetrics();
  const lag = new LagWatcher(metrics);
  const logged: Array<{ level: string; msg: string }> = [];
  const log = {
    info: (_o: unknown, msg: string) => logged.push({ level: 'info', msg }),
    warn: (_o: unknown, msg: string) => logged.push({ level: 'warn', msg }),
    debug: () => undefined,
  } as unknown as Logger;
  let high = 10n;
  lag.partitionAssigned(4, 10n, { low: 0n, high: 10n, stable: 10n });
  lag.watch(async () => [{ partition: 4, low: 0n, high, stable: high }], log, 20, 100);
  try {
    const gauge = async (name: string) => select(parsePrometheus(await metrics.registry.metrics()), `exactlyonce_${name}`, { partition: '4' })[0]?.value;
    assert.equal(await gauge('lag_records'), 0);
    high = 25n; // records arrive; the worker does not move
    await waitFor(async () => (await gauge('lag_records')) === 15, { timeoutMs: 5_000, message: 'lag follows the log end' });
    await waitFor(async () => (await gauge('partition_stalled')) === 1, { timeoutMs: 5_000, message: 'stalled after 100 ms' });
    await new Promise((r) => setTimeout(r, 200));
    lag.checkpointed(4, 25n);
    await waitFor(async () => (await gauge('partition_stalled')) === 0, { timeoutMs: 5_000, message: 'moving again' });
    assert.equal(await gauge('lag_records'), 0);
    assert.deepEqual(logged.map((l) => l.level), ['warn', 'info']);
    // The stall warning says where, how far behind, for how long, and why (no cause known: this
    // metrics object has no runner to name a failing server).
    assert.match(logged[0]!.msg, /^partition 4: checkpoint stalled at 10 with 15 records behind for \d+ s; cause: no cause known$/);
    assert.equal(logged[1]!.msg, 'partition 4: checkpoint moving again');
    lag.partitionRevoked(4);
    assert.equal(await gauge('lag_records'), undefined, "a revoked partition's gauges leave /metrics");
    assert.deepEqual(metrics.health.readiness(), { ready: true, detail: 'ready: owns no partition' });
  } finally {
    lag.close();
  }
});

test('a stopped partition assigned again (a reset picked up while running) loses its stopped mark and can stall again', async () => {
  const { metrics, lag, warned: logged, log, gauge } = watcher(2);
  lag.partitionAssigned(2, 5n, { low: 0n, high: 9n, stable: 9n });
  lag.partitionStopped(2, 'EO_POSITION_OUT_OF_RANGE');
  lag.watch(async () => [{ partition: 2, low: 0n, high: 9n, stable: 9n }], log, 20, 100);
  try {
    assert.equal(await gauge('partition_stopped'), 1);
    await new Promise((r) => setTimeout(r, 300));
    assert.notEqual(await gauge('partition_stalled'), 1, 'a stopped partition is never reported as stalled');
    assert.deepEqual(logged, []);
    lag.partitionAssigned(2, 3n, { low: 0n, high: 9n, stable: 9n }); // the reset's new task, at 3
    assert.equal(await gauge('partition_stopped'), 0);
    await waitFor(async () => (await gauge('partition_stalled')) === 1, { timeoutMs: 5_000, message: 'the reset partition stalls like any other' });
    assert.match(logged[0] ?? '', /^partition 2: checkpoint stalled at 3 with 6 records behind/);
    assert.equal(select(parsePrometheus(await metrics.registry.metrics()), 'exactlyonce_partition_stops_total', { code: 'EO_POSITION_OUT_OF_RANGE' })[0]?.value, 1);
  } finally {
    lag.close();
  }
});

test('a transactional topic: lag counts to the last stable offset, records of an open transaction are held apart, and a stall behind them names it with its age', async () => {
  const { lag, warned, log, gauge } = watcher(1);
  // 700..734 belong to a transaction still open: nothing after 700 can be read yet.
  let marks = { partition: 1, low: 0n, high: 735n, stable: 700n };
  lag.partitionAssigned(1, 690n, marks);
  lag.stallCause = () => 'the runner names a failing server here';
  lag.watch(async () => [marks], log, 20, 300);
  try {
    assert.equal(await gauge('lag_records'), 10, 'readable: 690..699');
    assert.equal(await gauge('transaction_held_records'), 35);
    assert.equal(await gauge('log_end_offset'), 735);
    lag.checkpointed(1, 700n);
    assert.equal(await gauge('lag_records'), 0, 'every readable record stored');
    assert.equal(await gauge('transaction_held_records'), 35);
    await waitFor(async () => (await gauge('partition_stalled')) === 1, { timeoutMs: 5_000, message: 'stalled behind the open transaction' });
    assert.equal(warned.length, 1);
    assert.match(
      warned[0]!,
      /^partition 1: checkpoint stalled at 700 with 35 records behind for \d+ s; cause: a transaction open for at least \d+ s holds back offsets 700\.\.734 \(35 records\): a read_committed consumer gets them once its producer commits or aborts it, or the broker aborts it after the producer's transaction\.timeout\.ms$/,
    );
    // The broker aborts it: the stable offset jumps past its marker, the records are readable (none are: aborted).
    marks = { partition: 1, low: 0n, high: 736n, stable: 736n };
    await waitFor(async () => (await gauge('transaction_held_records')) === 0, { timeoutMs: 5_000, message: 'nothing held any more' });
    assert.equal(await gauge('lag_records'), 36, 'the aborted records and marker are lag until the checkpoint steps over them');
    lag.checkpointed(1, 736n);
    assert.equal(await gauge('lag_records'), 0);
    await waitFor(async () => (await gauge('partition_stalled')) === 0, { timeoutMs: 5_000, message: 'moving again' });
    // Records behind that are readable are not waiting for a transaction: the runner's cause is named.
    marks = { partition: 1, low: 0n, high: 800n, stable: 790n };
    await waitFor(() => warned.length === 2, { timeoutMs: 5_000, message: 'stalled again' });
    assert.match(warned[1]!, /^partition 1: checkpoint stalled at 736 with 64 records behind for \d+ s; cause: the runner names a failing server here$/);
    assert.equal(await gauge('lag_records'), 54);
    assert.equal(await gauge('transaction_held_records'), 10);
  } finally {
    lag.close();
  }
});
