/**
 * Sends a stream of records through the project's idempotent producer (src/kafka/producer.ts), in
 * chunks with a bounded number of sends in flight, optionally paced at a rate: what `generate`,
 * `chaos` and the bench produce with. Records are taken from the iterable only when they are due, so
 * a record stamped with the wall clock as it is taken (the bench's latency case) is sent at once.
 */
import type { OutgoingRecord, Producer } from '../kafka/producer.js';
import { sleep } from './sleep.js';

/** Pacing granularity, in ms: records due within it are sent together. */
const TICK_MS = 10;

export interface PacedProduceOptions {
  topic: string;
  /** Records per second; left out: as fast as the in-flight bound allows. */
  rate?: number;
  /** Records per send, at most. */
  chunk: number;
  /** Sends in flight, at most. */
  inFlight: number;
  /** A pause in ms after the i-th record (1-based), e.g. `generate`'s 500 ms every ten rounds (the seed job's generator pacing); 0 for none. */
  pauseAfter?: (i: number) => number;
  /** Called with the number of records acknowledged so far, after each acknowledged send. */
  onAcked?: (acked: number) => void;
  /** Stops taking records (those already handed over are still awaited); the result says how many were acknowledged. */
  signal?: AbortSignal;
}

/**
 * Resolves with the number of records acknowledged, once every send has settled; rejects with the
 * first send's failure (no further records are taken after one). The caller owns the producer.
 */
export async function producePaced(producer: Pick<Producer, 'send'>, records: Iterable<OutgoingRecord>, o: PacedProduceOptions): Promise<number> {
  const started = Date.now();
  const stopped = () => o.signal?.aborted === true;
  const inFlight = new Set<Promise<void>>();
  let failure: unknown;
  let acked = 0;
  let chunk: OutgoingRecord[] = [];
  const flush = async () => {
    if (chunk.length === 0) return;
    const batch = chunk;
    chunk = [];
    const p = producer.send(o.topic, batch).then(
      () => {
        acked += batch.length;
        o.onAcked?.(acked);
      },
      (e: unknown) => void (failure ??= e),
    );
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    if (inFlight.size >= o.inFlight) await Promise.race(inFlight);
  };
  try {
    const it = records[Symbol.iterator]();
    for (let i = 1; failure === undefined && !stopped(); i++) {
      if (o.rate !== undefined) {
        // Record i is due (i - 1) / rate seconds after the start.
        const wait = started + ((i - 1) / o.rate) * 1000 - Date.now();
        if (wait > TICK_MS) {
          await flush();
          await sleep(wait, o.signal);
          if (stopped()) break;
        }
      }
      const next = it.next();
      if (next.done === true) break;
      chunk.push(next.value);
      const pause = o.pauseAfter?.(i) ?? 0;
      if (pause > 0) {
        await flush();
        await sleep(pause, o.signal);
      } else if (chunk.length >= o.chunk) {
        await flush();
      }
    }
    if (failure === undefined) await flush();
  } finally {
    await Promise.all([...inFlight]);
  }
  if (failure !== undefined) throw failure;
  return acked;
}
