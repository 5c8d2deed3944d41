/** What the config and secrets tests share: the message of the EO_CONFIG_INVALID a call throws. */
import assert from 'node:assert/strict';
import { ExactlyOnceError } from '../../src/errors.js';

export function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ExactlyOnceError);
    assert.equal(e.code, 'EO_CONFIG_INVALID');
    return e.message;
  }
  assert.fail('expected EO_CONFIG_INVALID');
}
