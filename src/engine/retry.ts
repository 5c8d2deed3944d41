/**
 * Retries an operation against a server that may be down, with capped exponential backoff and
 * jitter, forever or until aborted (shutdown). It logs one line when the server starts failing and
 * one when it answers again, never one per attempt.
 */
import { ExactlyOnceError } from '../errors.js';
import type { Logger } from '../log.js';

export interface RetryOptions {
  /** What is being retried, for the log ("Cassandra", "Kafka"). */
  server: string;
  /** Decides from the error (its code or type), never from its message text. */
  isRetriable: (e: unknown) => boolean;
  signal?: AbortSignal | undefined;
  log?: Logger | undefined;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Give up after this long (then the last error is thrown); default: never. */
  deadlineMs?: number;
  /** Called once per failed attempt, e.g. to count retries in a metric. */
  onRetry?: (e: unknown) => void;
}

/** Shared per-server health so that many concurrent retries log one "down" line and one "up" line. */
const down = new Map<string, number>();
/** The last error of each server that is failing now, for messages that must name a cause. */
const lastError = new Map<string, string>();

/** The servers failing now, each with its last error and since when (epoch ms). */
export function failingServers(): Array<{ server: string; since: number; error: string }> {
  return [...down].map(([server, since]) => ({ server, since, error: lastError.get(server) ?? 'unknown error' }));
}

export class AbortedError extends Error {
  constructor() {
    super('aborted');
    this.name = 'AbortedError';
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new AbortedError());
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError());
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export async function retry<T>(fn: () => Promise<T>, o: RetryOptions): Promise<T> {
  const start = Date.now();
  let delay = o.initialDelayMs ?? 100;
  const maxDelay = o.maxDelayMs ?? 10_000;
  for (let attempt = 1; ; attempt++) {
    // A first attempt always runs, so a healthy batch finishes during shutdown; only retries stop.
    if (attempt > 1 && o.signal?.aborted) throw new AbortedError();
    try {
      const result = await fn();
      const since = down.get(o.server);
      if (since !== undefined) {
        down.delete(o.server);
        lastError.delete(o.server);
        o.log?.info({ server: o.server, downMs: Date.now() - since }, `${o.server} answers again`);
      }
      return result;
    } catch (e) {
      if (!o.isRetriable(e)) throw e;
      o.onRetry?.(e);
      lastError.set(o.server, describeShort(e));
      if (!down.has(o.server)) {
        down.set(o.server, Date.now());
        o.log?.warn({ server: o.server, err: describeShort(e) }, `${o.server} is not answering; retrying with backoff until it does`);
      }
      if (o.deadlineMs !== undefined && Date.now() - start + delay > o.deadlineMs) throw e;
      await sleep(delay * (0.5 + Math.random() / 2), o.signal);
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}

function describeShort(e: unknown): string {
  if (e instanceof ExactlyOnceError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e);
}
