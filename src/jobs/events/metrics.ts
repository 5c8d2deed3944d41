/** The application's metrics, registered beside the engine's in the worker's registry. */
import { Counter, type Registry } from 'prom-client';
import type { AlertOutcome } from './alerts.js';

export function alertMetrics(registry: Registry): (outcome: AlertOutcome, late: number) => void {
  const registers = [registry];
  const raised = new Counter({ name: 'exactlyonce_alerts_raised_total', help: 'Windows that reached the alert threshold', registers });
  const revised = new Counter({ name: 'exactlyonce_alerts_revised_total', help: 'Alert revisions stored after more events of their window arrived', registers });
  const late = new Counter({ name: 'exactlyonce_late_events_total', help: 'Events older than the newest seen minus one window', registers });
  return (o, lateEvents) => {
    raised.inc(o.raised);
    revised.inc(o.revised);
    late.inc(lateEvents);
  };
}
