/**
 * Retries an operation against a server that may be down, with capped exponential backoff and
 * jitter, forever or until aborted (shutdown). It logs one line when the server starts failing and
 * one when it answers again, never one per attempt.
 */
import { isReplicasUnavailable, isRetriableCassandraError } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';
import type { Logger } from '../log.js';

/**
 * The one retry classification, read from the error itself (as kafkajs's retrier reads
 * `error.retriable`, src/retry/index.js), never from its message or a list of codes at the call site:
 * - our errors carry `retriable` from their code (src/errors.ts);
 * - the Kafka client's errors (KafkaJSError and its subclasses) carry librdkafka's own verdict in
 *   `retriable`;
 * - the Cassandra driver's errors carry none: they are judged by name and server code
 *   (isRetriableCassandraError, src/cassandra/session.ts).
 * Anything else (a bug, a TypeError) is not retriable: retrying it forever would hide it.
 */
export function isRetriable(e: unknown): boolean {
  if (e instanceof ExactlyOnceError) return e.retriable;
  if (isKafkaClientError(e)) return e.retriable;
  return isRetriableCassandraError(e);
}

/** An error of the Kafka client (told by shape: loading the client here would load its native addon). */
function isKafkaClientError(e: unknown): e is Error & { retriable: boolean } {
  return e instanceof Error && e.name.startsWith('KafkaJS') && typeof (e as { retriable?: unknown }).retriable === 'boolean';
}

export interface RetryOptions {
  /** What is being retried, for the log ("Cassandra", "Kafka"). */
  server: string;
  /** Decides from the error (its class or code), never from its message text; default: isRetriable. */
  isRetriable?: (e: unknown) => boolean;
  signal?: AbortSignal | undefined;
  log?: Logger | undefined;
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Give up after this long (then the last error is thrown); default: never. */
  deadlineMs?: number;
  /** Called once per failed attempt, e.g. to count retries in a metric. */
  onRetry?: (e: unknown) => void;
  /**
   * When the signal aborts, an attempt still running is abandoned at once (AbortedError; its outcome is
   * ignored) instead of awaited: for calls whose result nobody needs once the worker stops (a metadata
   * read, a send the next owner repeats) and which may hang on a server that is gone — a Kafka
   * client's call waits out its own timeouts, a minute and more, while the brokers are down.
   */
  abandonOnAbort?: boolean;
}

/** Shared per-server health so that many concurrent retries log one "down" line and one "up" line. */
const down = new Map<string, number>();
/** Servers that, in the current outage, refused for want of live replicas (logged once, at error level). */
const quorumLost = new Set<string>();
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
    // A call abandoned on abort is not even started once aborted: its answer would be of no use.
    if ((attempt > 1 || o.abandonOnAbort === true) && o.signal?.aborted) throw new AbortedError();
    try {
      const result = await (o.abandonOnAbort === true && o.signal !== undefined ? abandonedOnAbort(fn(), o.signal) : fn());
      const since = down.get(o.server);
      if (since !== undefined) {
        down.delete(o.server);
        lastError.delete(o.server);
        quorumLost.delete(o.server);
        o.log?.info({ server: o.server, downMs: Date.now() - since }, `${o.server} answers again`);
      }
      return result;
    } catch (e) {
      if (e instanceof AbortedError) throw e;
      if (!(o.isRetriable ?? isRetriable)(e)) throw e;
      o.onRetry?.(e);
      lastError.set(o.server, describeShort(e));
      if (!down.has(o.server)) {
        down.set(o.server, Date.now());
        o.log?.warn({ server: o.server, err: describeShort(e) }, `${o.server} is not answering; retrying with backoff until it does`);
      }
      // A node down is a retry; too few replicas alive is an outage of the data: said once, as an error.
      if (isReplicasUnavailable(e) && !quorumLost.has(o.server)) {
        quorumLost.add(o.server);
        o.log?.error(
          { server: o.server, code: 'EO_CASSANDRA_QUORUM_LOST', err: describeShort(e) },
          `${o.server} has too few replicas alive for the consistency level; writes stop until enough nodes are back (then the work resumes where it stopped)`,
        );
      }
      // A deadline (a worker's start-up) gives up on servers that are not there; a cluster that answers
      // "too few replicas alive" is there, and waits for its nodes like a running worker does.
      if (o.deadlineMs !== undefined && Date.now() - start + delay > o.deadlineMs && !isReplicasUnavailable(e)) throw e;
      await sleep(delay * (0.5 + Math.random() / 2), o.signal);
      delay = Math.min(maxDelay, delay * 2);
    }
  }
}

/** `call`'s outcome, or AbortedError as soon as `signal` aborts (the call goes on, unobserved). */
function abandonedOnAbort<T>(call: Promise<T>, signal: AbortSignal): Promise<T> {
  call.catch(() => undefined); // (a failure after it was abandoned is nobody's concern)
  if (signal.aborted) return Promise.reject(new AbortedError());
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(new AbortedError());
    signal.addEventListener('abort', onAbort, { once: true });
    call.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Whether a failure is the shutdown's doing: AbortedError, or anything a call threw once `signal` had
 * aborted (a job's write that checks the signal throws the platform's own AbortError). Such a batch is
 * abandoned before its checkpoint, never stopped with a code: the next owner reads it again.
 */
export function abortedBy(e: unknown, signal: AbortSignal | undefined): boolean {
  return e instanceof AbortedError || signal?.aborted === true;
}

function describeShort(e: unknown): string {
  if (e instanceof ExactlyOnceError) return `${e.code}: ${e.message}`;
  return e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e);
}
