/**
 * Where the events job stores its rows: a setting of the job (stored with it, so every worker and
 * `verify` use the same), chosen by the first worker with `run --layout`.
 *
 * - `original` (the default): the `events` table, unchanged from the seed job, keyed by (partition,
 *   offset). A whole Kafka partition is one Cassandra partition: with P Kafka partitions, P token
 *   ranges hold all the data whatever the cluster size, and each grows without bound.
 * - `bucketed[:N]`: `events_bucketed`, keyed by ((partition, offset / N), offset), N offsets per bucket
 *   (default 100,000: ~10 MB at ~100 bytes a row). Data spreads over the ring, every Cassandra
 *   partition stays bounded, and a batch (never across two buckets) is still one partition's mutation.
 */
import { ExactlyOnceError } from '../../errors.js';

export type EventsLayout = { readonly kind: 'original' } | { readonly kind: 'bucketed'; readonly bucketOffsets: number };

export const ORIGINAL_LAYOUT: EventsLayout = { kind: 'original' };
export const DEFAULT_BUCKET_OFFSETS = 100_000;

/** `original`, `bucketed` or `bucketed:N`; throws EO_CONFIG_INVALID naming `--layout`. */
export function parseLayout(text: string, where = ''): EventsLayout {
  if (text === 'original') return ORIGINAL_LAYOUT;
  const m = /^bucketed(?::(\d{1,10}))?$/.exec(text);
  const n = m === null ? NaN : m[1] === undefined ? DEFAULT_BUCKET_OFFSETS : Number(m[1]);
  if (!(n >= 1 && n <= 1e9)) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--layout: expected original, bucketed or bucketed:N with N offsets per bucket from 1 to 1e9 (got '${text}'${where})`);
  return { kind: 'bucketed', bucketOffsets: n };
}

export function formatLayout(l: EventsLayout): string {
  return l.kind === 'original' ? 'original' : `bucketed:${l.bucketOffsets}`;
}

/** The table the layout's rows live in. */
export function eventsTable(l: EventsLayout): 'events' | 'events_bucketed' {
  return l.kind === 'original' ? 'events' : 'events_bucketed';
}

export function bucketOf(l: Extract<EventsLayout, { kind: 'bucketed' }>, offset: bigint): bigint {
  return offset < 0n ? -1n : offset / BigInt(l.bucketOffsets);
}

/**
 * Splits records (in offset order) into runs that share one Cassandra partition: the whole list in
 * the `original` layout, one run per bucket in the bucketed one.
 */
export function sameCassandraPartition<T>(l: EventsLayout, items: readonly T[], offsetOf: (t: T) => bigint): (readonly T[])[] {
  if (l.kind === 'original' || items.length === 0) return items.length === 0 ? [] : [items]; // no copy on the hot path
  const runs: (readonly T[])[] = [];
  let current: T[] = [];
  let bucket: bigint | null = null;
  for (const t of items) {
    const b = bucketOf(l, offsetOf(t));
    if (bucket !== null && b !== bucket) {
      runs.push(current);
      current = [];
    }
    bucket = b;
    current.push(t);
  }
  runs.push(current);
  return runs;
}
