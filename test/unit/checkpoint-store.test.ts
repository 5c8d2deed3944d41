// The timestamp arithmetic of checkpoint resets (epoch·2^44 + offset) and the pure parts of
// `checkpoints list` / `reset`; the writes themselves are exercised on the real stack
// (test/integration/checkpoints.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  checkpointTimestamp,
  MAX_EPOCH,
  OFFSET_LIMIT,
  parseResetTarget,
  partitionReports,
  planResets,
  type PartitionState,
  type StoredCheckpoint,
} from '../../src/engine/checkpoint-store.js';
import { ExactlyOnceError } from '../../src/errors.js';

const coded = (code: string, message?: RegExp) => (e: unknown) =>
  e instanceof ExactlyOnceError && e.code === code && (message === undefined || message.test(e.message));

test('epoch 0 keeps the timestamps written before resets existed (the offset itself)', () => {
  for (const o of [0n, 1n, 12345n, OFFSET_LIMIT - 1n]) assert.equal(checkpointTimestamp(0, o), o);
  assert.equal(checkpointTimestamp(1, 0n), 2n ** 44n);
  assert.equal(checkpointTimestamp(3, 7n), 3n * 2n ** 44n + 7n);
});

test('any write of a later epoch wins over every write of an earlier one; within an epoch the higher offset wins', () => {
  const offsets = [0n, 1n, 999n, 2n ** 32n, OFFSET_LIMIT - 1n];
  for (const e of [0, 1, 2, 1000, MAX_EPOCH - 1]) {
    for (const a of offsets) {
      for (const b of offsets) {
        assert.ok(checkpointTimestamp(e, a) < checkpointTimestamp(e + 1, b), `epoch ${e} offset ${a} < epoch ${e + 1} offset ${b}`);
        assert.equal(checkpointTimestamp(e, a) < checkpointTimestamp(e, b), a < b);
      }
    }
  }
});

test('the highest timestamp still fits in a signed 64-bit Cassandra write timestamp', () => {
  assert.equal(checkpointTimestamp(MAX_EPOCH, OFFSET_LIMIT - 1n), 2n ** 63n - 1n);
});

test('offsets from 2^44 on, negative offsets and epochs out of range are refused with a coded error', () => {
  assert.throws(() => checkpointTimestamp(0, OFFSET_LIMIT), coded('EO_CHECKPOINT_OUT_OF_RANGE', /offset 17592186044416 is outside 0\.\.17592186044415/));
  assert.throws(() => checkpointTimestamp(5, 2n ** 60n), coded('EO_CHECKPOINT_OUT_OF_RANGE', /below 2\^44/));
  assert.throws(() => checkpointTimestamp(0, -1n), coded('EO_CHECKPOINT_OUT_OF_RANGE'));
  assert.throws(() => checkpointTimestamp(-1, 0n), coded('EO_CHECKPOINT_OUT_OF_RANGE', /epoch -1/));
  assert.throws(() => checkpointTimestamp(MAX_EPOCH + 1, 0n), coded('EO_CHECKPOINT_OUT_OF_RANGE'));
  assert.throws(() => checkpointTimestamp(1.5, 0n), coded('EO_CHECKPOINT_OUT_OF_RANGE'));
});

test('--to: earliest, latest or a whole number; anything else names the flag', () => {
  assert.equal(parseResetTarget('earliest'), 'earliest');
  assert.equal(parseResetTarget('latest'), 'latest');
  assert.equal(parseResetTarget('42'), 42n);
  assert.equal(parseResetTarget('99999999999999999999'), 99999999999999999999n);
  for (const bad of ['', '-1', '1.5', 'first', '0x10', 'Latest']) {
    assert.throws(() => parseResetTarget(bad), coded('EO_CONFIG_INVALID', /^--to: expected earliest, latest or an offset/));
  }
});

const marks = [
  { partition: 0, low: 0n, high: 100n, stable: 100n },
  { partition: 1, low: 40n, high: 90n, stable: 90n },
];

test('a reset plan: earliest is the log start, latest the log end, the epoch is the stored one + 1', () => {
  const stored = new Map<number, StoredCheckpoint>([[1, { next: 60n, epoch: 2 }]]);
  assert.deepEqual(planResets('t', [0, 1], 'earliest', marks, stored), [
    { partition: 0, from: null, to: { next: 0n, epoch: 1 }, logStart: 0n, logEnd: 100n },
    { partition: 1, from: { next: 60n, epoch: 2 }, to: { next: 40n, epoch: 3 }, logStart: 40n, logEnd: 90n },
  ]);
  assert.deepEqual(planResets('t', [1], 'latest', marks, stored).map((p) => p.to), [{ next: 90n, epoch: 3 }]);
  assert.deepEqual(planResets('t', [1], 40n, marks, stored).map((p) => p.to), [{ next: 40n, epoch: 3 }]);
  assert.deepEqual(planResets('t', [1], 90n, marks, stored).map((p) => p.to), [{ next: 90n, epoch: 3 }]);
});

test('a reset plan refuses an offset outside [log start, log end] and a partition the topic does not have', () => {
  assert.throws(() => planResets('t', [1], 39n, marks, new Map()), coded('EO_CONFIG_INVALID', /^--to: offset 39 is outside partition 1's log \[40, 90\]/));
  assert.throws(() => planResets('t', [1], 91n, marks, new Map()), coded('EO_CONFIG_INVALID', /^--to: offset 91 is outside/));
  assert.throws(() => planResets('t', [2], 'earliest', marks, new Map()), coded('EO_CONFIG_INVALID', /^--partition: topic t has partitions 0\.\.1 \(got 2\)/));
});

test('list rows: lag from the checkpoint (or the log start), stops of an older epoch than the checkpoint are not shown', () => {
  const stored = new Map<number, StoredCheckpoint>([
    [0, { next: 70n, epoch: 1 }],
    [5, { next: 3n, epoch: 0 }],
  ]);
  const stop = (epoch: number | null) => ({ code: 'EO_PERMANENT_ERROR', message: 'm', epoch, at: null, by: 'w' });
  const states = new Map<number, PartitionState>([
    [0, { owner: 'host-1', stopped: stop(0) }], // stopped before the reset to epoch 1: over
    [1, { owner: null, stopped: stop(null) }], // epoch unknown (assignment failed): shown
  ]);
  const rows = partitionReports(marks, stored, states);
  assert.deepEqual(
    rows.map((r) => [r.partition, r.checkpoint, r.epoch, r.logStart, r.logEnd, r.lag, r.owner, r.stopped?.code ?? null]),
    [
      [0, 70n, 1, 0n, 100n, 30n, 'host-1', null],
      [1, null, null, 40n, 90n, 50n, null, 'EO_PERMANENT_ERROR'],
      [5, 3n, 0, null, null, null, null, null],
    ],
  );
  const current = partitionReports(marks, stored, new Map([[0, { owner: null, stopped: stop(1) }]]));
  assert.equal(current[0]!.stopped?.code, 'EO_PERMANENT_ERROR');
});

test('checkpoints list on a transactional topic: lag to the last stable offset, records of an open transaction held apart', () => {
  const txn = [
    { partition: 0, low: 0n, high: 735n, stable: 735n }, // ends with an aborted transaction and its marker
    { partition: 1, low: 0n, high: 720n, stable: 700n }, // a transaction open from 700 on
  ];
  const stored = new Map<number, StoredCheckpoint>([
    [0, { next: 735n, epoch: 0 }],
    [1, { next: 690n, epoch: 0 }],
  ]);
  assert.deepEqual(
    partitionReports(txn, stored, new Map()).map((r) => [r.partition, r.checkpoint, r.logEnd, r.lag, r.held]),
    [
      [0, 735n, 735n, 0n, 0n],
      [1, 690n, 720n, 10n, 20n],
    ],
  );
});
