/** The one sleep of the harness (and of what uses it: chaos, demo, bench, the tests). */
import { setTimeout as delay } from 'node:timers/promises';

/**
 * Resolves after `ms` (at once when `ms` ≤ 0), or as soon as `signal` aborts: it then resolves too,
 * and the caller checks the signal, so that an interrupted run stops waiting without an exception.
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted === true) return;
  await delay(ms, undefined, signal === undefined ? undefined : { signal }).catch((e: unknown) => {
    if (!(e instanceof Error && e.name === 'AbortError')) throw e;
  });
}
