// The auditor's alert comparison (src/verify/alert-diff.ts): the recomputation against the table
// rows and the latest message per key of the alerts topic.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeAlertMessage, LatestPerKey, windowOfKey } from '../../src/jobs/events/alert-messages.js';
import { AlertDiff, type AlertViolation } from '../../src/verify/alert-diff.js';
import { auditSummary } from '../../src/verify/audit-runs.js';
import type { Alert } from '../../src/jobs/events/alert-rule.js';
import { alertTopicKey, alertTopicValue } from '../../src/jobs/events/alerts.js';

const a = (source: string, ts: number, eventCount: number): Alert => ({ source, ts, eventCount });

function diff(expected: Alert[]) {
  const found: AlertViolation[] = [];
  return { d: new AlertDiff(expected, 'table', 'ks.alerts', (v) => found.push(v)), found };
}

test('equal alerts: no difference', () => {
  const { d, found } = diff([a('r1', 5000, 10), a('r2', 5000, 12)]);
  d.found(a('r2', 5000, 12));
  d.found(a('r1', 5000, 10));
  assert.deepEqual(d.finish(), { name: 'ks.alerts', found: 2, missing: 0, extra: 0, count: 0, malformed: 0, exists: true });
  assert.deepEqual(found, []);
});

test('a wrong count, a dropped alert and an extra alert are each named by source and window', () => {
  const { d, found } = diff([a('r1', 5000, 10), a('r1', 10000, 11), a('r2', 5000, 12)]);
  d.found(a('r1', 5000, 9));
  d.found(a('r2', 5000, 12));
  d.found(a('r3', 15000, 10));
  const side = d.finish();
  assert.deepEqual([side.missing, side.extra, side.count], [1, 1, 1]);
  assert.deepEqual(
    found.map((v) => [v.kind, v.alert]),
    [
      ['alert_count', { source: 'r1', ts: 5000, expected: 10, found: 9 }],
      ['alert_extra', { source: 'r3', ts: 15000, expected: null, found: 10 }],
      ['alert_missing', { source: 'r1', ts: 10000, expected: 11, found: null }],
    ],
  );
  assert.match(found[0]!.message, /alert "r1" window end 5000 .*count 9 in the alerts table, the events give 10/);
});

test('alert messages: key source@windowEnd, JSON value; anything else is malformed; null is a tombstone', () => {
  const x = a('My Router', 1_700_000_005_000, 42);
  const ok = decodeAlertMessage(Buffer.from(alertTopicKey(x.source, x.ts)), Buffer.from(alertTopicValue(x)));
  assert.deepEqual(ok, { ok: true, key: 'My Router@1700000005000', alert: x });
  assert.deepEqual(decodeAlertMessage(Buffer.from('k'), null), { ok: true, key: 'k', alert: null });
  const bad = (k: string | null, v: string) => {
    const m = decodeAlertMessage(k === null ? null : Buffer.from(k), Buffer.from(v));
    assert.equal(m.ok, false);
    return m.ok ? '' : m.why;
  };
  assert.match(bad(null, alertTopicValue(x)), /no key/);
  assert.match(bad('x', '{'), /not JSON/);
  assert.match(bad('x', '[]'), /not a JSON object/);
  assert.match(bad('x', '{"ts":1.5,"source":"s","eventCount":1}'), /ts/);
  assert.match(bad('x', '{"ts":1,"source":"s","eventCount":"1"}'), /eventCount/);
  assert.match(bad('s@2', '{"ts":1,"source":"s","eventCount":1}'), /key "s@2" is not "s@1"/);
});

test('the latest message per key wins by offset within a partition; a tombstone deletes', () => {
  const l = new LatestPerKey();
  l.add(0, 5n, 100, 'k1', a('s', 1, 10));
  l.add(0, 9n, 90, 'k1', a('s', 1, 12));
  l.add(0, 7n, 200, 'k1', a('s', 1, 11)); // read out of order: offset 9 is still the latest
  l.add(1, 3n, 100, 'k2', a('t', 1, 10));
  l.add(1, 4n, 100, 'k2', null);
  assert.deepEqual([...l.alerts()], [a('s', 1, 12)]);
  assert.equal(l.messages, 5);
});

test('the audit_runs summary keeps the totals and only the violation kinds that occurred', () => {
  const s = auditSummary({
    ok: false,
    mode: 'incremental',
    runId: '00000000-0000-1000-8000-000000000000',
    continues: null,
    proofRecorded: false,
    topic: 't',
    keyspace: 'k',
    startedAt: '2026-01-01T00:00:00.000Z',
    durationMs: 5,
    recordsPerSecond: 1,
    peakRssMb: 1,
    partitions: [],
    totals: { records: 3, stored: 1, quarantined: 1, missing: 1, extra: 0, mismatched: 0, lag: '0', gapOffsets: 0, belowLogStart: 0, aheadOfCheckpoint: 0 },
    unknownPartitions: [],
    alerts: null,
    violationCounts: { missing: 1, extra: 0, mismatch: 0, quarantined_valid: 0, stored_malformed: 0, checkpoint: 0, alert_missing: 0, alert_extra: 0, alert_count: 0, alert_malformed: 0, incomplete_read: 0 },
    violationTotal: 1,
    violations: [{ kind: 'missing', partition: 0, offset: '7', message: 'partition 0 offset 7: missing' }],
  });
  assert.deepEqual(s['violations'], { missing: 1 });
  assert.equal(s['firstViolation'], 'partition 0 offset 7: missing');
  assert.equal(s['records'], 3);
  assert.equal(s['mode'], 'incremental');
});

test('an alert message whose time is past a Date\'s range is malformed, not a RangeError', () => {
  const key = Buffer.from('r1@9000000000000000');
  const value = Buffer.from('{"ts":9000000000000000,"source":"r1","eventCount":10}');
  assert.deepEqual(decodeAlertMessage(key, value), { ok: false, why: 'ts 9000000000000000 is outside the dates a window can end at (±8640000000000000 ms)' });
  // A tombstone of such a key names no window (so the auditor reports it malformed, never binds a Date of it).
  assert.equal(windowOfKey('r1@9000000000000000'), null);
  assert.deepEqual(windowOfKey('r1@8640000000000000'), { source: 'r1', end: 8_640_000_000_000_000 });
  const found: AlertViolation[] = [];
  const d = new AlertDiff([], 'topic', 'alerts', (v) => found.push(v));
  d.found(a('r1', 9_000_000_000_000_000, 10));
  assert.deepEqual(found.map((v) => v.message), ['alert "r1" window end 9000000000000000: extra in the topic alerts (count 10); the events give no alert for this window']);
});
