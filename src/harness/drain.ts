/**
 * Watching a pipeline's checkpoints from outside: until every partition is drained (its checkpoint at
 * the end of what can be read), and, live, that no checkpoint ever moves backwards (docs/design.md §4,
 * invariant 2). The one notion of drained of chaos, the demo, the bench and the tests.
 */
import type { Watermarks } from '../kafka/admin.js';
import { sleep } from './sleep.js';

/** Each partition's checkpoint (next offset to read); a partition without one is absent. */
export type ReadCheckpoints = () => Promise<ReadonlyMap<number, bigint>>;

/** Each partition's checkpoint with its reset epoch (CheckpointStore.readStored), for the watch. */
export type ReadStoredCheckpoints = () => Promise<ReadonlyMap<number, bigint | { next: bigint; epoch: number }>>;

/** A checkpoint that went back with a Cassandra crash: where to, and when the crash before it was. */
export interface CheckpointLoss {
  partition: number;
  to: bigint;
  /** Date.now() of the last Cassandra crash before it was seen. */
  crashAt: number;
}

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
 * writes; the workers rewrite them, src/engine/lost-writes.ts, and `verify` proves it): a loss. Read
 * with their reset epochs, a move back into a higher epoch is neither: a reset or a worker's rewind,
 * which the worker logs (`rewinds`).
 */
export class CheckpointWatch {
  /** The highest checkpoint seen per partition (in the highest epoch seen). */
  readonly highest = new Map<number, bigint>();
  readonly regressions: string[] = [];
  /** Moves backwards across a Cassandra crash (the store lost acknowledged writes). */
  readonly losses: string[] = [];
  /** The same, with where to and when the crash was (for chaos's check that each was found). */
  readonly lossDetails: CheckpointLoss[] = [];
  /** Moves backwards into a higher reset epoch: a reset or a rewind. */
  readonly rewinds: string[] = [];
  polls = 0;
  private running = true;
  private crashes = 0;
  private lastCrashAt = 0;
  /** The crashes counted when each partition's highest checkpoint was seen. */
  private readonly seenAt = new Map<number, number>();
  private readonly epochs = new Map<number, number>();
  private readonly loop: Promise<void>;

  constructor(read: ReadCheckpoints | ReadStoredCheckpoints, intervalMs: number) {
    this.loop = (async () => {
      while (this.running) {
        try {
          for (const [p, c] of await read()) {
            const o = typeof c === 'bigint' ? c : c.next;
            const epoch = typeof c === 'bigint' ? 0 : c.epoch;
            const prev = this.highest.get(p);
            const prevEpoch = this.epochs.get(p) ?? 0;
            if (prev !== undefined && epoch > prevEpoch) {
              if (o < prev) this.rewinds.push(`partition ${p}: checkpoint ${prev} -> ${o} (epoch ${prevEpoch} -> ${epoch})`);
              this.set(p, o, epoch);
              continue;
            }
            if (prev !== undefined && (o < prev || epoch < prevEpoch)) {
              const lost = this.crashes > (this.seenAt.get(p) ?? 0);
              (lost ? this.losses : this.regressions).push(`partition ${p}: checkpoint ${prev} -> ${o}${epoch < prevEpoch ? ` (epoch ${prevEpoch} -> ${epoch})` : ''}`);
              if (lost) {
                this.lossDetails.push({ partition: p, to: o, crashAt: this.lastCrashAt });
                this.set(p, o, epoch);
              }
              continue;
            }
            if (prev === undefined || o > prev) this.set(p, o, epoch);
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
    this.lastCrashAt = Date.now();
  }

  private set(p: number, o: bigint, epoch: number): void {
    this.highest.set(p, o);
    this.epochs.set(p, epoch);
    this.seenAt.set(p, this.crashes);
  }

  /** Idempotent. */
  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}
