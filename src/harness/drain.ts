/**
 * Watching a pipeline's checkpoints from outside: until every partition is drained (its checkpoint at
 * the end of what can be read), and, live, that no checkpoint ever moves backwards (DESIGN.md §4,
 * invariant 2). The one notion of drained of chaos, the demo, the bench and the tests.
 */
import type { Watermarks } from '../kafka/admin.js';
import { sleep } from './sleep.js';

/** Each partition's checkpoint (next offset to read); a partition without one is absent. */
export type ReadCheckpoints = () => Promise<ReadonlyMap<number, bigint>>;

/**
 * Every partition's checkpoint is at the end of what a read_committed consumer can read, its last
 * stable offset: past every committed record, and past the aborted records and transaction markers
 * before it (the workers step over those). The records of a transaction still open, after it, are not
 * waited for: they may never become readable. A partition with nothing readable needs no checkpoint.
 */
export function isDrained(marks: readonly Watermarks[], checkpoints: ReadonlyMap<number, bigint>): boolean {
  return marks.every((w) => (checkpoints.get(w.partition) ?? w.low) >= w.stable);
}

/**
 * Polls the log ends and the checkpoints until drained; resolves with the log ends then, or with
 * undefined at the deadline or when `signal` aborts. A read that fails (a server coming back) is retried.
 */
export async function waitDrained(
  logEnds: () => Promise<readonly Watermarks[]>,
  checkpoints: ReadCheckpoints,
  o: { timeoutMs?: number; intervalMs: number; signal?: AbortSignal },
): Promise<readonly Watermarks[] | undefined> {
  const deadline = Date.now() + (o.timeoutMs ?? Infinity);
  while (Date.now() < deadline && o.signal?.aborted !== true) {
    try {
      const marks = await logEnds();
      if (isDrained(marks, await checkpoints())) return marks;
    } catch {
      // a server still coming back
    }
    await sleep(o.intervalMs, o.signal);
  }
  return undefined;
}

/**
 * Polls the checkpoints until stopped and records every move backwards: a regression, unless Cassandra
 * crashed since the higher one was seen (on the periodic commit log a crashed node forgets acknowledged
 * writes; the workers rewrite them, src/engine/lost-writes.ts, and `verify` proves it): a loss.
 */
export class CheckpointWatch {
  /** The highest checkpoint seen per partition. */
  readonly highest = new Map<number, bigint>();
  readonly regressions: string[] = [];
  /** Moves backwards across a Cassandra crash (the store lost acknowledged writes). */
  readonly losses: string[] = [];
  polls = 0;
  private running = true;
  private crashes = 0;
  /** The crashes counted when each partition's highest checkpoint was seen. */
  private readonly seenAt = new Map<number, number>();
  private readonly loop: Promise<void>;

  constructor(read: ReadCheckpoints, intervalMs: number) {
    this.loop = (async () => {
      while (this.running) {
        try {
          for (const [p, o] of await read()) {
            const prev = this.highest.get(p);
            if (prev !== undefined && o < prev) {
              const lost = this.crashes > (this.seenAt.get(p) ?? 0);
              (lost ? this.losses : this.regressions).push(`partition ${p}: checkpoint ${prev} -> ${o}`);
              if (lost) this.set(p, o);
            }
            if (prev === undefined || o > prev) this.set(p, o);
          }
          this.polls++;
        } catch {
          // Cassandra may be restarting.
        }
        await sleep(intervalMs);
      }
    })();
  }

  /** Cassandra was SIGKILLed: what it acknowledged since its last commit log sync may be gone. */
  storeCrashed(): void {
    this.crashes++;
  }

  private set(p: number, o: bigint): void {
    this.highest.set(p, o);
    this.seenAt.set(p, this.crashes);
  }

  /** Idempotent. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
