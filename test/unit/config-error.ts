/** What the config, secrets and sink tests share: the message of the coded error (EO_CONFIG_INVALID by default) a call throws. */
import assert from 'node:assert/strict';
import { ExactlyOnceError } from '../../src/errors.js';

export function configError(fn: () => unknown, code = 'EO_CONFIG_INVALID'): string {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof ExactlyOnceError);
    assert.equal(e.code, code);
    return e.message;
  }
  assert.fail(`expected ${code}`);
}
