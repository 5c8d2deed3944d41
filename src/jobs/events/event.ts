/**
 * The event and its JSON form, unchanged from the seed job:
 * `{"id": <int64>, "ts": <epoch ms>, "source": <string>, "client": <string>, "health": <0|1|2>}`.
 * Decoding never throws: a record is either an Event or a reason to quarantine it. `id` is a 64-bit
 * integer kept exact (JSON.parse would round it through float64), so numbers are parsed losslessly.
 */
import { isLosslessNumber, parse } from 'lossless-json';
import type { Decoded } from '../../engine/job.js';
import { jsonTooDeep } from '../../formats/bounds.js';

export const Health = { Nominal: 0, Warning: 1, Critical: 2 } as const;
export type HealthCode = (typeof Health)[keyof typeof Health];

export interface Event {
  readonly id: bigint;
  /** Event time, epoch milliseconds. */
  readonly ts: number;
  readonly source: string;
  readonly client: string;
  readonly health: HealthCode;
}

/** Why a record was quarantined; stored in the quarantine table's `reason` column. */
export const QuarantineReasons = [
  'empty',
  'too_large',
  'not_utf8',
  'invalid_json',
  'not_object',
  'missing_field',
  'null_value',
  'wrong_type',
  'invalid_health',
  'id_out_of_range',
  'ts_out_of_range',
  'invalid_unicode',
  'empty_source',
  'field_too_long',
] as const;
export type QuarantineReason = (typeof QuarantineReasons)[number];

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
/** The range of a JavaScript Date (and well inside Cassandra's timestamp), in ms. */
const TS_LIMIT = 8_640_000_000_000_000n;
const utf8 = new TextDecoder('utf-8', { fatal: true });

export const DEFAULT_MAX_RECORD_BYTES = 64 * 1024;

/**
 * Limits of the string fields, in UTF-8 bytes (what Cassandra and Kafka store), checked whatever
 * `--max-record-bytes` allows:
 * - `source` is a key: the partition key of `alerts` (Cassandra refuses a partition key over 65,535
 *   bytes, or an empty one), with the window end and the rule the partition key of
 *   `alert_window_counts` (the same limit for the three together), and part of the alerts topic's key
 *   `source@windowEnd`. 1 KiB is an identifier, not a payload: far above any real source name (the
 *   generator's is "My Router") and far below every server limit, so a source that decodes can always
 *   be written. An empty source is quarantined as `empty_source`.
 * - `client` is only a column of `events`: 4 KiB.
 * Over either limit: `field_too_long`. A string that is not well-formed Unicode (a lone surrogate,
 * which JSON allows as an escape such as `"\ud800"` but UTF-8 cannot encode: it would be stored as
 * U+FFFD, so the row would differ from the record and distinct sources would merge into one):
 * `invalid_unicode`.
 */
export const MAX_SOURCE_BYTES = 1024;
export const MAX_CLIENT_BYTES = 4096;

function bad(reason: QuarantineReason, detail: string): Decoded<Event> {
  return { ok: false, reason, detail };
}

export function decodeEvent(value: Buffer | null, maxBytes = DEFAULT_MAX_RECORD_BYTES): Decoded<Event> {
  if (value === null || value.length === 0) return bad('empty', 'the record has no value');
  if (value.length > maxBytes) return bad('too_large', `${value.length} bytes, limit ${maxBytes}`);
  let text: string;
  try {
    text = utf8.decode(value);
  } catch {
    return bad('not_utf8', 'the value is not valid UTF-8');
  }
  return decodeCanonical(text) ?? decodeJson(text);
}

/** A JSON integer literal (no fraction, no exponent), and a JSON string literal. */
const INT = '(-?(?:0|[1-9][0-9]*))';
const STR = '("(?:[^"\\\\\\u0000-\\u001f]|\\\\.)*")';
/** The exact text `encodeEvent` (and so the generator) writes: no whitespace, fields in this order. */
const CANONICAL = new RegExp(`^\\{"id":${INT},"ts":${INT},"source":${STR},"client":${STR},"health":${INT}\\}$`);

/**
 * The fast path, for the canonical text only: a match, BigInt of each integer and each string literal
 * decoded give exactly what the general path gives for that text (a unit test compares the two on many
 * texts), with a fraction of its allocations. Undefined when the text is not canonical (or a string
 * has an invalid escape): the general path then decides. Exported for its test.
 */
export function decodeCanonical(text: string): Decoded<Event> | undefined {
  const m = CANONICAL.exec(text);
  if (m === null) return undefined;
  let source: string;
  let client: string;
  try {
    source = literal(m[3]!);
    client = literal(m[4]!);
  } catch {
    return undefined;
  }
  return validate(bigInteger(m[1]!), bigInteger(m[2]!), source, client, bigInteger(m[5]!));
}

/**
 * A JSON string literal matched by STR. Without a backslash it holds no escape (STR excludes `"` and
 * control characters), so its content is the string itself: a slice, about 5× cheaper than JSON.parse,
 * which pays for the strict-string checks. With one, JSON.parse decodes the escapes (and throws on an
 * invalid one).
 */
function literal(s: string): string {
  return s.indexOf('\\') < 0 ? s.slice(1, -1) : (JSON.parse(s) as string);
}

/** The general path: any JSON text, numbers parsed losslessly. Exported for the fast path's test. */
export function decodeJson(text: string): Decoded<Event> {
  // lossless-json recurses with the depth: past the bound, so that the stack never decides a record.
  const deep = jsonTooDeep(text);
  if (deep !== undefined) return bad('too_large', deep);
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    return bad('invalid_json', (e as Error).message.slice(0, 200));
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc) || isLosslessNumber(doc)) {
    return bad('not_object', 'the JSON value is not an object');
  }
  const o = doc as Record<string, unknown>;
  for (const field of ['id', 'ts', 'source', 'client', 'health'] as const) {
    if (!(field in o)) return bad('missing_field', field);
    if (o[field] === null) return bad('null_value', field);
  }
  return validate(integer(o['id']), integer(o['ts']), o['source'], o['client'], integer(o['health']));
}

/** `String.prototype.isWellFormed` (ES2024, in Node 20; the project's type library is ES2022). */
const isWellFormed = (s: string): boolean => (s as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * The checks both paths share, in the order that decides which reason a record with several faults
 * gets; an integer field is undefined when the JSON value was not an integer.
 */
function validate(id: bigint | undefined, ts: bigint | undefined, source: unknown, client: unknown, health: bigint | undefined): Decoded<Event> {
  if (id === undefined) return bad('wrong_type', 'id: expected an integer');
  if (id < INT64_MIN || id > INT64_MAX) return bad('id_out_of_range', `id ${shown(id)} is outside int64`);
  if (ts === undefined) return bad('wrong_type', 'ts: expected an integer (epoch ms)');
  if (ts < -TS_LIMIT || ts > TS_LIMIT) return bad('ts_out_of_range', `ts ${shown(ts)} is outside ±${TS_LIMIT}`);
  if (typeof source !== 'string') return bad('wrong_type', 'source: expected a string');
  if (!isWellFormed(source)) return bad('invalid_unicode', 'source: a lone surrogate (not well-formed Unicode)');
  if (source.length === 0) return bad('empty_source', 'source is empty');
  if (tooLong(source, MAX_SOURCE_BYTES)) return bad('field_too_long', `source: ${Buffer.byteLength(source)} bytes in UTF-8, limit ${MAX_SOURCE_BYTES}`);
  if (typeof client !== 'string') return bad('wrong_type', 'client: expected a string');
  if (!isWellFormed(client)) return bad('invalid_unicode', 'client: a lone surrogate (not well-formed Unicode)');
  if (tooLong(client, MAX_CLIENT_BYTES)) return bad('field_too_long', `client: ${Buffer.byteLength(client)} bytes in UTF-8, limit ${MAX_CLIENT_BYTES}`);
  if (health === undefined) return bad('wrong_type', 'health: expected an integer');
  if (health !== 0n && health !== 1n && health !== 2n) return bad('invalid_health', `health ${shown(health)} is not 0, 1 or 2`);
  return { ok: true, value: { id, ts: Number(ts), source, client, health: Number(health) as HealthCode } };
}

/**
 * Whether a well-formed string takes more than `limit` bytes in UTF-8. A UTF-16 code unit takes 1 to 3
 * bytes (a surrogate pair 4 for its two units), so only lengths between limit/3 and limit are counted.
 * `isWellFormed` is O(1) on V8's one-byte strings (no surrogates possible) and one scan otherwise.
 */
function tooLong(s: string, limit: number): boolean {
  if (s.length * 3 <= limit) return false;
  if (s.length > limit) return true;
  return Buffer.byteLength(s, 'utf8') > limit;
}

/**
 * A JSON integer (no fraction, no exponent) as bigint; undefined for anything else. JSON has no
 * leading zeros, so more than INTEGER_DIGITS digits is beyond every range checked here: such a number
 * becomes ±10^INTEGER_DIGITS (the same reason, out of range) instead of a BigInt of a megabyte of
 * digits, whose conversion is quadratic in its length.
 */
function integer(v: unknown): bigint | undefined {
  if (!isLosslessNumber(v)) return undefined;
  return /^-?\d+$/.test(v.value) ? bigInteger(v.value) : undefined;
}

/** A JSON integer literal as bigint, bounded (see integer). */
function bigInteger(text: string): bigint {
  const negative = text.startsWith('-');
  if (text.length - (negative ? 1 : 0) > INTEGER_DIGITS) return negative ? -HUGE : HUGE;
  return BigInt(text);
}
const INTEGER_DIGITS = 40;
const HUGE = 10n ** BigInt(INTEGER_DIGITS);
/** An integer for a detail: a bounded one as written, a longer one by its length (never a megabyte of digits). */
const shown = (n: bigint): string => (n >= HUGE || n <= -HUGE ? `${n < 0n ? '-' : ''}<more than ${INTEGER_DIGITS} digits>` : String(n));

/** The event's JSON, with `id` written as an exact integer. */
export function encodeEvent(e: Event): string {
  return `{"id":${e.id},"ts":${e.ts},"source":${JSON.stringify(e.source)},"client":${JSON.stringify(e.client)},"health":${e.health}}`;
}
