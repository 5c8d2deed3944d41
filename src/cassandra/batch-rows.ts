/**
 * The rows of a prepared batch, encoded as the protocol's batch entries into one buffer: what the
 * column writers (src/cassandra/encode.ts) write values into and src/cassandra/prepared-batch.ts sends.
 * A file of its own so that both can use it without importing each other.
 */

/**
 * The rows of one batch of one prepared statement, each written as the protocol's batch entry:
 * `<kind 1><short id length><id><short value count>` then each value as `<int length><bytes>`.
 * Grows as needed; `count` is the number of rows begun.
 */
export class BatchRows {
  buf: Buffer;
  at = 0;
  count = 0;

  constructor(
    private readonly queryId: Buffer,
    private readonly valuesPerRow: number,
    /** Expected bytes of the values of one row (room is made for this many per row, then doubled as needed). */
    rowBytes: number,
    rows: number,
  ) {
    this.buf = Buffer.allocUnsafe(rows * (5 + queryId.length + rowBytes + 4 * valuesPerRow));
  }

  private room(n: number): void {
    if (this.at + n <= this.buf.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.at + n));
    this.buf.copy(bigger, 0, 0, this.at);
    this.buf = bigger;
  }

  /** Begins a row of the batch's statement: its values follow, exactly `valuesPerRow` of them. */
  row(): void {
    this.rowOf(this.queryId, this.valuesPerRow);
  }

  /**
   * Begins a row of another prepared statement (a batch may mix them: an upsert's insert and delete of
   * one key); exactly `values` values follow.
   */
  rowOf(id: Buffer, values: number): void {
    this.room(5 + id.length);
    let at = this.at;
    this.buf[at++] = 1;
    at = this.buf.writeUInt16BE(id.length, at);
    at += id.copy(this.buf, at);
    this.at = this.buf.writeUInt16BE(values, at);
    this.count++;
  }

  /** A null value (length −1): the cell is deleted, as the driver binds null. */
  null(): void {
    this.room(4);
    this.at = this.buf.writeInt32BE(-1, this.at);
  }

  /** An unset value (length −2): the cell is left as it is (no tombstone), as the driver binds `types.unset`. */
  unset(): void {
    this.room(4);
    this.at = this.buf.writeInt32BE(-2, this.at);
  }

  /** A `text`, `varchar` or `ascii` value, its UTF-8 written in place. */
  text(s: string): void {
    const n = s.length;
    if (n <= 64) {
      // A short ASCII string byte by byte: cheaper than a call into Buffer.write for the few bytes.
      this.room(4 + n);
      const buf = this.buf;
      const at = this.at + 4;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c >= 0x80) break;
        buf[at + i] = c;
      }
      if (i === n) {
        buf.writeInt32BE(n, this.at);
        this.at = at + n;
        return;
      }
    }
    this.room(4 + 3 * n);
    const bytes = this.buf.write(s, this.at + 4, 'utf8');
    this.buf.writeInt32BE(bytes, this.at);
    this.at += 4 + bytes;
  }

  /** Makes room for a value of `size` bytes and writes its length: returns where its bytes go. */
  private fixed(size: number): number {
    this.room(4 + size);
    return this.buf.writeInt32BE(size, this.at);
  }

  /** A `double` value. */
  double(v: number): void {
    const at = this.fixed(8);
    this.at = this.buf.writeDoubleBE(v, at);
  }

  /** A `float` value. */
  float(v: number): void {
    const at = this.fixed(4);
    this.at = this.buf.writeFloatBE(v, at);
  }

  /** A `boolean` value. */
  boolean(v: boolean): void {
    const at = this.fixed(1);
    this.buf[at] = v ? 1 : 0;
    this.at = at + 1;
  }

  /** A `smallint` value. */
  int16(v: number): void {
    const at = this.fixed(2);
    this.at = this.buf.writeInt16BE(v, at);
  }

  /** A `tinyint` value. */
  int8(v: number): void {
    const at = this.fixed(1);
    this.at = this.buf.writeInt8(v, at);
  }

  /** A `bigint` (int64) value. */
  int64(v: bigint): void {
    const at = this.fixed(8);
    this.at = this.buf.writeBigInt64BE(v, at);
  }

  /** A `bigint` or `timestamp` value from a safe integer. */
  int64FromNumber(v: number): void {
    const at = this.fixed(8);
    const high = Math.floor(v / 4294967296);
    this.buf.writeInt32BE(high, at);
    this.at = this.buf.writeUInt32BE(v - high * 4294967296, at + 4);
  }

  /** A `bigint` (int64) value from its two 32-bit halves (the driver's Long). */
  int64Bits(high: number, low: number): void {
    const at = this.fixed(8);
    this.buf.writeInt32BE(high, at);
    this.at = this.buf.writeInt32BE(low, at + 4);
  }

  /** An `int` value. */
  int32(v: number): void {
    const at = this.fixed(4);
    this.at = this.buf.writeInt32BE(v, at);
  }

  /** A value already encoded (e.g. a `text` value's UTF-8 bytes from a ValueCache). */
  bytes(b: Buffer): void {
    this.room(4 + b.length);
    const at = this.buf.writeInt32BE(b.length, this.at);
    this.at = at + b.copy(this.buf, at);
  }
}
