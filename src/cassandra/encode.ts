/**
 * Values encoded by hand for the hot path's prepared statements (the driver passes a Buffer parameter
 * through unchanged as the value's bytes; src/cassandra/prepared-batch.ts copies them into a batch's
 * rows). Each function gives exactly the bytes the driver's own encoder gives for the column type
 * (test/unit/prepared-batch.test.ts compares them); use them only for parameters of that type.
 */

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
