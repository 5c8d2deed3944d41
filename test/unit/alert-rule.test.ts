import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_ALERT_RULE, expectedAlerts, WindowCounter } from '../../src/jobs/events/alert-rule.js';

const ev = (source: string, ts: number, health = 2) => ({ source, ts, health });

test('the original rule: 10 Critical events of one source in a 5 s window raise one alert at the window end', () => {
  const events = Array.from({ length: 10 }, (_, i) => ev('My Router', 10_000 + i * 100));
  assert.deepEqual(expectedAlerts(events), [{ source: 'My Router', ts: 15_000, eventCount: 10 }]);
  assert.deepEqual(expectedAlerts(events.slice(1)), [], '9 is below the threshold');
});

test('only the counted health level counts; sources and windows are separate', () => {
  const events = [
    ...Array.from({ length: 12 }, (_, i) => ev('a', i)),
    ...Array.from({ length: 50 }, (_, i) => ev('a', i, 1)),
    ...Array.from({ length: 10 }, (_, i) => ev('b', 4990 + i)), // straddles the 5000 edge: 10 in [0,5000)? no: 4990..4999
    ...Array.from({ length: 9 }, (_, i) => ev('c', 5000 + i)),
  ];
  assert.deepEqual(expectedAlerts(events), [
    { source: 'a', ts: 5000, eventCount: 12 },
    { source: 'b', ts: 5000, eventCount: 10 },
  ]);
});

test('the result does not depend on arrival order', () => {
  const events = Array.from({ length: 500 }, (_, i) => ev(`s${i % 3}`, (i * 7919) % 20_000, i % 4 === 0 ? 1 : 2));
  const a = expectedAlerts(events);
  const b = expectedAlerts([...events].reverse());
  const c = expectedAlerts([...events].sort((x, y) => (x.ts * 31 + x.source.length) % 17 - (y.ts * 31 + y.source.length) % 17));
  assert.ok(a.length > 0);
  assert.deepEqual(b, a);
  assert.deepEqual(c, a);
});

test('sliding windows count an event in each window containing it', () => {
  const rule = { ...DEFAULT_ALERT_RULE, windows: { sizeMs: 2000, slideMs: 1000 }, threshold: 3 };
  const counter = new WindowCounter(rule);
  for (const ts of [500, 1500, 1600]) counter.add(ev('x', ts));
  // [0,2000) has 3; [1000,3000) has 2; [-1000,1000) has 1.
  assert.deepEqual(counter.alerts(), [{ source: 'x', ts: 2000, eventCount: 3 }]);
});
