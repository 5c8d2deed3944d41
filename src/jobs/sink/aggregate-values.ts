/**
 * The arithmetic of a sink's aggregates (src/jobs/sink/sink-aggregate.ts): a (group, window)'s state and
 * how a record's values fold into it, exactly. Integer sums are 64-bit integers (beyond: the partition
 * stops, EO_PERMANENT_ERROR, rather than wrap); decimal sums are unscaled integers with a scale, never
 * floats; doubles add in offset order within a partition and in partition order across partitions,
 * so a state is a pure function of the records it includes.
 */
import { types } from 'cassandra-driver';
import { fromLong, toLong } from '../../cassandra/session.js';
import type { Fold } from '../../engine/aggregation.js';
import { ExactlyOnceError } from '../../errors.js';
import type { AggregateColumn, AggregateSpec, Arithmetic } from './aggregate-config.js';
import { decimalOf } from './cql-types.js';

/** A decimal exactly: u · 10^-s. */
export interface Dec {
  u: bigint;
  s: number;
}
/** One aggregate's value: an integer, a decimal, a double or a time (ms). */
export type Num = bigint | Dec | number;
/** A (group, window)'s state: the records folded, and per aggregate its value (null before any) and how many values it took. */
export interface AggState {
  records: bigint;
  values: Array<Num | null>;
  counts: bigint[];
}

const INT64_MAX = (1n << 63n) - 1n;
const INT64_MIN = -(1n << 63n);

export function decimalParts(v: unknown): Dec {
  const buf = types.BigDecimal.toBuffer(v as InstanceType<typeof types.BigDecimal>);
  let s = buf.readInt32BE(0);
  const bytes = buf.subarray(4);
  let u = bytes.length === 0 ? 0n : BigInt.asIntN(bytes.length * 8, BigInt(`0x${bytes.toString('hex')}`));
  if (s < 0) {
    u *= 10n ** BigInt(-s);
    s = 0;
  }
  return { u, s };
}

export function decimalText(d: Dec): string {
  const neg = d.u < 0n;
  const digits = (neg ? -d.u : d.u).toString().padStart(d.s + 1, '0');
  const text = d.s === 0 ? digits : `${digits.slice(0, digits.length - d.s)}.${digits.slice(digits.length - d.s)}`;
  return neg ? `-${text}` : text;
}

const align = (a: Dec, b: Dec): [bigint, bigint, number] => (a.s >= b.s ? [a.u, b.u * 10n ** BigInt(a.s - b.s), a.s] : [a.u * 10n ** BigInt(b.s - a.s), b.u, b.s]);

/** A column's value (as decoded, or as read back from Cassandra) as the fold reads it; null: none. */
export function numOf(arithmetic: Arithmetic, v: unknown): Num | null {
  if (v === null || v === undefined) return null;
  switch (arithmetic) {
    case 'int':
      return typeof v === 'number' ? BigInt(v) : fromLong(v as types.Long);
    case 'decimal':
      return decimalParts(v);
    case 'double':
      return v as number;
    case 'timestamp':
      return (v as Date).getTime();
  }
}

function add(a: Num, b: Num, what: () => string): Num {
  if (typeof a === 'bigint') {
    const sum = a + (b as bigint);
    if (sum > INT64_MAX || sum < INT64_MIN) {
      throw new ExactlyOnceError('EO_PERMANENT_ERROR', `${what()}: the sum ${sum} is beyond bigint's 64 bits; nothing of the batch is stored. Sum a decimal column instead (exact, unbounded), under a new sink name`);
    }
    return sum;
  }
  if (typeof a === 'number') return a + (b as number);
  const [x, y, s] = align(a, b as Dec);
  return { u: x + y, s };
}

function compare(a: Num, b: Num): number {
  if (typeof a === 'bigint') return a < (b as bigint) ? -1 : a > (b as bigint) ? 1 : 0;
  if (typeof a === 'number') return a < (b as number) ? -1 : a > (b as number) ? 1 : 0;
  const [x, y] = align(a, b as Dec);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The fold of a spec's aggregates over a sink row's values (`where` names a record in errors). */
export function aggregateFold(spec: AggregateSpec, where: (at: { partition: number; offset: bigint }) => string): Fold<unknown[], AggState> {
  const one = (fn: AggregateColumn['fn'], a: Num | null, b: Num | null, what: () => string): Num | null => {
    if (a === null) return b;
    if (b === null) return a;
    if (fn === 'min') return compare(b, a) < 0 ? b : a;
    if (fn === 'max') return compare(b, a) > 0 ? b : a;
    return add(a, b, what);
  };
  return {
    empty: () => ({ records: 0n, values: spec.aggregates.map(() => null), counts: spec.aggregates.map(() => 0n) }),
    add: (state, values, at) => {
      state.records++;
      spec.aggregates.forEach((a, i) => {
        if (a.column === undefined) return;
        const v = numOf(a.arithmetic!, values[a.column]);
        if (v === null) return;
        state.values[i] = one(a.fn, state.values[i] ?? null, v, () => `aggregate ${a.name} at ${where(at)}`);
        state.counts[i]!++;
      });
      return state;
    },
    merge: (x, y) => ({
      records: x.records + y.records,
      values: spec.aggregates.map((a, i) => one(a.fn, x.values[i] ?? null, y.values[i] ?? null, () => `aggregate ${a.name}, merging partitions`)),
      counts: spec.aggregates.map((_, i) => x.counts[i]! + y.counts[i]!),
    }),
  };
}

/** A value as bound for a column of CQL `type`. */
export function bind(v: Num | null, type: string): unknown {
  if (v === null) return null;
  if (type === 'bigint') return toLong(v as bigint);
  if (type === 'decimal') return decimalOf(decimalText(v as Dec));
  if (type === 'timestamp') return new Date(v as number);
  if (type === 'double' || type === 'float') return typeof v === 'number' ? v : Number(v);
  return typeof v === 'bigint' ? Number(v) : v; // int, smallint, tinyint
}

/** The CQL type a sum (and avg's running sum) is kept in. */
export const sumType = (a: AggregateColumn): string => (a.arithmetic === 'int' ? 'bigint' : a.arithmetic!);

/** The result row's aggregate values of a merged state, as bound. */
export function resultValues(spec: AggregateSpec, state: AggState): unknown[] {
  return spec.aggregates.map((a, i) => {
    if (a.fn === 'count') return toLong(state.records);
    if (a.fn === 'avg') {
      const n = state.counts[i]!;
      const sum = state.values[i] ?? null;
      if (sum === null || n === 0n) return null;
      return (typeof sum === 'bigint' ? Number(sum) : typeof sum === 'number' ? sum : Number(decimalText(sum))) / Number(n);
    }
    return bind(state.values[i] ?? null, a.type);
  });
}

function decimalNormal(d: Dec): string {
  let { u, s } = d;
  while (s > 0 && u % 10n === 0n) {
    u /= 10n;
    s--;
  }
  return decimalText({ u, s });
}

/** A state's or a row's value as text equal for equal values (decimals by value, whatever their scale). */
export function valueText(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (typeof v === 'bigint' || typeof v === 'number') return String(v);
  if (v instanceof Date) return String(v.getTime());
  if (v instanceof types.Long) return v.toString();
  if (v instanceof types.BigDecimal) return decimalNormal(decimalParts(v));
  if (typeof v === 'object' && 'u' in v) return decimalNormal(v as Dec);
  return String(v);
}
