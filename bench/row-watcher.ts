/**
 * Sees rows of `events` become readable: every `pollMs` it reads, for each partition, the rows at or
 * above the lowest offset not yet seen (the table is clustered by offset, so this is one slice of one
 * Cassandra partition), and records for each new row the time it was first read minus its event time
 * (`ts`, set to the wall clock when the event was produced). Same machine, same clock.
 */
import type { Client } from '../src/cassandra/session.js';
import { toLong } from '../src/cassandra/session.js';

export class RowWatcher {
  /** Per partition: every offset below `floor` has been seen; `above` holds those seen above it. */
  private readonly seen: Array<{ floor: bigint; above: Set<bigint> }>;
  /** Event time and latency of every row seen, in ms. */
  readonly ts: number[] = [];
  readonly latencyMs: number[] = [];
  private running = false;
  private loop: Promise<void> | undefined;
  private failure: unknown;

  constructor(
    private readonly session: Client,
    private readonly keyspace: string,
    partitions: number,
    private readonly pollMs: number,
  ) {
    this.seen = Array.from({ length: partitions }, () => ({ floor: 0n, above: new Set<bigint>() }));
  }

  get count(): number {
    return this.ts.length;
  }

  start(): void {
    this.running = true;
    const query = `SELECT offset, ts FROM ${this.keyspace}.events WHERE partition = ? AND offset >= ?`;
    this.loop = (async () => {
      while (this.running) {
        const started = Date.now();
        try {
          await Promise.all(this.seen.map((s, p) => this.poll(query, p, s)));
        } catch (e) {
          this.failure ??= e;
        }
        const wait = this.pollMs - (Date.now() - started);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    })();
  }

  private async poll(query: string, partition: number, s: { floor: bigint; above: Set<bigint> }): Promise<void> {
    const r = await this.session.execute(query, [partition, toLong(s.floor)], { prepare: true, fetchSize: 100_000 });
    const now = Date.now();
    for (const row of r.rows) {
      const offset = BigInt(row['offset'].toString());
      if (offset < s.floor || s.above.has(offset)) continue;
      s.above.add(offset);
      const ts = (row['ts'] as Date).getTime();
      this.ts.push(ts);
      this.latencyMs.push(now - ts);
    }
    while (s.above.delete(s.floor)) s.floor++;
  }

  /** Throws the first error a poll hit (Cassandra timing out under load, say). */
  check(): void {
    if (this.failure !== undefined) throw this.failure;
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
