/**
 * Parameters encoded by hand for the hot path's prepared statements: the driver passes a Buffer
 * parameter through unchanged as the value's bytes (its Encoder.encode), so a row's values can be
 * written straight into one shared buffer, without the driver's per-value Long, Date and Buffer
 * objects. Each function gives exactly the bytes the driver's own encoder gives for the column type
 * (test/unit/encode.test.ts compares them); use them only for parameters of that type.
 */

/** Writes `count` rows' worth of fixed-size values into one buffer, handing out views of it. */
export class ValueWriter {
  private buf: Buffer;
  private at = 0;

  /** `bytes`: room for every value to be written (8 per int64/timestamp, 4 per int). */
  constructor(bytes: number) {
    this.buf = Buffer.allocUnsafe(bytes);
  }

  /** A `bigint` column's bytes (int64, big-endian): the value must be within int64. */
  int64(v: bigint): Buffer {
    const at = this.at;
    this.buf.writeBigInt64BE(v, at);
    this.at = at + 8;
    return this.buf.subarray(at, at + 8);
  }

  /** A `bigint` column's bytes from a safe integer. */
  int64FromNumber(v: number): Buffer {
    const at = this.at;
    writeInt64(this.buf, at, v);
    this.at = at + 8;
    return this.buf.subarray(at, at + 8);
  }

  /** A `timestamp` column's bytes: ms since the epoch as int64 (a safe integer). */
  timestamp(ms: number): Buffer {
    return this.int64FromNumber(ms);
  }
}

function writeInt64(buf: Buffer, at: number, v: number): void {
  const high = Math.floor(v / 4294967296);
  buf.writeInt32BE(high, at);
  buf.writeUInt32BE(v - high * 4294967296, at + 4);
}

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
