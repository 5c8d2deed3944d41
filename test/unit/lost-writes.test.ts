// When a stored checkpoint counts as lost: below the one the task saw acknowledged, compared as write
// timestamps (epoch·2^44 + offset), so a reset (a higher epoch, any offset) never looks like a loss.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isLost } from '../../src/engine/lost-writes.js';

test('nothing acknowledged yet: nothing can be lost', () => {
  assert.equal(isLost(null, 0, null), false);
  assert.equal(isLost({ next: 0n, epoch: 0 }, 0, null), false);
});

test('a stored checkpoint below the acknowledged one, or none at all, is lost', () => {
  assert.equal(isLost({ next: 741n, epoch: 0 }, 0, 848n), true);
  assert.equal(isLost(null, 0, 848n), true);
  assert.equal(isLost(undefined, 3, 1n), true);
});

test('at or above the acknowledged one (a later write landed, another owner went on) is not', () => {
  assert.equal(isLost({ next: 848n, epoch: 0 }, 0, 848n), false);
  assert.equal(isLost({ next: 900n, epoch: 0 }, 0, 848n), false);
});

test('a reset (a higher epoch) is never a loss, whatever its offset; a lost reset (a lower epoch) is', () => {
  assert.equal(isLost({ next: 0n, epoch: 1 }, 0, 848n), false);
  assert.equal(isLost({ next: 5000n, epoch: 1 }, 2, 10n), true);
});
