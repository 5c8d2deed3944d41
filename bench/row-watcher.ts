/**
 * Sees sampled rows of `events` become readable. The latency case's topic is fresh and written by one
 * idempotent producer with explicit partitions, so the k-th record sent to partition p has offset k:
 * every `sampleEvery`-th record of each partition is watched, and every `pollMs` the oldest watched
 * offsets not seen yet are read with one `offset IN (…)` query per partition (a handful of rows, so
 * that the watcher adds little load to the machine it measures). For each row found, the latency is
 * the time it was first read minus its event time (`ts`, set to the wall clock when the event was
 * handed to the producer). Same machine, same clock.
 */
import type { Client } from '../src/cassandra/session.js';
import { toLong } from '../src/cassandra/session.js';
import { sleep } from '../src/harness/sleep.js';
import { bucketOf, ORIGINAL_LAYOUT, type EventsLayout } from '../src/jobs/events/events-layout.js';

/** Most offsets asked for per partition and poll (the oldest first: rows become readable roughly in order). */
const MAX_IN = 100;

export class RowWatcher {
  /** Per partition: records sent so far (= the next offset), and the sampled offsets not yet seen. */
  private readonly partitions: Array<{ sent: number; pending: number[] }>;
  /** Event time and latency of every sampled row seen, in ms. */
  readonly ts: number[] = [];
  readonly latencyMs: number[] = [];
  private sampled = 0;
  private running = false;
  private loop: Promise<void> | undefined;
  /** The first of an unbroken run of failed polls, and its error. */
  private failing: { since: number; error: unknown } | undefined;

  constructor(
    private readonly session: Client,
    private readonly keyspace: string,
    partitions: number,
    private readonly pollMs: number,
    private readonly sampleEvery: number,
    /** The workers' events layout: the sampled rows are read back from the table it writes. */
    private readonly layout: EventsLayout = ORIGINAL_LAYOUT,
  ) {
    this.partitions = Array.from({ length: partitions }, () => ({ sent: 0, pending: [] }));
  }

  /** Called for every record handed to the producer, in send order. */
  sent(partition: number): void {
    const p = this.partitions[partition]!;
    if (p.sent % this.sampleEvery === 0) {
      p.pending.push(p.sent);
      this.sampled++;
    }
    p.sent++;
  }

  /** Sampled rows seen so far, and sampled in all. */
  get progress(): { seen: number; sampled: number } {
    return { seen: this.ts.length, sampled: this.sampled };
  }

  start(): void {
    this.running = true;
    const query =
      this.layout.kind === 'original'
        ? `SELECT offset, ts FROM ${this.keyspace}.events WHERE partition = ? AND offset IN ?`
        : `SELECT offset, ts FROM ${this.keyspace}.events_bucketed WHERE partition = ? AND bucket = ? AND offset IN ?`;
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        try {
          await Promise.all(this.partitions.map((p, i) => (p.pending.length > 0 ? this.poll(query, i, p) : undefined)));
          this.failing = undefined;
        } catch (e) {
          this.failing ??= { since: Date.now(), error: e };
        }
        const wait = this.pollMs - (Date.now() - started);
        if (wait > 0) await sleep(wait);
      }
    })();
  }

  private async poll(query: string, partition: number, p: { pending: number[] }): Promise<void> {
    const l = this.layout;
    let asked = p.pending.slice(0, MAX_IN);
    let params: unknown[] = [partition, asked.map((o) => toLong(BigInt(o)))];
    if (l.kind === 'bucketed') {
      // One bucket per query: the oldest pending offset's.
      const bucket = bucketOf(l, BigInt(asked[0]!));
      asked = asked.filter((o) => bucketOf(l, BigInt(o)) === bucket);
      params = [partition, toLong(bucket), asked.map((o) => toLong(BigInt(o)))];
    }
    const r = await this.session.execute(query, params, { prepare: true });
    const now = Date.now();
    const found = new Set<number>();
    for (const row of r.rows) {
      found.add(Number(row['offset'].toString()));
      const ts = (row['ts'] as Date).getTime();
      this.ts.push(ts);
      this.latencyMs.push(now - ts);
    }
    if (found.size > 0) p.pending = p.pending.filter((o) => !found.has(o));
  }

  /** Throws when polls have failed for a minute without a break (a short Cassandra restart is waited out). */
  check(): void {
    if (this.failing !== undefined && Date.now() - this.failing.since > 60_000) throw this.failing.error;
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/** The q-quantile (0..1) of sorted values, nearest-rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
