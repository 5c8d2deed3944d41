/**
 * The auditor's reads of the events rows, in either layout of the job (src/jobs/events/events-layout.ts):
 * the same offset ranges of one Kafka partition, ascending, whether they live in one Cassandra
 * partition (`events`) or in one per bucket (`events_bucketed`). A bounded range reads the buckets it
 * covers; an open one (rows ahead of a checkpoint, below a log start, of unknown partitions) the
 * buckets that exist, from a scan of the partition keys (`SELECT DISTINCT`), taken when asked.
 */
import { fromLong, toLong, type Row } from '../cassandra/session.js';
import { bucketOf, type EventsLayout } from '../jobs/events/events-layout.js';

/** A query's rows, a page at a time. */
type Pages = <T>(query: string, params: unknown[], map: (row: Row) => T) => AsyncGenerator<T[]>;

async function* flat<T>(pages: AsyncIterable<T[]>): AsyncGenerator<T> {
  for await (const page of pages) yield* page;
}

const COLUMNS = 'offset, id, ts, source, client, health';

export class EventRows<R> {
  private buckets: Map<number, bigint[]> | undefined;

  constructor(
    private readonly pages: Pages,
    private readonly keyspace: string,
    private readonly layout: EventsLayout,
    private readonly map: (row: Row) => R,
  ) {}

  /** Rows of [from, upTo), ascending, a page at a time. */
  async *rangePages(partition: number, from: bigint, upTo: bigint): AsyncGenerator<R[]> {
    const l = this.layout;
    if (l.kind === 'original') {
      yield* this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events WHERE partition = ? AND offset >= ? AND offset < ? ORDER BY offset ASC`, [partition, toLong(from), toLong(upTo)], this.map);
      return;
    }
    if (upTo <= from) return;
    for (let b = bucketOf(l, from); b <= bucketOf(l, upTo - 1n); b++) {
      yield* this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events_bucketed WHERE partition = ? AND bucket = ? AND offset >= ? AND offset < ?`, [partition, toLong(b), toLong(from), toLong(upTo)], this.map);
    }
  }

  /** Rows of [from, upTo), ascending. */
  range(partition: number, from: bigint, upTo: bigint): AsyncGenerator<R> {
    return flat(this.rangePages(partition, from, upTo));
  }

  /** Rows at or after `from`, ascending (the buckets as of the last `rescan`). */
  async *from(partition: number, from: bigint): AsyncGenerator<R> {
    const l = this.layout;
    if (l.kind === 'original') {
      yield* flat(this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events WHERE partition = ? AND offset >= ? ORDER BY offset ASC`, [partition, toLong(from)], this.map));
      return;
    }
    for (const b of (await this.bucketMap()).get(partition) ?? []) {
      if (b < bucketOf(l, from)) continue;
      yield* flat(this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events_bucketed WHERE partition = ? AND bucket = ? AND offset >= ?`, [partition, toLong(b), toLong(from)], this.map));
    }
  }

  /** Rows below `before` (any order). */
  async *below(partition: number, before: bigint): AsyncGenerator<R> {
    const l = this.layout;
    if (l.kind === 'original') {
      yield* flat(this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events WHERE partition = ? AND offset < ?`, [partition, toLong(before)], this.map));
      return;
    }
    for (const b of (await this.bucketMap()).get(partition) ?? []) {
      if (b > bucketOf(l, before - 1n)) break;
      yield* flat(this.pages(`SELECT ${COLUMNS} FROM ${this.keyspace}.events_bucketed WHERE partition = ? AND bucket = ? AND offset < ?`, [partition, toLong(b), toLong(before)], this.map));
    }
  }

  /** The Kafka partitions that have rows (a scan of partition keys only). */
  async *partitions(): AsyncGenerator<number> {
    if (this.layout.kind === 'original') {
      yield* flat(this.pages(`SELECT DISTINCT partition FROM ${this.keyspace}.events`, [], (r) => r['partition'] as number));
      return;
    }
    yield* (await this.bucketMap()).keys();
  }

  /** Forgets the buckets seen, so that the next open read scans for them again (rows written since). */
  rescan(): void {
    this.buckets = undefined;
  }

  private async bucketMap(): Promise<Map<number, bigint[]>> {
    if (this.buckets === undefined) {
      const m = new Map<number, bigint[]>();
      for await (const [p, b] of flat(this.pages(`SELECT DISTINCT partition, bucket FROM ${this.keyspace}.events_bucketed`, [], (r) => [r['partition'] as number, fromLong(r['bucket'])] as const))) {
        const list = m.get(p) ?? [];
        list.push(b);
        m.set(p, list);
      }
      for (const list of m.values()) list.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
      this.buckets = m;
    }
    return this.buckets;
  }
}
