/**
 * Parsers of flag values, for Commander's `argParser`: each turns the text given into the value the
 * command takes, or throws EO_CONFIG_INVALID naming the flag and the form expected.
 */
import { ExactlyOnceError } from '../errors.js';

/** A whole number within bounds, for numeric flags: `intOption('--partitions', 1, 10000)`. */
export function intOption(flag: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a whole number from ${min} to ${max} (got '${value}')`);
    }
    return n;
  };
}

/**
 * A duration flag: a whole number with a unit, `500ms`, `30s`, `5m`, `1h` (a bare number is seconds),
 * as milliseconds from `minMs` to `maxMs`: `durationOption('--every', 1000, 86_400_000)`.
 */
export function durationOption(flag: string, minMs: number, maxMs: number) {
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  return (value: string): number => {
    const m = /^(\d+)(ms|s|m|h)?$/.exec(value.trim());
    const ms = m === null ? NaN : Number(m[1]) * units[m[2] ?? 's']!;
    if (!Number.isSafeInteger(ms) || ms < minMs || ms > maxMs) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a duration like 30s, 5m or 500ms from ${minMs} ms to ${maxMs / 1000} s (got '${value}')`);
    }
    return ms;
  };
}

/** A fraction from 0 to 1, for ratio flags: `ratioOption('--bad-ratio')`. */
export function ratioOption(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a number from 0 to 1 (got '${value}')`);
    return n;
  };
}
