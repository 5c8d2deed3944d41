/**
 * Values encoded by hand for the hot path's prepared statements (the driver passes a Buffer parameter
 * through unchanged as the value's bytes; src/cassandra/prepared-batch.ts copies them into a batch's
 * rows). Each function gives exactly the bytes the driver's own encoder gives for the column type
 * (test/unit/prepared-batch.test.ts compares them); use them only for parameters of that type.
 */
import type { BatchRows } from './batch-rows.js';
import { types } from './session.js';

/** An `int` column's bytes. */
export function int32(v: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(v, 0);
  return b;
}

/**
 * `text` columns' bytes (UTF-8), kept for values that repeat (sources, clients, small ints): encoded
 * once, then the same Buffer is handed out. Bounded: emptied when it holds `max` values.
 */
export class ValueCache<K> {
  private readonly values = new Map<K, Buffer>();

  constructor(
    private readonly encode: (v: K) => Buffer,
    private readonly max = 4096,
  ) {}

  get(v: K): Buffer {
    let b = this.values.get(v);
    if (b === undefined) {
      if (this.values.size >= this.max) this.values.clear();
      this.values.set(v, (b = this.encode(v)));
    }
    return b;
  }
}

export const utf8 = (s: string): Buffer => Buffer.from(s, 'utf8');

/** Writes one value of one column into a batch's rows (src/cassandra/batch-rows.ts BatchRows). */
export type ColumnWriter = (rows: BatchRows, v: unknown) => void;

/** A column's type as a prepared statement's metadata gives it. */
export interface ColumnType {
  code: number;
  info?: unknown;
}

/** The driver's encoder (client._getEncoder()): the bytes of any value for any column type. */
export interface ValueEncoder {
  encode(v: unknown, type: ColumnType): Buffer | null | typeof types.unset;
}

const { dataTypes } = types;

/**
 * How to write a column's values: the common scalar types straight into the batch's buffer (no value
 * buffer, no parameter array); every other type (decimal, varint, inet, date, time, duration,
 * collections, tuples, UDTs) through the driver's encoder. Either way the bytes are those the driver
 * sends for the value (test/unit/prepared-batch.test.ts). A Buffer is a value already encoded, as the
 * driver takes it; null and undefined are null; `types.unset` is unset.
 */
export function columnWriter(type: ColumnType, encoder: ValueEncoder): ColumnWriter {
  const generic: ColumnWriter = (rows, v) => {
    const b = encoder.encode(v, type);
    if (b === null) rows.null();
    else if (b === types.unset) rows.unset();
    else rows.bytes(b as Buffer);
  };
  const fast = scalarWriter(type.code);
  if (fast === undefined) return generic;
  return (rows, v) => {
    if (v === null || v === undefined) rows.null();
    else if (v === types.unset) rows.unset();
    else if (Buffer.isBuffer(v)) rows.bytes(v);
    else if (!fast(rows, v)) generic(rows, v);
  };
}

/** A writer for a scalar type's usual values; false: not such a value (the driver's encoder takes it, or names the error). */
function scalarWriter(code: number): ((rows: BatchRows, v: unknown) => boolean) | undefined {
  switch (code) {
    case dataTypes.text:
    case dataTypes.varchar:
    case dataTypes.ascii:
      return (rows, v) => typeof v === 'string' && (rows.text(v), true);
    case dataTypes.int:
      return (rows, v) => typeof v === 'number' && (v | 0) === v && (rows.int32(v), true);
    case dataTypes.smallint:
      return (rows, v) => typeof v === 'number' && Number.isInteger(v) && v >= -32768 && v <= 32767 && (rows.int16(v), true);
    case dataTypes.tinyint:
      return (rows, v) => typeof v === 'number' && Number.isInteger(v) && v >= -128 && v <= 127 && (rows.int8(v), true);
    case dataTypes.bigint:
    case dataTypes.counter:
      return (rows, v) => {
        if (v instanceof types.Long) rows.int64Bits(v.high, v.low);
        else if (typeof v === 'bigint' && BigInt.asIntN(64, v) === v) rows.int64(v);
        else return false;
        return true;
      };
    case dataTypes.timestamp:
      return (rows, v) => {
        if (v instanceof Date && !Number.isNaN(v.getTime())) rows.int64FromNumber(v.getTime());
        else if (v instanceof types.Long) rows.int64Bits(v.high, v.low);
        else return false;
        return true;
      };
    case dataTypes.double:
      return (rows, v) => typeof v === 'number' && (rows.double(v), true);
    case dataTypes.float:
      return (rows, v) => typeof v === 'number' && (rows.float(v), true);
    case dataTypes.boolean:
      return (rows, v) => typeof v === 'boolean' && (rows.boolean(v), true);
    case dataTypes.uuid:
    case dataTypes.timeuuid:
      return (rows, v) => v instanceof types.Uuid && (rows.bytes(v.getBuffer()), true);
    default:
      return undefined;
  }
}
