/**
 * A sink row's TTL (src/jobs/sink/sink-codec.ts decodes it, src/jobs/sink/sink-writes.ts writes it): a
 * record's TTL read from its field, and the seconds left to write a row with so that it expires at its
 * record's time + TTL. A file of its own so that both read the one rule.
 */
import { isLosslessNumber } from 'lossless-json';
import { MAX_TTL_SECONDS } from './sink-config.js';

/**
 * The TTL to write a row with so that it expires at `expiresAtMs` (record timestamp + TTL) whenever it
 * is written: the seconds left, rounded up (so it never expires before), at most Cassandra's longest.
 * 0 or less: already past, not written.
 */
export function ttlLeft(expiresAtMs: number, nowMs: number): number {
  return Math.min(MAX_TTL_SECONDS, Math.ceil((expiresAtMs - nowMs) / 1000));
}

/** A record's TTL in seconds from its raw field value, or why it is none. */
export function ttlSeconds(v: unknown, spec: string): { ok: true; seconds: number } | { ok: false; detail: string } {
  if (v === undefined || v === null) return { ok: false, detail: `ttlField ${spec} is ${v === null ? 'null' : 'missing'}` };
  const text = isLosslessNumber(v) ? (v as { toString(): string }).toString() : typeof v === 'number' || typeof v === 'bigint' ? String(v) : undefined;
  if (text === undefined) return { ok: false, detail: `ttlField ${spec} is not a number of seconds: ${JSON.stringify(typeof v === 'string' ? v.slice(0, 80) : typeof v)}` };
  if (/^-/.test(text) && Number(text) !== 0) return { ok: false, detail: `ttlField ${spec} is negative: ${text}` };
  if (!/^-?\d+$/.test(text)) return { ok: false, detail: `ttlField ${spec} is not a whole number of seconds: ${text}` };
  const seconds = Number(text);
  if (seconds > MAX_TTL_SECONDS) return { ok: false, detail: `ttlField ${spec} is ${text} s, longer than the 20 years (${MAX_TTL_SECONDS} s) Cassandra allows` };
  return { ok: true, seconds };
}
