// `checkpoints reset --to`: parsing earliest/latest/offsets/times (ISO-8601 with a zone, a date, @epoch ms),
// the coded line for everything else, planning a time per partition, and the command a stopped partition needs.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isExactlyOnceError } from '../../src/errors.js';
import { parseTarget, planTargets } from '../../src/operate/reset-target.js';
import { checkResetRequest } from '../../src/operate/checkpoints.js';
import { stopFix } from '../../src/operate/status.js';

test('--to: earliest, latest and offsets as before; times as epoch ms', () => {
  assert.equal(parseTarget('earliest'), 'earliest');
  assert.equal(parseTarget(' latest '), 'latest');
  assert.equal(parseTarget('0'), 0n);
  assert.equal(parseTarget('17592186044415'), 17592186044415n);
  assert.deepEqual(parseTarget('2026-12-05T09:00:00Z'), { atMs: Date.UTC(2026, 11, 5, 9), text: '2026-12-05T09:00:00Z' });
  assert.deepEqual(parseTarget('2026-12-05T09:00+01:00'), { atMs: Date.UTC(2026, 11, 5, 8), text: '2026-12-05T09:00+01:00' });
  assert.deepEqual(parseTarget('2026-12-05T09:00:00.250-0230'), { atMs: Date.UTC(2026, 11, 5, 11, 30, 0, 250), text: '2026-12-05T09:00:00.250-0230' });
  assert.deepEqual(parseTarget('2024-02-29'), { atMs: Date.UTC(2024, 1, 29), text: '2024-02-29' });
  assert.deepEqual(parseTarget('2026-12-05 09:00:00Z'), { atMs: Date.UTC(2026, 11, 5, 9), text: '2026-12-05 09:00:00Z' });
  assert.deepEqual(parseTarget('@1733389200000'), { atMs: 1733389200000, text: '2024-12-05T09:00:00.000Z' });
  assert.deepEqual(parseTarget('@0'), { atMs: 0, text: '1970-01-01T00:00:00.000Z' });
});

test('--to: anything else is one coded line naming the flag and the value', () => {
  const cases: Array<[string, RegExp]> = [
    ['yesterday', /^--to: expected earliest, latest or an offset .* \(got 'yesterday'\)$/],
    ['2026-12-05T09:00', /; a time needs its zone: add Z \(UTC\) or an offset such as \+01:00 \(got '2026-12-05T09:00'\)$/],
    ['2026-02-30', /; no such date or time \(got '2026-02-30'\)$/],
    ['2026-02-29T10:00Z', /; no such date or time/],
    ['2026-12-05T24:00Z', /; no such date or time/],
    ['2026-12-05T09:60Z', /; no such date or time/],
    ['1969-12-31T23:59:59Z', /; before 1970/],
    ['@9999999999999999', /; epoch milliseconds beyond the year 275760/],
    ['-5', /^--to: expected/],
    ['@-5', /^--to: expected/],
    ['1e6', /^--to: expected/],
  ];
  for (const [value, message] of cases) {
    assert.throws(
      () => parseTarget(value),
      (e: unknown) => isExactlyOnceError(e, 'EO_CONFIG_INVALID') && message.test((e as Error).message),
      value,
    );
  }
});

const marks = [
  { partition: 0, low: 100n, high: 500n, stable: 500n },
  { partition: 1, low: 0n, high: 80n, stable: 80n },
];

test('a time is planned per partition from offsets-for-times, inside the log, each in its next epoch', () => {
  const stored = new Map([[0, { next: 400n, epoch: 2 }]]);
  const byTime = new Map([
    [0, 250n],
    [1, 80n], // no record that recent: the log end
  ]);
  const plans = planTargets('t', [0, 1], { atMs: 1, text: 'x' }, marks, stored, byTime);
  assert.deepEqual(plans, [
    { partition: 0, from: { next: 400n, epoch: 2 }, to: { next: 250n, epoch: 3 }, logStart: 100n, logEnd: 500n },
    { partition: 1, from: null, to: { next: 80n, epoch: 1 }, logStart: 0n, logEnd: 80n },
  ]);
  // Retention moved the log start past the offset Kafka gave: the log start.
  assert.deepEqual(planTargets('t', [0], { atMs: 1, text: 'x' }, marks, new Map(), new Map([[0, 50n]]))[0]!.to, { next: 100n, epoch: 1 });
  assert.throws(() => planTargets('t', [0], { atMs: 1, text: 'x' }, marks, new Map(), new Map()), (e: unknown) => isExactlyOnceError(e, 'EO_KAFKA_UNAVAILABLE'));
  assert.throws(() => planTargets('t', [7], { atMs: 1, text: 'x' }, marks, new Map(), byTime), /--partition: topic t has partitions 0\.\.1 \(got 7\)/);
});

test('reset flags that do not go together are refused, naming the flag', () => {
  const time = { atMs: 1, text: 'x' };
  assert.doesNotThrow(() => checkResetRequest({ all: true, to: time, rebind: false }));
  assert.throws(
    () => checkResetRequest({ all: true, to: 5n, rebind: false }),
    (e: unknown) => isExactlyOnceError(e, 'EO_USAGE') && (e as Error).message === '--to: an offset is for one --partition (a time is resolved for each partition); with --all use earliest or latest',
  );
  assert.throws(() => checkResetRequest({ all: false, to: time, rebind: false }), /give --partition P or --all/);
  assert.throws(() => checkResetRequest({ partition: 1, all: true, to: time, rebind: false }), /--partition and --all/);
  assert.throws(() => checkResetRequest({ partition: 1, all: false, rebind: false }), /--to: required/);
  assert.throws(() => checkResetRequest({ partition: 1, all: false, to: time, rebind: true }), /--rebind: .*--all/);
});

test('the command that gets a stopped partition going, by its code', () => {
  const r = { partition: 2, checkpoint: 40n, logStart: 100n, logEnd: 900n };
  assert.equal(stopFix('events', r, 'EO_CHECKPOINT_OUT_OF_RANGE'), 'exactlyonce checkpoints reset --partition 2 --to earliest');
  assert.equal(stopFix('orders', { ...r, checkpoint: 1000n }, 'EO_CHECKPOINT_OUT_OF_RANGE'), 'exactlyonce checkpoints reset --job orders --partition 2 --to latest');
  assert.equal(stopFix('orders', r, 'EO_TOPIC_RECREATED'), 'exactlyonce checkpoints reset --job orders --all --to earliest --rebind');
  assert.equal(stopFix('orders', r, 'EO_OFFSET_GAP'), 'restart the worker, or exactlyonce checkpoints reset --job orders --partition 2 --to 40');
  assert.equal(stopFix('orders', r, 'EO_PERMANENT_ERROR'), 'fix the cause above, then exactlyonce checkpoints reset --job orders --partition 2 --to 40');
  assert.equal(stopFix('orders', r, 'EO_PARTITIONS_ADDED'), 'see docs/guarantees.md, "When the topic gains partitions"');
});
