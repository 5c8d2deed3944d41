/**
 * The sleep of the harness (and of what uses it: chaos, demo, bench, the tests): the engine's sleep
 * (src/engine/retry.ts), which rejects with AbortedError when its signal aborts, in the variant that
 * resolves instead. The two differ only there: the engine's retry loop must stop with an exception
 * on shutdown; the harness's pollers and pacers check the signal themselves after the sleep.
 */
import { AbortedError, sleep as sleepOrAbort } from '../engine/retry.js';

/**
 * Resolves after `ms` (at once when `ms` ≤ 0), or as soon as `signal` aborts: it then resolves too
 * (never rejects with AbortedError), and the caller checks the signal, so that an interrupted run
 * stops waiting without an exception.
 */
export async function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted === true) return;
  await sleepOrAbort(ms, signal).catch((e: unknown) => {
    if (!(e instanceof AbortedError)) throw e;
  });
}
