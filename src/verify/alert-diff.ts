/**
 * docs/design.md §4 invariant 3: the alerts recomputed from the events, compared with the `alerts` table
 * and with the latest message per key of the alerts topic. Pure: rows and messages are fed in,
 * differences come out through `report`. Memory grows with the number of windows × sources.
 */
import { alertKey, type Alert } from '../jobs/events/alert-rule.js';
import { inDateRange } from '../jobs/events/alert-messages.js';
import type { AlertSideReport, Violation } from './report.js';

export type AlertViolation = Violation & { kind: 'alert_missing' | 'alert_extra' | 'alert_count' | 'alert_malformed' };

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
