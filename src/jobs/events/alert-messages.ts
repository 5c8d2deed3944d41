/**
 * The alerts topic's messages, as the events job publishes them (src/jobs/events/alerts.ts): their
 * decoding, the window a key names, and the latest message per key of a compacted topic. Read by
 * `verify` (src/verify/alert-audit.ts) and by `alerts rule` (src/jobs/events/rule-change.ts).
 */
import { type Alert } from './alert-rule.js';
import { alertTopicKey } from './alerts.js';

/** The range of a JavaScript Date, in ms (±10^8 days, ECMA-262 §21.4.1.1): no window ends beyond it. */
export const DATE_LIMIT_MS = 8.64e15;
export const inDateRange = (ms: number) => Math.abs(ms) <= DATE_LIMIT_MS;

export type DecodedAlertMessage = { ok: true; key: string; alert: Alert | null } | { ok: false; why: string };

/**
 * An alerts-topic message: key `source@windowEnd` (UTF-8), value `{"ts", "source", "eventCount"}`;
 * a null value is a tombstone (the key's alert is deleted).
 */
export function decodeAlertMessage(key: Buffer | null, value: Buffer | null): DecodedAlertMessage {
  if (key === null) return { ok: false, why: 'no key' };
  const k = key.toString('utf8');
  if (value === null) return { ok: true, key: k, alert: null };
  let v: unknown;
  try {
    v = JSON.parse(value.toString('utf8'));
  } catch {
    return { ok: false, why: 'the value is not JSON' };
  }
  const o = v as { ts?: unknown; source?: unknown; eventCount?: unknown };
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return { ok: false, why: 'the value is not a JSON object' };
  if (typeof o.source !== 'string') return { ok: false, why: 'source is not a string' };
  if (typeof o.ts !== 'number' || !Number.isSafeInteger(o.ts)) return { ok: false, why: 'ts is not an integer' };
  // A window of the events job ends within a Date's range (the codec refuses events beyond it): a time
  // past it names no window, and a Date made from it would be invalid.
  if (!inDateRange(o.ts)) return { ok: false, why: `ts ${o.ts} is outside the dates a window can end at (±${DATE_LIMIT_MS} ms)` };
  if (typeof o.eventCount !== 'number' || !Number.isSafeInteger(o.eventCount)) return { ok: false, why: 'eventCount is not an integer' };
  const want = alertTopicKey(o.source, o.ts);
  if (k !== want) return { ok: false, why: `key ${JSON.stringify(k)} is not ${JSON.stringify(want)}` };
  return { ok: true, key: k, alert: { source: o.source, ts: o.ts, eventCount: o.eventCount } };
}

/**
 * The latest message per key. Within a partition the higher offset is later; a key should live on one
 * partition (keyed partitioning), and if it moved (partitions added) the later Kafka timestamp wins.
 */
export class LatestPerKey {
  private readonly latest = new Map<string, { partition: number; offset: bigint; timestampMs: number; alert: Alert | null }>();
  messages = 0;

  add(partition: number, offset: bigint, timestampMs: number, key: string, alert: Alert | null): void {
    this.messages++;
    const prev = this.latest.get(key);
    const later =
      prev === undefined ||
      (prev.partition === partition ? offset > prev.offset : timestampMs >= prev.timestampMs);
    if (later) this.latest.set(key, { partition, offset, timestampMs, alert });
  }

  *alerts(): Iterable<Alert> {
    for (const v of this.latest.values()) if (v.alert !== null) yield v.alert;
  }

  /** Every key's latest message: where it is and its alert (null: a tombstone). */
  entries(): IterableIterator<[string, { partition: number; offset: bigint; alert: Alert | null }]> {
    return this.latest.entries();
  }
}

/** The window an alerts-topic key `source@windowEnd` names, or null when it names none. */
export function windowOfKey(key: string): { source: string; end: number } | null {
  const at = key.lastIndexOf('@');
  if (at < 0 || !/^-?\d+$/.test(key.slice(at + 1))) return null;
  const end = Number(key.slice(at + 1));
  return Number.isSafeInteger(end) && inDateRange(end) ? { source: key.slice(0, at), end } : null;
}
