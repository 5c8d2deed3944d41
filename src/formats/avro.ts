/**
 * Avro through avsc (the library under @confluentinc/schemaregistry's Avro serde), with what a sink
 * must keep exact:
 * - `long` as a BigInt over the whole int64 range (avsc's default JS number throws "potential precision
 *   loss" past 2^53; checked with −2^63 and 2^63−1);
 * - logical types: decimal (bytes or fixed) as a LosslessNumber of its exact digits (1.50 stays 1.50),
 *   uuid as its string, date as a Date at UTC midnight, timestamp-millis / -micros and
 *   local-timestamp-millis / -micros as a Date (micros are cut to the millisecond Cassandra's timestamp
 *   holds, rounding down);
 * - unions with null unwrapped (the value, or null); a union of distinguishable branches too (an
 *   ambiguous one, like two records, stays wrapped: `{"Branch": value}`);
 * - maps as plain objects, arrays as arrays, enums as strings, bytes and fixed as Buffers.
 *
 * Records are decoded with the schema they were written with (the id in their header), as Kafka
 * Connect's AvroConverter does: a decode never depends on which versions were registered later, so a
 * worker and the auditor, today or next year, read a record the same way. An added field is absent
 * from older records (null, or the column's `default`); a removed one is absent from newer records.
 */
import avro from 'avsc';
import { LosslessNumber } from 'lossless-json';
import { needsScan, scanAvro } from './avro-scan.js';
import { DecodeBoundError, MAX_DECIMAL_BYTES } from './bounds.js';

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** `long` as a BigInt: avsc hands over the 8 bytes it unpacked (little-endian two's complement). */
const BigIntLong = avro.types.LongType.__with({
  fromBuffer: (b: Buffer) => b.readBigInt64LE(),
  toBuffer: (n: bigint | number) => {
    const b = Buffer.alloc(8);
    b.writeBigInt64LE(BigInt(n));
    return b;
  },
  fromJSON: (v: unknown) => BigInt(v as string),
  toJSON: (n: bigint) => n.toString(),
  isValid: (n: unknown) => (typeof n === 'bigint' && n >= INT64_MIN && n <= INT64_MAX) || (typeof n === 'number' && Number.isSafeInteger(n)),
  compare: (a: bigint, b: bigint) => (a === b ? 0 : a < b ? -1 : 1),
});

/** An unscaled two's complement big-endian integer (Avro decimal's bytes). */
function bigFromBytes(b: Buffer): bigint {
  if (b.length === 0) return 0n;
  const n = BigInt(`0x${b.toString('hex')}`);
  return b[0]! & 0x80 ? n - (1n << BigInt(b.length * 8)) : n;
}

function bytesFromBig(n: bigint, size?: number): Buffer {
  let bytes = 1;
  while (n < -(1n << BigInt(bytes * 8 - 1)) || n >= 1n << BigInt(bytes * 8 - 1)) bytes++;
  const len = size ?? bytes;
  const u = n < 0n ? (1n << BigInt(len * 8)) + n : n;
  return Buffer.from(u.toString(16).padStart(len * 2, '0'), 'hex');
}

/** The digits of unscaled × 10^-scale in plain notation, as written (scale 2: "1.50"). */
export function decimalText(unscaled: bigint, scale: number): string {
  const neg = unscaled < 0n;
  let digits = (neg ? -unscaled : unscaled).toString();
  if (scale > 0) {
    digits = digits.padStart(scale + 1, '0');
    digits = `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
  } else if (scale < 0) digits += '0'.repeat(-scale);
  return neg ? `-${digits}` : digits;
}

class DecimalType extends avro.types.LogicalType {
  readonly scale: number;
  readonly precision: number;
  constructor(schema: { scale?: number; precision: number }, opts?: unknown) {
    super(schema as unknown as avro.Schema, opts as avro.ForSchemaOptions);
    this.scale = schema.scale ?? 0;
    this.precision = schema.precision;
  }
  override _fromValue(b: Buffer): LosslessNumber {
    // Writing out the digits is quadratic in their count: a megabyte of them takes a second.
    if (b.length > MAX_DECIMAL_BYTES) throw new DecodeBoundError('too_large', `a decimal of ${b.length} bytes; at most ${MAX_DECIMAL_BYTES} are read`);
    return new LosslessNumber(decimalText(bigFromBytes(b), this.scale));
  }
  // avsc's convention for every _toValue: undefined when the value is not one of this type's (so that a
  // union with null can tell its branches apart).
  override _toValue(v: unknown): Buffer | undefined {
    if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'bigint' && !(v instanceof LosslessNumber)) return undefined;
    const text = String(v);
    const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text);
    if (m === null) return undefined;
    const frac = (m[3] ?? '').padEnd(this.scale, '0');
    if (frac.length > this.scale) return undefined;
    const unscaled = BigInt(`${m[1]}${m[2]}${frac}`);
    const underlying = this.underlyingType as unknown as { typeName: string; size?: number };
    return bytesFromBig(unscaled, underlying.typeName === 'fixed' ? underlying.size : undefined);
  }
  override _resolve(type: avro.Type): ((v: unknown) => unknown) | undefined {
    if (type instanceof DecimalType && type.scale === this.scale) return (v) => v;
    return undefined;
  }
}

/** A Date from a count of `unit` ms (1 for millis, 1/1000 for micros: floored), or a day count. */
function dateType(toMs: (n: bigint) => bigint, fromMs: (ms: bigint) => bigint) {
  return class extends avro.types.LogicalType {
    constructor(schema: avro.Schema, opts?: avro.ForSchemaOptions) {
      // The underlying long is made inside this call: the type hook gives it the BigInt long.
      underlying = true;
      try {
        super(schema, opts);
      } finally {
        underlying = false;
      }
    }
    override _fromValue(n: bigint | number): Date {
      const ms = toMs(BigInt(n));
      if (ms > 8_640_000_000_000_000n || ms < -8_640_000_000_000_000n) throw new Error(`${n} is outside the dates a timestamp holds`);
      return new Date(Number(ms));
    }
    override _toValue(d: unknown): bigint | number | undefined {
      if (!(d instanceof Date) && typeof d !== 'number' && typeof d !== 'bigint') return undefined;
      const ms = d instanceof Date ? BigInt(d.getTime()) : BigInt(d);
      const v = fromMs(ms);
      return (this.underlyingType as unknown as { typeName: string }).typeName === 'int' ? Number(v) : v;
    }
    override _resolve(type: avro.Type): ((v: unknown) => unknown) | undefined {
      return type.constructor === this.constructor ? (v) => v : undefined;
    }
  };
}

const floorDiv = (a: bigint, b: bigint) => (a >= 0n ? a / b : -((-a + b - 1n) / b));
const DAY_MS = 86_400_000n;
const Millis = dateType((n) => n, (ms) => ms);
const Micros = dateType((n) => floorDiv(n, 1000n), (ms) => ms * 1000n);
const Days = dateType((n) => n * DAY_MS, (ms) => floorDiv(ms, DAY_MS));

class UuidType extends avro.types.LogicalType {
  override _fromValue(s: string): string {
    return s;
  }
  override _toValue(s: unknown): string | undefined {
    return typeof s === 'string' ? s : undefined;
  }
  override _resolve(type: avro.Type): ((v: unknown) => unknown) | undefined {
    return type instanceof UuidType || (type as { typeName?: string }).typeName === 'string' ? (v) => v : undefined;
  }
}

/** True while a timestamp type makes its underlying long (see typeHook). */
let underlying = false;

const LOGICAL_TYPES = {
    decimal: DecimalType,
    uuid: UuidType,
    date: Days,
    'timestamp-millis': Millis,
    'timestamp-micros': Micros,
    'local-timestamp-millis': Millis,
    'local-timestamp-micros': Micros,
};

/**
 * Every `long` becomes the BigInt long: the name `"long"`, the object form `{"type": "long"}` (which
 * avsc makes without looking at its registry; Java serializers write it, e.g. with `connect.name`),
 * and the long under a timestamp.
 */
function typeHook(schema: avro.Schema): avro.Type | undefined {
  if (schema === 'long') return BigIntLong;
  if (typeof schema !== 'object' || schema === null || (schema as { type?: unknown }).type !== 'long') return undefined;
  const logical = (schema as { logicalType?: string }).logicalType;
  return logical === undefined || underlying || !(logical in LOGICAL_TYPES) ? BigIntLong : undefined;
}

/** Compiles a registered Avro schema (its JSON text). Throws on a schema avsc does not accept. */
export function avroType(schemaText: string): avro.Type {
  return avro.Type.forSchema(JSON.parse(schemaText) as avro.Schema, {
    logicalTypes: LOGICAL_TYPES as unknown as avro.ForSchemaOptions['logicalTypes'],
    typeHook: typeHook as avro.ForSchemaOptions['typeHook'],
    wrapUnions: 'auto',
  });
}

/**
 * Decodes one payload (after the wire header); throws when it does not match the schema, a
 * DecodeBoundError when it claims more than it holds (src/formats/avro-scan.ts: checked before avsc
 * allocates, for the schemas with arrays, maps or recursion; the others allocate only what they read).
 */
export function decodeAvro(type: avro.Type, payload: Buffer): unknown {
  if (needsScan(type)) scanAvro(type, payload);
  return type.fromBuffer(payload);
}

/** Encodes a value (tests, chaos samples, the benchmark): longs as bigint, decimals as their digits, dates as Dates. */
export function encodeAvro(type: avro.Type, value: unknown): Buffer {
  return type.toBuffer(value);
}
