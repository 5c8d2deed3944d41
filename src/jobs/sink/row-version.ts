/**
 * An upsert sink's `version:` (src/jobs/sink/sink-config.ts): the number that orders a key's records in
 * place of the offset. Each write is `USING TIMESTAMP <version>`, so Cassandra keeps, per key, the
 * record with the highest version whatever partition it came from and whatever order the writes land
 * in (src/jobs/sink/sink-writes.ts). A file of its own so that the codec and `verify --job` read one rule.
 *
 * A version is a whole number from 0 up to (not including) 2^44, the floor of wall-clock write times
 * (the sink's table check refuses a table holding such writes, src/jobs/sink/sink-table.ts): epoch milliseconds (a timestamp field, an ISO-8601 text, a number),
 * a row version, a log position (a Postgres LSN below 16 TiB). A version at or above the floor could
 * not be told from a foreign write at wall-clock time (rule 2 of the sink), so it is refused.
 */
import { isLosslessNumber } from 'lossless-json';

/** Write times at or above this are neither offsets nor versions (2^44 µs is 1970-07-24: every wall clock is past it). */
export const WALL_CLOCK_FLOOR = 1n << 44n;

const FLOOR = Number(WALL_CLOCK_FLOOR);
/** An ISO-8601 date and time, as Debezium's ZonedTimestamp and most JSON producers write them. */
const ISO_TIME = /^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})$/;

/** A record's version from its raw field value (undefined: missing), or why it is none. */
export function versionOf(v: unknown, spec: string): { ok: true; version: number } | { ok: false; detail: string } {
  if (v === undefined || v === null) return { ok: false, detail: `version ${spec} is ${v === null ? 'null' : 'missing'}` };
  let n: number;
  if (v instanceof Date) n = v.getTime();
  else if (typeof v === 'string' && ISO_TIME.test(v)) n = Date.parse(v);
  else {
    const text = isLosslessNumber(v) ? (v as { toString(): string }).toString() : typeof v === 'number' || typeof v === 'bigint' ? String(v) : typeof v === 'object' && v !== null && 'toBigInt' in v ? String((v as { toBigInt(): bigint }).toBigInt()) : undefined;
    if (text === undefined) return { ok: false, detail: `version ${spec} is not a number or a timestamp: ${JSON.stringify(typeof v === 'string' ? v.slice(0, 80) : typeof v)}` };
    if (!/^-?\d+$/.test(text)) return { ok: false, detail: `version ${spec} is not a whole number: ${text.slice(0, 80)}` };
    if (text.startsWith('-') && BigInt(text) < 0n) return { ok: false, detail: `version ${spec} is negative: ${text}` };
    if (BigInt(text) >= WALL_CLOCK_FLOOR) return { ok: false, detail: tooLarge(spec, text) };
    n = Number(text);
  }
  if (!Number.isFinite(n)) return { ok: false, detail: `version ${spec} is not a valid timestamp: ${JSON.stringify(String(v).slice(0, 80))}` };
  if (n < 0) return { ok: false, detail: `version ${spec} is before 1970: ${String(v).slice(0, 80)}` };
  if (n >= FLOOR) return { ok: false, detail: tooLarge(spec, String(n)) };
  return { ok: true, version: n };
}

const tooLarge = (spec: string, text: string) =>
  `version ${spec} is ${text}, at or above 2^44 (17592186044416), where write times at wall-clock time begin (epoch microseconds): a version is epoch milliseconds, a row version or a log position below that`;
