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
 * - list<T>: an array of T (no null elements); map<text, T>: an object (JSON, an Avro map) of T.
 */
import { isLosslessNumber, type LosslessNumber } from 'lossless-json';
import { types } from '../cassandra/session.js';

export const SCALAR_TYPES = ['text', 'int', 'bigint', 'double', 'boolean', 'timestamp', 'uuid', 'decimal'] as const;
export type ScalarType = (typeof SCALAR_TYPES)[number];
export type CqlType = { kind: 'scalar'; name: ScalarType } | { kind: 'list'; of: ScalarType } | { kind: 'map'; of: ScalarType };

/** Parses `text`, `list<int>`, `map<text, bigint>` (spaces and case ignored); undefined if not one of ours. */
export function parseCqlType(spec: string): CqlType | undefined {
  const s = spec.replace(/\s+/g, '').toLowerCase();
  const scalar = (x: string) => (SCALAR_TYPES as readonly string[]).includes(x) ? (x as ScalarType) : undefined;
  const list = /^list<(\w+)>$/.exec(s);
  if (list) {
    const of = scalar(list[1]!);
    return of && { kind: 'list', of };
  }
  const map = /^map<text,(\w+)>$/.exec(s);
  if (map) {
    const of = scalar(map[1]!);
    return of && { kind: 'map', of };
  }
  const name = scalar(s);
  return name && { kind: 'scalar', name };
}

export function cqlTypeName(t: CqlType): string {
  return t.kind === 'scalar' ? t.name : t.kind === 'list' ? `list<${t.of}>` : `map<text, ${t.of}>`;
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
function decimalOf(plain: string): InstanceType<typeof types.BigDecimal> {
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

function scalar(type: ScalarType, v: unknown): Converted {
  const num = numberText(v);
  switch (type) {
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
      const b = BigInt(digits);
      return b >= INT64_MIN && b <= INT64_MAX ? { ok: true, value: types.Long.fromString(b.toString()) } : fail(`${digits} is outside bigint's 64-bit range`);
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
  if (type.kind === 'list') {
    if (!Array.isArray(v)) return fail(`expected a JSON array (or an array), got ${shown(v)}`);
    const out: unknown[] = [];
    for (const [i, x] of v.entries()) {
      if (x === null) return fail(`element ${i} is null (a list cannot hold null)`);
      const c = scalar(type.of, x);
      if (!c.ok) return fail(`element ${i}: ${c.problem}`);
      out.push(c.value);
    }
    return { ok: true, value: out };
  }
  if (v === null || typeof v !== 'object' || Array.isArray(v) || isLosslessNumber(v) || v instanceof Date || Buffer.isBuffer(v)) return fail(`expected a JSON object (or a map), got ${shown(v)}`);
  const out: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (x === null) return fail(`value of "${k}" is null (a map cannot hold null)`);
    const c = scalar(type.of, x);
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
 * BigDecimal and Uuid by their text, dates by epoch ms, an empty collection as null (Cassandra stores
 * none), map entries in key order.
 */
export function canonical(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (v instanceof Date) return v.getTime();
  if (typeof v === 'bigint') return v.toString();
  if (v instanceof types.BigDecimal) return decimalText(v);
  if (v instanceof types.Long || v instanceof types.Uuid) return v.toString();
  if (Buffer.isBuffer(v)) return v.toString('hex');
  if (Array.isArray(v)) return v.length === 0 ? null : v.map(canonical);
  if (v instanceof Map) return canonical(Object.fromEntries(v));
  if (typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return entries.length === 0 ? null : Object.fromEntries(entries.map(([k, x]) => [k, canonical(x)]));
  }
  return v;
}
