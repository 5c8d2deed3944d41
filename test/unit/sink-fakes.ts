// What the sink's unit tests share.
import assert from 'node:assert/strict';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';

/** The message a sink config is refused with (`where` names its file, as the loader does). */
export function configProblem(raw: unknown, where = 's.yaml'): string {
  try {
    sinkConfig(raw, where);
  } catch (e) {
    return (e as Error).message;
  }
  assert.fail('expected EO_CONFIG_INVALID');
}
