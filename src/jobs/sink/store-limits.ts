/**
 * What Cassandra refuses to store, known before a row is written: a sink's record whose key or row
 * the server would refuse is quarantined with its reason, so that one record never stops its
 * partition (a permanent write error stops every record behind it). Pure: the sizes follow the native
 * protocol v4 encoding of the values `convert` (src/jobs/sink/cql-types.ts) makes. Unit-tested in
 * test/unit/sink-store-limits.test.ts.
 *
 * What the server refuses, and what `convert` already keeps out:
 * - a partition key longer than 65,535 bytes (its length is an unsigned short: Cassandra's
 *   `QueryProcessor.validateKey`, "Key length of N is longer than maximum of 65535"). A composite key
 *   ((a, b)) is serialized as one CompositeType value, each component a 2-byte length, its bytes and an
 *   end-of-component byte, and that whole must fit; a one-column key whose value is empty ('' as text)
 *   is refused too ("Key may not be empty"). A sink's table has no clustering key the record chooses:
 *   log mode clusters by the record's offset (a bigint), upsert mode has none;
 * - a mutation larger than `max_mutation_size`, by default half the commit log segment (32 MiB):
 *   16 MiB. A row is kept below MAX_ROW_BYTES, so that it, its key and a log-mode batch's earlier
 *   rows (batches are cut at 1 MiB of rows, src/cassandra/batches.ts) stay below it;
 * - collections: protocol v3 and later count items and sizes in 4-byte ints (the driver's
 *   `protocolVersion.uses4BytesCollectionLength`), so a frozen list or map is limited by its size, not
 *   by 65,535 items (the limit of protocol v2, which the driver does not use here): at 4 bytes or more
 *   per item, the row bound holds a collection far below 2^31 items;
 * - int outside 32 bits, bigint outside 64 bits, a timestamp outside a JavaScript Date's range (±8.64e15
 *   ms, well inside Cassandra's 64-bit ms) and a non-finite double are refused by `convert` already
 *   (`bad_value`), as is a decimal whose exponent spells out more than 1000 digits.
 */
import { types } from '../../cassandra/session.js';
import type { CqlType, ScalarType } from './cql-types.js';

/** The longest partition key Cassandra stores, in bytes (an unsigned short). */
export const MAX_KEY_BYTES = 65_535;
/**
 * The largest row a sink writes, in bytes of its values as bound: 16 MiB (`max_mutation_size` with the
 * default 32 MiB commit log segment) less 2 MiB for the mutation's own headers, its key and a log-mode
 * batch's earlier rows (cut at 1 MiB).
 */
export const MAX_ROW_BYTES = 14 * 1024 * 1024;

/** Why Cassandra would refuse a row, as a quarantine reason and one line of detail. */
export interface Refusal {
  readonly reason: 'key_too_large' | 'empty_key' | 'value_too_large';
  readonly detail: string;
}

function scalarBytes(type: ScalarType, v: unknown): number {
  switch (type) {
    case 'text':
      return Buffer.byteLength(v as string, 'utf8');
    case 'blob':
      return (v as Buffer).length;
    case 'tinyint':
      return 1;
    case 'smallint':
      return 2;
    case 'int':
    case 'float':
    case 'date':
      return 4;
    case 'time':
      return 8;
    case 'inet':
      return (v as InstanceType<typeof types.InetAddress>).getBuffer().length;
    case 'timeuuid':
      return 16;
    case 'bigint':
    case 'double':
    case 'timestamp':
      return 8;
    case 'boolean':
      return 1;
    case 'uuid':
      return 16;
    case 'decimal':
      return types.BigDecimal.toBuffer(v as InstanceType<typeof types.BigDecimal>).length; // its scale and unscaled varint, linear in its digits
  }
}

/** Bytes of a converted value as the driver serializes it (protocol v4), without its own 4-byte length. */
export function valueBytes(type: CqlType, v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (type.kind === 'scalar') return scalarBytes(type.name, v);
  if (type.kind === 'list' || type.kind === 'set') {
    let n = 4;
    for (const x of v as Iterable<unknown>) n += 4 + valueBytes(type.of, x);
    return n;
  }
  let n = 4;
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) n += 8 + Buffer.byteLength(k, 'utf8') + valueBytes(type.of, x);
  return n;
}

/** The key of an upsert row (its partition key), or why Cassandra would refuse it. */
export function refusedKey(columns: readonly { name: string; type: CqlType }[], key: readonly unknown[]): Refusal | undefined {
  const sizes = columns.map((c, i) => valueBytes(c.type, key[i]));
  if (columns.length === 1) {
    if (sizes[0] === 0) return { reason: 'empty_key', detail: `${columns[0]!.name}: the key is empty, and Cassandra refuses an empty partition key` };
    if (sizes[0]! > MAX_KEY_BYTES) return { reason: 'key_too_large', detail: `${columns[0]!.name}: the key is ${sizes[0]} bytes, above Cassandra's ${MAX_KEY_BYTES}-byte partition key limit` };
    return undefined;
  }
  // CompositeType: per component a 2-byte length, the bytes and an end-of-component byte.
  const whole = sizes.reduce((a, b) => a + 3 + b, 0);
  if (whole > MAX_KEY_BYTES) {
    const parts = columns.map((c, i) => `${c.name} ${sizes[i]}`).join(', ');
    return { reason: 'key_too_large', detail: `the key (${columns.map((c) => c.name).join(', ')}) is ${whole} bytes serialized (${parts}), above Cassandra's ${MAX_KEY_BYTES}-byte partition key limit` };
  }
  return undefined;
}

/** The row's size in bytes as bound (each value with its 4-byte length), or why Cassandra would refuse it. */
export function rowBytes(columns: readonly { name: string; type: CqlType }[], values: readonly unknown[]): { bytes: number; refusal?: Refusal } {
  let bytes = 0;
  let largest = 0;
  let largestAt = 0;
  for (let i = 0; i < columns.length; i++) {
    const n = valueBytes(columns[i]!.type, values[i]);
    bytes += 4 + n;
    if (n > largest) {
      largest = n;
      largestAt = i;
    }
  }
  if (bytes <= MAX_ROW_BYTES) return { bytes };
  return {
    bytes,
    refusal: { reason: 'value_too_large', detail: `the row is ${bytes} bytes (${columns[largestAt]!.name}: ${largest}), above the ${MAX_ROW_BYTES} a sink writes (Cassandra refuses a mutation over max_mutation_size, 16 MiB by default)` },
  };
}
