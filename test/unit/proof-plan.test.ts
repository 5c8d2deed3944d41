// Where an audit starts (src/verify/proof-plan.ts): a recorded proof is continued only while the
// topic ID, the partition's reset epoch and the job's settings are what they were.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { configFingerprint, lineageName, planProof, proofTimestamp, type StoredProof } from '../../src/verify/proof-plan.js';

const proof = (partition: number, o: Partial<StoredProof> = {}): StoredProof => ({
  partition,
  topicId: 'T1',
  epoch: 0,
  config: 'c1',
  lineage: `L${partition}`,
  lineageSeq: 3,
  proved: 100n,
  counted: 90n,
  runId: null,
  provedAt: null,
  ...o,
});
const id = { topicId: 'T1', config: 'c1', epochs: new Map([[1, 2]]) };
const ends = new Map([[0, 500n], [1, 500n], [2, 500n], [3, 500n]]);

test('a trusted proof is continued from its offsets, in its lineage', () => {
  const [p0] = planProof([0], new Map([[0, proof(0)]]), id, ends, false);
  assert.deepEqual({ ...p0, from: p0!.from?.partition }, { partition: 0, from: 0, why: null, lineage: 'L0', lineageSeq: 3, proved: 100n, counted: 90n });
});

test('each reason to distrust a proof starts that partition over, in a new lineage', () => {
  const stored = new Map([
    [0, proof(0, { topicId: 'T0' })],
    [1, proof(1, { epoch: 1 })],
    [2, proof(2, { config: 'c0' })],
    [3, proof(3, { proved: 600n, counted: 600n })],
  ]);
  const plan = planProof([0, 1, 2, 3, 4], stored, id, ends, false);
  assert.deepEqual(
    plan.map((s) => [s.partition, s.from, s.proved, s.counted, s.lineageSeq, s.why]),
    [
      [0, null, 0n, 0n, 4, 'the topic was re-created (its ID was T0, it is T1 now)'],
      [1, null, 0n, 0n, 4, 'the checkpoint was reset (epoch 1 when proved, 2 now)'],
      [2, null, 0n, 0n, 4, "the job's settings changed since the proof"],
      [3, null, 0n, 0n, 4, 'the proof (600) is beyond the log end 500'],
      [4, null, 0n, 0n, 1, 'no proof recorded yet'],
    ],
  );
  assert.equal(plan[1]!.lineage, lineageName('T1', 2, 'c1', 4), 'the new lineage names the epoch it is about');
  assert.notEqual(plan[0]!.lineage, 'L0');
});

test('--full starts every partition over; an unknown topic ID trusts nothing', () => {
  assert.deepEqual(planProof([0], new Map([[0, proof(0)]]), id, ends, true).map((s) => s.why), ['--full']);
  assert.deepEqual(planProof([0], new Map([[0, proof(0)]]), { ...id, topicId: null }, ends, false).map((s) => s.why), ['the topic ID is unknown (the broker did not say)']);
});

test('two runs starting over at once name the same lineage; the fingerprint ignores key order', () => {
  assert.equal(lineageName('T', 1, 'c', 2), lineageName('T', 1, 'c', 2));
  assert.notEqual(lineageName('T', 1, 'c', 2), lineageName('T', 1, 'c', 3));
  assert.equal(configFingerprint({ a: 1, b: 'x' }), configFingerprint({ b: 'x', a: 1 }));
  assert.notEqual(configFingerprint({ a: 1 }), configFingerprint({ a: 2 }));
});

test('a proof written further, or in a newer lineage, has the higher write timestamp', () => {
  assert.ok(proofTimestamp(3, 101n) > proofTimestamp(3, 100n));
  assert.ok(proofTimestamp(4, 0n) > proofTimestamp(3, 2n ** 44n - 1n));
});
