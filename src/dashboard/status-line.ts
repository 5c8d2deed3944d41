/** The one-line terminal view of a dashboard snapshot (the demo prints it every second). */
import type { Snapshot } from './snapshot.js';

const n = (v: number | null | undefined): string => (v === null || v === undefined ? '–' : Math.round(v).toLocaleString('en-US'));

export function statusLine(s: Snapshot | undefined): string {
  if (s === undefined) return 'waiting for the first numbers…';
  const alerts = s.alerts === null ? '–' : n(s.alerts.rows);
  return (
    `${n(s.rates.stored)} events/s · lag ${n(s.totals.lag)} · stored ${n(s.totals.stored)} · ` +
    `quarantined ${n(s.totals.quarantined)} · alerts ${alerts} · workers ${s.totals.workersReady}/${s.totals.workers} ready`
  );
}
