/**
 * Stopping a bench run: Ctrl-C aborts its signal, and every wait of the run ends then with
 * BenchAborted. Below both the run's context (context.ts) and its processes (processes.ts).
 */
import { ExactlyOnceError } from '../src/errors.js';
import { sleep } from '../src/harness/sleep.js';

export class BenchAborted extends Error {
  constructor() {
    super('the benchmark was interrupted');
    this.name = 'BenchAborted';
  }
}

/** Resolves after `ms`, or rejects with BenchAborted as soon as the run is interrupted. */
export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, signal);
  if (signal.aborted) throw new BenchAborted();
}

/**
 * Settles with `work`, or rejects when the run is interrupted or `timeoutMs` passes, whichever comes
 * first: a step that hangs (a client call that never returns while a server restarts) cannot keep
 * the run, and its clean-up, waiting forever.
 */
export function bounded<T>(work: Promise<T>, timeoutMs: number, what: string, signal: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${what}: not done after ${Math.round(timeoutMs / 1000)}s`)), timeoutMs);
    onAbort = () => reject(new BenchAborted());
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([work, stop]).finally(() => {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort!);
  });
}
