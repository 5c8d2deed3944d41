/**
 * The worker's progress as one line every few seconds (`run` and `sink` print it; --progress-interval),
 * read from its own metrics (src/engine/metrics.ts), so what a terminal shows is what /metrics serves:
 *
 *   progress: 1200 records stored (+200 in 10 s), 3 quarantined, lag 0, partitions 0,1,2
 *
 * `progressLine` is pure; `reportProgress` owns the timer.
 */
import type { EngineMetrics } from './metrics.js';

export interface ProgressSnapshot {
  /** Records stored and quarantined by this worker since it started. */
  readonly stored: number;
  readonly quarantined: number;
  /** Records behind, summed over the owned partitions whose lag is known (undefined: none known yet). */
  readonly lag: number | undefined;
  readonly owned: readonly number[];
  readonly stopped: readonly number[];
}

type Values = { values: Array<{ value: number; labels: Partial<Record<string, string | number>> }> };
const sum = (m: Values) => m.values.reduce((a, v) => a + v.value, 0);
const partitionsWith = (m: Values, value: number) =>
  m.values
    .filter((v) => v.value === value)
    .map((v) => Number(v.labels['partition']))
    .sort((a, b) => a - b);

export async function progressSnapshot(m: EngineMetrics): Promise<ProgressSnapshot> {
  const [stored, quarantined, lag, owned, stopped] = (await Promise.all([m.stored.get(), m.quarantined.get(), m.lag.get(), m.owned.get(), m.stoppedPartitions.get()])) as Values[];
  return { stored: sum(stored!), quarantined: sum(quarantined!), lag: lag!.values.length === 0 ? undefined : sum(lag!), owned: partitionsWith(owned!, 1), stopped: partitionsWith(stopped!, 1) };
}

/** One line: totals, what changed since the last line, the lag and the partitions (stopped ones named). */
export function progressLine(prev: ProgressSnapshot | undefined, now: ProgressSnapshot, seconds: number): string {
  const added = prev === undefined ? '' : ` (+${now.stored - prev.stored} in ${seconds} s)`;
  const partitions = now.owned.length === 0 ? 'no partitions owned (yet)' : `partitions ${now.owned.join(',')}`;
  const stopped = now.stopped.length === 0 ? '' : `; stopped: ${now.stopped.join(',')} (exactlyonce status says why)`;
  return `progress: ${now.stored} records stored${added}, ${now.quarantined} quarantined, lag ${now.lag ?? 'unknown'}, ${partitions}${stopped}`;
}

/** Calls `print` with a progress line every `everyMs` (0: never); returns the stop function (idempotent). */
export function reportProgress(m: EngineMetrics, everyMs: number, print: (line: string) => void): () => void {
  if (everyMs <= 0) return () => undefined;
  let prev: ProgressSnapshot | undefined;
  const timer = setInterval(() => {
    void progressSnapshot(m).then((now) => {
      print(progressLine(prev, now, Math.round(everyMs / 1000)));
      prev = now;
    });
  }, everyMs);
  timer.unref(); // never what keeps a stopping worker alive
  return () => clearInterval(timer);
}
