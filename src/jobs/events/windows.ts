/**
 * Event-time windows, aligned to the epoch: window k covers [k·slide, k·slide + size). With
 * slide = size (the default, 5 s) they tumble; with slide < size they overlap and an event counts in
 * every window that contains it (size/slide of them when slide divides size). A window is named by its
 * end: the `alerts` table, the seed job's verbatim, stores `ts = window end`. Pure: no clock, no I/O.
 */
export interface WindowSpec {
  /** Window length in ms (default 5000). */
  readonly sizeMs: number;
  /** Distance between window starts in ms (default 5000). */
  readonly slideMs: number;
}

export const DEFAULT_WINDOWS: WindowSpec = { sizeMs: 5000, slideMs: 5000 };

/** Floor division that is right for negative numbers too. */
function floorDiv(a: number, b: number): number {
  return Math.floor(a / b);
}

/**
 * The ends of every window that contains `tsMs`, ascending. A ts exactly on a boundary belongs to the
 * window starting there (windows are closed at the start, open at the end).
 */
export function windowEnds(tsMs: number, spec: WindowSpec): number[] {
  const { sizeMs, slideMs } = spec;
  // Windows containing ts have starts s = k·slide with ts - size < s <= ts.
  const last = floorDiv(tsMs, slideMs);
  const first = floorDiv(tsMs - sizeMs, slideMs) + 1;
  const ends: number[] = [];
  for (let k = first; k <= last; k++) ends.push(k * slideMs + sizeMs);
  return ends;
}

export function validateWindowSpec(spec: WindowSpec): string | undefined {
  if (!Number.isSafeInteger(spec.sizeMs) || spec.sizeMs < 1) return 'window size must be a whole number of ms >= 1';
  if (!Number.isSafeInteger(spec.slideMs) || spec.slideMs < 1) return 'window slide must be a whole number of ms >= 1';
  if (spec.slideMs > spec.sizeMs) return 'window slide must not exceed the window size (events would fall between windows)';
  if (spec.sizeMs / spec.slideMs > 1000) return 'window size / slide must be at most 1000 (each event is indexed once per window)';
  return undefined;
}
