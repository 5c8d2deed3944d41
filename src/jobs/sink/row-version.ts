/**
 * An upsert sink's `version:` (src/jobs/sink/sink-config.ts): the number that orders a key's records in
 * place of the offset. Each write is `USING TIMESTAMP <version>`, so Cassandra keeps, per key, the
 * record with the highest version whatever partition it came from and whatever order the writes land
 * in (src/jobs/sink/sink-writes.ts). A file of its own so that the codec and `verify --job` read one rule.
 *
 * A version is a whole number from 0 up to (not including) 2^44, the floor of wall-clock write times,
 * which the sink's table check refuses to find (src/jobs/sink/sink-table.ts): epoch milliseconds (a
 * timestamp field, an ISO-8601 text, a number), a row version, a log position (a Postgres LSN, while
 * below 16 TiB). A version at or above the floor could not be told from a foreign write at wall-clock
 * time (rule 2 of the sink), so it is refused.
 */
import { isLosslessNumber } from 'lossless-json';
import { convert } from './cql-types.js';

/** Write times at or above this are neither offsets nor versions (2^44 µs is 1970-07-24: every wall clock is past it). */
export const WALL_CLOCK_FLOOR = 1n << 44n;
const FLOOR = Number(WALL_CLOCK_FLOOR);

/**
 * A record's version from its raw field value (undefined: missing), or why it is none: read as a
 * `bigint` column reads a value (a whole number, or a string of digits), or, for a date or any other
 * text, as a `timestamp` column does (an ISO-8601 text with a time zone, to the millisecond), in epoch ms.
 */
export function versionOf(v: unknown, spec: string): { ok: true; version: number } | { ok: false; detail: string } {
  if (v === undefined || v === null) return { ok: false, detail: `version ${spec} is ${v === null ? 'null' : 'missing'}` };
  // The common case, at once: up to 15 digits (what convert would read as the same whole number).
  const digits = typeof v === 'string' ? v : isLosslessNumber(v) ? (v as { toString(): string }).toString() : undefined;
  if (digits !== undefined && digits.length <= 15 && /^\d+$/.test(digits)) {
    const n = Number(digits);
    if (n < FLOOR) return { ok: true, version: n };
  }
  const time = v instanceof Date || (typeof v === 'string' && !/^-?\d+$/.test(v));
  const c = convert({ kind: 'scalar', name: time ? 'timestamp' : 'bigint' }, v);
  if (!c.ok) return { ok: false, detail: `version ${spec}: ${c.problem}` };
  const n = time ? BigInt((c.value as Date).getTime()) : BigInt(String(c.value));
  if (n < 0n) return { ok: false, detail: `version ${spec} is negative: ${time ? `${String(v).slice(0, 80)} is before 1970` : String(n)}` };
  if (n >= WALL_CLOCK_FLOOR) {
    return { ok: false, detail: `version ${spec} is ${n}, at or above 2^44 (17592186044416), where write times at wall-clock time begin (epoch microseconds): a version is epoch milliseconds, a row version or a log position below that` };
  }
  return { ok: true, version: Number(n) };
}
