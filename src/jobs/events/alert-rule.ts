/**
 * The seed job's alert rule, on event time: per source and window, the number of events at the counted
 * health level (Critical by default); a window whose count reaches the threshold (10 by default) is an
 * alert `(source, ts = window end, event_count)`. Pure: `expectedAlerts` is the recomputation the
 * auditor and the tests compare the `alerts` table with.
 */
import type { HealthCode } from './event.js';
import { DEFAULT_WINDOWS, windowEnds, type WindowSpec } from './windows.js';

export interface AlertRule {
  readonly windows: WindowSpec;
  /** Count at which a window alerts (default 10). */
  readonly threshold: number;
  /** The health level counted (default 2, Critical). */
  readonly health: HealthCode;
}

export const DEFAULT_ALERT_RULE: AlertRule = { windows: DEFAULT_WINDOWS, threshold: 10, health: 2 };

export interface Alert {
  readonly source: string;
  /** Window end, epoch ms (the `ts` column of `alerts`). */
  readonly ts: number;
  readonly eventCount: number;
}

/** `source` and window end as one map key. */
export function alertKey(source: string, windowEnd: number): string {
  return `${windowEnd}\u0000${source}`;
}

/** Counts events per (source, window) for a rule; feed it events in any order, then read `alerts()`. */
export class WindowCounter {
  private readonly counts = new Map<string, { source: string; ts: number; n: number }>();

  constructor(private readonly rule: AlertRule) {}

  add(e: { source: string; ts: number; health: number }): void {
    if (e.health !== this.rule.health) return;
    for (const end of windowEnds(e.ts, this.rule.windows)) {
      const k = alertKey(e.source, end);
      const c = this.counts.get(k);
      if (c === undefined) this.counts.set(k, { source: e.source, ts: end, n: 1 });
      else c.n++;
    }
  }

  /** The number of counted events of one source in the window ending at `windowEnd` (0 if none). */
  count(source: string, windowEnd: number): number {
    return this.counts.get(alertKey(source, windowEnd))?.n ?? 0;
  }

  /** The alerts: windows at or above the threshold, sorted by window end then source. */
  alerts(): Alert[] {
    return [...this.counts.values()]
      .filter((c) => c.n >= this.rule.threshold)
      .map((c) => ({ source: c.source, ts: c.ts, eventCount: c.n }))
      .sort((a, b) => a.ts - b.ts || (a.source < b.source ? -1 : a.source > b.source ? 1 : 0));
  }
}

/** The rule in words, e.g. `window 5000 ms, slide 5000 ms, threshold 10, health 2`. */
export function describeRule(rule: AlertRule): string {
  return `window ${rule.windows.sizeMs} ms, slide ${rule.windows.slideMs} ms, threshold ${rule.threshold}, health ${rule.health}`;
}

export function expectedAlerts(events: Iterable<{ source: string; ts: number; health: number }>, rule: AlertRule = DEFAULT_ALERT_RULE): Alert[] {
  const counter = new WindowCounter(rule);
  for (const e of events) counter.add(e);
  return counter.alerts();
}
