/**
 * docs/design.md §4 invariant 3: the alerts recomputed from the events, compared with the `alerts` table
 * and with the latest message per key of the alerts topic. Pure: rows and messages are fed in,
 * differences come out through `report`. Memory grows with the number of windows × sources.
 */
import { alertKey, type Alert } from '../jobs/events/alert-rule.js';
import { alertTopicKey } from '../jobs/events/alerts.js';
import type { AlertSideReport, Violation } from './report.js';

export type AlertViolation = Violation & { kind: 'alert_missing' | 'alert_extra' | 'alert_count' | 'alert_malformed' };

/** The range of a JavaScript Date, in ms (±10^8 days, ECMA-262 §21.4.1.1): no window ends beyond it. */
const DATE_LIMIT_MS = 8.64e15;
const inDateRange = (ms: number) => Math.abs(ms) <= DATE_LIMIT_MS;
const fmt = (a: { source: string; ts: number }) => `alert ${JSON.stringify(a.source)} window end ${a.ts}${inDateRange(a.ts) ? ` (${new Date(a.ts).toISOString()})` : ''}`;

/** Compares what one side holds (table rows, or latest topic messages) with the expected alerts. */
export class AlertDiff {
  private readonly expected = new Map<string, Alert>();
  private readonly seen = new Set<string>();
  readonly side: AlertSideReport;

  constructor(
    expected: Iterable<Alert>,
    private readonly where: 'table' | 'topic',
    name: string,
    private readonly report: (v: AlertViolation) => void,
  ) {
    for (const a of expected) this.expected.set(alertKey(a.source, a.ts), a);
    this.side = { name, found: 0, missing: 0, extra: 0, count: 0, malformed: 0, exists: true };
  }

  /** One alert as found on this side (each window at most once). */
  found(a: Alert): void {
    this.side.found++;
    const k = alertKey(a.source, a.ts);
    this.seen.add(k);
    const want = this.expected.get(k);
    const where = this.where === 'table' ? 'alerts table' : `topic ${this.side.name}`;
    if (want === undefined) {
      this.side.extra++;
      this.report({
        kind: 'alert_extra',
        where: this.where,
        alert: { source: a.source, ts: a.ts, expected: null, found: a.eventCount },
        message: `${fmt(a)}: extra in the ${where} (count ${a.eventCount}); the events give no alert for this window`,
      });
    } else if (want.eventCount !== a.eventCount) {
      this.side.count++;
      this.report({
        kind: 'alert_count',
        where: this.where,
        alert: { source: a.source, ts: a.ts, expected: want.eventCount, found: a.eventCount },
        message: `${fmt(a)}: count ${a.eventCount} in the ${where}, the events give ${want.eventCount}`,
      });
    }
  }

  /** A message that is not an alert (topic side only). */
  malformed(partition: number, offset: bigint, why: string): void {
    this.side.malformed++;
    this.report({ kind: 'alert_malformed', where: this.where, partition, offset: String(offset), message: `topic ${this.side.name} partition ${partition} offset ${offset}: not an alert message (${why})` });
  }

  /** Reports every expected alert not found; call once, after everything was fed. */
  finish(): AlertSideReport {
    const where = this.where === 'table' ? 'alerts table' : `topic ${this.side.name}`;
    for (const [k, a] of this.expected) {
      if (this.seen.has(k)) continue;
      this.side.missing++;
      this.report({
        kind: 'alert_missing',
        where: this.where,
        alert: { source: a.source, ts: a.ts, expected: a.eventCount, found: null },
        message: `${fmt(a)}: missing from the ${where} (the events give count ${a.eventCount})`,
      });
    }
    return this.side;
  }
}

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
