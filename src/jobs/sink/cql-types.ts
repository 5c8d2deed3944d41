/**
 * The CQL types a sink column can have, and the pure conversion of a decoded field to the value
 * bound to Cassandra. The field is a typed value of any format (src/formats/decoder.ts): a JSON number
 * is a LosslessNumber (its digits), an Avro or Protobuf long a BigInt, an int or double a number, a
 * logical timestamp or date a Date, a decimal a LosslessNumber. No I/O: unit-tested exhaustively
 * (test/unit/sink-cql-types.test.ts).
 *
 * - text: a string (an Avro enum or uuid too);
 * - int: a whole number in [-2^31, 2^31);
 * - bigint: a whole number or a string of digits, exact over the whole int64 range (never through
 *   float64);
 * - double: a number;
 * - boolean: true or false;
 * - timestamp: a Date, epoch milliseconds (a whole number) or an ISO-8601 string with a time zone;
 * - uuid: the canonical 8-4-4-4-12 hex string;
 * - decimal: a number or numeric string, digits kept as written (1.50 stays 1.50), in plain or
 *   exponent notation (1E+3 is 1000, 1.5e-7 is 0.00000015);
 * - smallint, tinyint: a whole number in [-2^15, 2^15), [-2^7, 2^7);
 * - float: a number, rounded to float32 as Cassandra stores it (so the value bound is the value read);
 * - date: `YYYY-MM-DD` (or a Date: its UTC day); time: `HH:MM[:SS[.fraction, up to 9 digits]]`;
 * - blob: bytes (Avro, Protobuf) or, in JSON, their base64 text (as Kafka Connect's JsonConverter writes
 *   bytes); inet: an IPv4 or IPv6 address; timeuuid: a version-1 UUID; varchar: CQL's other name of text;
 * - list<T>, set<T>: an array of T (no null elements; a set's duplicates are one element); map<text, T>:
 *   an object (JSON, an Avro map) of T; T may itself be a collection (stored frozen).
 */
import { isIP } from 'node:net';
import { isLosslessNumber, type LosslessNumber } from 'lossless-json';
import { toLong, types } from '../../cassandra/session.js';

export const SCALAR_TYPES = ['text', 'int', 'bigint', 'double', 'boolean', 'timestamp', 'uuid', 'decimal', 'smallint', 'tinyint', 'float', 'date', 'time', 'blob', 'inet', 'timeuuid'] as const;
export type ScalarType = (typeof SCALAR_TYPES)[number];
/** Other names CQL gives one of ours: `varchar` is `text` (CQL's reference, "Data types"). */
const ALIASES: Readonly<Record<string, ScalarType>> = { varchar: 'text' };
export type CqlType = { kind: 'scalar'; name: ScalarType } | { kind: 'list' | 'set'; of: CqlType } | { kind: 'map'; of: CqlType };
/** How deep collections may nest (a bound on the parser, far beyond any table's need). */
const MAX_DEPTH = 8;

/**
 * Parses `text`, `varchar`, `list<int>`, `set<uuid>`, `map<text, bigint>`, `list<frozen<map<text, int>>>`
 * (spaces and case ignored; `frozen<…>` accepted anywhere, since every collection is stored frozen);
 * undefined if not one of ours.
 */
export function parseCqlType(spec: string): CqlType | undefined {
  return parseAt(spec.replace(/\s+/g, '').toLowerCase(), 0);
}

function parseAt(s: string, depth: number): CqlType | undefined {
  if (depth > MAX_DEPTH) return undefined;
  const frozen = /^frozen<(.+)>$/.exec(s);
  if (frozen) return parseAt(frozen[1]!, depth);
  const coll = /^(list|set)<(.+)>$/.exec(s);
  if (coll) {
    const of = parseAt(coll[2]!, depth + 1);
    return of && { kind: coll[1] as 'list' | 'set', of };
  }
  const map = /^map<(?:text|varchar),(.+)>$/.exec(s);
  if (map) {
    const of = parseAt(map[1]!, depth + 1);
    return of && { kind: 'map', of };
  }
  const name = ALIASES[s] ?? ((SCALAR_TYPES as readonly string[]).includes(s) ? (s as ScalarType) : undefined);
  return name && { kind: 'scalar', name };
}

/** The type's name; a collection inside a collection is named frozen, as CQL requires it. */
export function cqlTypeName(t: CqlType): string {
  const inner = (x: CqlType) => (x.kind === 'scalar' ? x.name : `frozen<${cqlTypeName(x)}>`);
  return t.kind === 'scalar' ? t.name : t.kind === 'map' ? `map<text, ${inner(t.of)}>` : `${t.kind}<${inner(t.of)}>`;
}

/**
 * The column type in the table: collections are frozen (one cell). A non-frozen list is not idempotent:
 * its elements are keyed by a time-UUID made at each write, so writing the same record twice (a replay
 * after a crash, a zombie) — even at the same timestamp — appends its elements again (found by
 * `chaos --job`: `items` held every element twice). A frozen value is overwritten whole, like a scalar.
 */
export function cqlColumnType(t: CqlType): string {
  return t.kind === 'scalar' ? t.name : `frozen<${cqlTypeName(t)}>`;
}

export type Converted = { ok: true; value: unknown } | { ok: false; problem: string };

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const ISO_8601 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/;
/** A JSON number's grammar (RFC 8259 §6), with a leading + tolerated in the exponent only. */
const DECIMAL = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d+))?$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const TIME = /^(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?$/;
/** RFC 4648 base64 with its padding (what JSON serializers write for bytes). */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/**
 * A decimal's digits in the plain notation the driver's BigDecimal reads (it does not read exponents):
 * 1E+3 → "1000", 1.5e-7 → "0.00000015", 1.50 → "1.50" (trailing zeros are digits a user wrote).
 * Undefined if not a number, or if its exponent would spell out more than 1000 digits.
 */
export function plainDecimal(text: string): string | undefined {
  const m = DECIMAL.exec(text);
  if (m === null) return undefined;
  const [, sign, int, frac = '', exp] = m;
  if (exp === undefined) return text;
  const e = Number(exp);
  if (!Number.isSafeInteger(e) || Math.abs(e) > 1000) return undefined;
  const digits = `${int}${frac}`;
  const point = int!.length + e; // where the decimal point lands in `digits`
  let out: string;
  if (point <= 0) out = `0.${'0'.repeat(-point)}${digits}`;
  else if (point >= digits.length) out = digits + '0'.repeat(point - digits.length);
  else out = `${digits.slice(0, point)}.${digits.slice(point)}`;
  return `${sign}${out.replace(/^0+(?=\d)/, '')}`;
}

/**
 * A BigDecimal of a plain decimal's text, as BigDecimal.fromString makes it, in time linear in its
 * digits (fromString parses them in quadratic time: 3.5 ms for the 1000 digits of a 6-byte 1e1000):
 * through a native BigInt and the value's bytes (a 4-byte scale, the unscaled two's-complement varint).
 */
export function decimalOf(plain: string): InstanceType<typeof types.BigDecimal> {
  const point = plain.indexOf('.');
  const scale = point < 0 ? 0 : plain.length - 1 - point;
  const n = BigInt(point < 0 ? plain : plain.slice(0, point) + plain.slice(point + 1));
  // The fewest bytes whose two's complement holds n.
  const negative = n < 0n;
  let hex = (negative ? -n - 1n : n).toString(16);
  if (hex.length % 2 === 1) hex = `0${hex}`;
  if (parseInt(hex.slice(0, 2), 16) >= 0x80) hex = `00${hex}`;
  let bytes = Buffer.from(hex, 'hex');
  if (negative) bytes = Buffer.from(bytes.map((x) => ~x & 0xff));
  const buf = Buffer.alloc(4 + bytes.length);
  buf.writeInt32BE(scale, 0);
  bytes.copy(buf, 4);
  return types.BigDecimal.fromBuffer(buf);
}

const fail = (problem: string): Converted => ({ ok: false, problem });
const shown = (v: unknown) =>
  (isLosslessNumber(v) ? v.toString() : typeof v === 'bigint' ? v.toString() : v instanceof Date ? (Number.isNaN(v.getTime()) ? 'an invalid date' : v.toISOString()) : Buffer.isBuffer(v) ? `${v.length} bytes` : JSON.stringify(v) ?? String(v)).slice(0, 80);

/** A number's exact text: a JSON number's digits, a BigInt's, a finite JS number's (Avro int, float, double). */
function numberText(v: unknown): string | undefined {
  if (isLosslessNumber(v)) return (v as LosslessNumber).toString();
  if (typeof v === 'bigint') return v.toString();
  if (typeof v === 'number' && Number.isFinite(v)) return Number.isInteger(v) && !Number.isSafeInteger(v) ? BigInt(v).toString() : String(v);
  return undefined;
}

/** A whole number within [min, max], or why not. */
function whole(type: string, num: string | undefined, v: unknown, min: number, max: number): Converted {
  if (num === undefined || !/^-?\d+$/.test(num)) return fail(`expected a whole number, got ${shown(v)}`);
  const n = Number(num);
  return n >= min && n <= max ? { ok: true, value: n } : fail(`${num} is outside ${type}'s range [${min}, ${max}]`);
}

function date(v: unknown): Converted {
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? fail('an invalid date') : { ok: true, value: new types.LocalDate(v.getUTCFullYear(), v.getUTCMonth() + 1, v.getUTCDate()) };
  const m = typeof v === 'string' ? DATE.exec(v) : null;
  if (m === null) return fail(`expected a date YYYY-MM-DD, got ${shown(v)}`);
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const day = new Date(Date.UTC(y, mo - 1, d));
  // Date.UTC rolls 2026-02-30 over into March: a day that does not exist is refused instead.
  if (day.getUTCFullYear() !== y || day.getUTCMonth() !== mo - 1 || day.getUTCDate() !== d) return fail(`${String(v)} is not a day of the calendar`);
  return { ok: true, value: new types.LocalDate(y, mo, d) };
}

function time(v: unknown): Converted {
  const m = typeof v === 'string' ? TIME.exec(v) : null;
  if (m === null) return fail(`expected a time of day HH:MM[:SS[.fraction]], got ${shown(v)}`);
  const [h, mi, sec] = [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)];
  if (h > 23 || mi > 59 || sec > 59) return fail(`${String(v)} is not a time of day`);
  const nanos = (BigInt(h * 3600 + mi * 60 + sec) * 1_000_000_000n + BigInt((m[4] ?? '').padEnd(9, '0') || '0')).toString();
  return { ok: true, value: new types.LocalTime(types.Long.fromString(nanos)) };
}

/** Stands for a JSON number whose text is given apart (scalarFromNumber): no other check matches it. */
const NUMBER_TOKEN: unknown = Object.freeze({});

/**
 * A JSON number, by its text, converted to a scalar type without making its LosslessNumber: equal to
 * `convert` of it wherever this succeeds (a failure may differ: the caller then asks `convert`).
 */
export function scalarFromNumber(type: ScalarType, text: string): Converted {
  return scalar(type, NUMBER_TOKEN, text);
}

function scalar(type: ScalarType, v: unknown, num = numberText(v)): Converted {
  switch (type) {
    case 'smallint':
      return whole(type, num, v, -(2 ** 15), 2 ** 15 - 1);
    case 'tinyint':
      return whole(type, num, v, -(2 ** 7), 2 ** 7 - 1);
    case 'float': {
      if (num === undefined) return fail(`expected a number, got ${shown(v)}`);
      const n = Math.fround(Number(num));
      return Number.isFinite(n) ? { ok: true, value: n } : fail(`${num} is outside float's range`);
    }
    case 'date':
      return date(v);
    case 'time':
      return time(v);
    case 'blob':
      if (Buffer.isBuffer(v)) return { ok: true, value: v };
      if (v instanceof Uint8Array) return { ok: true, value: Buffer.from(v) };
      return typeof v === 'string' && BASE64.test(v) ? { ok: true, value: Buffer.from(v, 'base64') } : fail(`expected bytes (base64 text in JSON), got ${shown(v)}`);
    case 'inet':
      return typeof v === 'string' && isIP(v) !== 0 ? { ok: true, value: types.InetAddress.fromString(v) } : fail(`expected an IPv4 or IPv6 address, got ${shown(v)}`);
    case 'timeuuid':
      // A time-based UUID is version 1: its 13th hex digit (RFC 4122 §4.1.3); Cassandra refuses others.
      return typeof v === 'string' && UUID.test(v) && v[14] === '1' ? { ok: true, value: types.TimeUuid.fromString(v.toLowerCase()) } : fail(`expected a version-1 (time-based) UUID, got ${shown(v)}`);
    case 'text':
      return typeof v === 'string' ? { ok: true, value: v } : fail(`expected a string, got ${shown(v)}`);
    case 'boolean':
      return typeof v === 'boolean' ? { ok: true, value: v } : fail(`expected true or false, got ${shown(v)}`);
    case 'int': {
      if (num === undefined || !/^-?\d+$/.test(num)) return fail(`expected a whole number, got ${shown(v)}`);
      const n = Number(num);
      return n >= -(2 ** 31) && n < 2 ** 31 ? { ok: true, value: n } : fail(`${num} is outside int's range [-2^31, 2^31)`);
    }
    case 'bigint': {
      const digits = num ?? (typeof v === 'string' ? v : undefined);
      if (digits === undefined || !/^-?\d+$/.test(digits)) return fail(`expected a whole number (or a string of digits), got ${shown(v)}`);
      // Up to 15 digits a double holds exactly: no BigInt needed.
      if (digits.length <= 15) return { ok: true, value: types.Long.fromNumber(Number(digits)) };
      const b = BigInt(digits);
      return b >= INT64_MIN && b <= INT64_MAX ? { ok: true, value: toLong(b) } : fail(`${digits} is outside bigint's 64-bit range`);
    }
    case 'double': {
      if (num === undefined) return fail(`expected a number, got ${shown(v)}`);
      const n = Number(num);
      return Number.isFinite(n) ? { ok: true, value: n } : fail(`${num} is not a finite double`);
    }
    case 'timestamp': {
      if (v instanceof Date) return Number.isNaN(v.getTime()) ? fail('an invalid date') : { ok: true, value: v };
      if (num !== undefined) {
        if (!/^-?\d+$/.test(num)) return fail(`expected epoch milliseconds (a whole number) or an ISO-8601 string, got ${num}`);
        const ms = Number(num);
        return Math.abs(ms) <= 8.64e15 ? { ok: true, value: new Date(ms) } : fail(`${num} ms is outside the dates a timestamp holds`);
      }
      if (typeof v === 'string' && ISO_8601.test(v) && !Number.isNaN(Date.parse(v))) return { ok: true, value: new Date(Date.parse(v)) };
      return fail(`expected epoch milliseconds or an ISO-8601 string with a time zone (2026-01-31T12:00:00Z), got ${shown(v)}`);
    }
    case 'uuid':
      return typeof v === 'string' && UUID.test(v) ? { ok: true, value: types.Uuid.fromString(v.toLowerCase()) } : fail(`expected a UUID (8-4-4-4-12 hex digits), got ${shown(v)}`);
    case 'decimal': {
      const text = num ?? (typeof v === 'string' ? v : undefined);
      const plain = text === undefined ? undefined : plainDecimal(text);
      return plain !== undefined ? { ok: true, value: decimalOf(plain) } : fail(`expected a decimal number (or such a string), got ${shown(v)}`);
    }
  }
}

/** Converts a JSON value (not null: the caller applies required/default) to the column's type. */
export function convert(type: CqlType, v: unknown): Converted {
  if (type.kind === 'scalar') return scalar(type.name, v);
  if (type.kind === 'list' || type.kind === 'set') {
    if (!Array.isArray(v)) return fail(`expected a JSON array (or an array), got ${shown(v)}`);
    const out: unknown[] = [];
    for (const [i, x] of v.entries()) {
      if (x === null) return fail(`element ${i} is null (a ${type.kind} cannot hold null)`);
      const c = convert(type.of, x);
      if (!c.ok) return fail(`element ${i}: ${c.problem}`);
      out.push(c.value);
    }
    if (type.kind === 'list') return { ok: true, value: out };
    // A set holds each value once, as Cassandra does (it would merge duplicates): equal values by their
    // canonical text, so the value bound equals the set read back (the session reads sets as Set).
    const seen = new Map<string, unknown>();
    for (const x of out) seen.set(JSON.stringify(canonical(x)), x);
    return { ok: true, value: new Set(seen.values()) };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v) || isLosslessNumber(v) || v instanceof Date || Buffer.isBuffer(v)) return fail(`expected a JSON object (or a map), got ${shown(v)}`);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (x === null) return fail(`value of "${k}" is null (a map cannot hold null)`);
    const c = convert(type.of, x);
    if (!c.ok) return fail(`value of "${k}": ${c.problem}`);
    out[k] = c.value;
  }
  return { ok: true, value: out };
}

/**
 * A decimal's text, as the driver's BigDecimal.toString spells it (its digits, the point placed by its
 * scale), in time linear in its digits: the driver's own toString divides its arbitrary-precision
 * integer digit group by digit group, and takes seconds at a few hundred digits (a decimal 1e1000 is
 * a 6-byte JSON number), so a record could hold a worker or an audit for hours. Through the value's
 * bytes and a native BigInt instead.
 */
export function decimalText(v: InstanceType<typeof types.BigDecimal>): string {
  const buf = types.BigDecimal.toBuffer(v);
  const scale = buf.readInt32BE(0);
  const bytes = buf.subarray(4);
  let n = bytes.length === 0 ? 0n : BigInt(`0x${bytes.toString('hex')}`);
  if (bytes.length > 0 && bytes[0]! >= 0x80) n -= 1n << BigInt(bytes.length * 8); // two's complement
  const sign = n < 0n ? '-' : '';
  let digits = (n < 0n ? -n : n).toString();
  if (scale <= 0) return scale === 0 ? `${sign}${digits}` : `${sign}${digits}${'0'.repeat(-scale)}`;
  if (digits.length <= scale) digits = '0'.repeat(scale - digits.length + 1) + digits;
  return `${sign}${digits.slice(0, digits.length - scale)}.${digits.slice(digits.length - scale)}`;
}

/**
 * A value as comparable text, the same for what a sink binds and what Cassandra returns: Long,
 * BigDecimal, Uuid, LocalDate, LocalTime and InetAddress by their text, dates by epoch ms, bytes in
 * hex, an empty collection as null (Cassandra stores none), map entries in key order, a set's elements
 * sorted by their canonical text (Cassandra returns them in its own order).
 */
export function canonical(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.getTime();
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof types.BigDecimal) return decimalText(v);
  if (v instanceof types.Long || v instanceof types.Uuid || v instanceof types.LocalDate || v instanceof types.LocalTime || v instanceof types.InetAddress) return v.toString();
  if (v instanceof Set) {
    const items = [...v].map(canonical).sort((a, b) => compareText(JSON.stringify(a), JSON.stringify(b)));
    return items.length === 0 ? null : items;
  }
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (Array.isArray(v)) return v.length === 0 ? null : v.map(canonical);
  if (v instanceof Map) return canonical(Object.fromEntries(v));
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => compareText(a, b));
    return entries.length === 0 ? null : Object.fromEntries(entries.map(([k, x]) => [k, canonical(x)]));
  }
  return v;
}

const compareText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
