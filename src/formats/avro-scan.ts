/**
 * A walk over an Avro binary against its schema that allocates nothing, run before avsc decodes it.
 * avsc trusts the counts it reads: an array block of 2^31−1 items makes it size an array for them and
 * read items past the end of the buffer (a read past the end yields zeros, not an error), so an
 * 11-byte record exhausts the heap; a map block of 2^60 entries loops for ever. Here a block's count
 * is checked against the bytes left before anything is read for it: an item that takes at least one
 * byte cannot be more than the bytes left; items that take none (null, an empty record, a zero-size
 * fixed) count against MAX_EMPTY_ITEMS. Nesting is bounded by MAX_NESTING (recursive schemas), and
 * the values a record decodes to (records, fields, items) by valueBudget: a schema can make one byte
 * decode to many values (a record of a boolean and 1,000 null fields), so bytes alone do not bound them.
 * Lengths of strings, bytes and fixed, union branches and enum symbols are checked on the way, so a
 * record that passes makes avsc allocate at most linearly in its size.
 * The Avro binary encoding: https://avro.apache.org/docs/1.11.1/specification/#binary-encoding
 */
import type avro from 'avsc';
import { DecodeBoundError, MAX_EMPTY_ITEMS, MAX_NESTING, valueBudget } from './bounds.js';

/** The parts of avsc's types the walk reads. */
interface AvscType {
  readonly typeName: string;
  readonly fields?: readonly { readonly type: AvscType }[];
  readonly itemsType?: AvscType;
  readonly valuesType?: AvscType;
  readonly types?: readonly AvscType[];
  readonly underlyingType?: AvscType;
  readonly symbols?: readonly string[];
  readonly size?: number;
}

/** Whether a schema needs the walk: one holding an array or a map, or recursive. Cached per type. */
const needs = new WeakMap<object, boolean>();

export function needsScan(type: avro.Type): boolean {
  const t = type as unknown as AvscType;
  let n = needs.get(t);
  if (n === undefined) {
    n = holdsBlocks(t, new Set());
    needs.set(t, n);
  }
  return n;
}

function holdsBlocks(t: AvscType, seen: Set<AvscType>): boolean {
  if (seen.has(t)) return true; // recursive: its depth is bounded only by its bytes
  seen.add(t);
  const name = t.typeName;
  if (name === 'array' || name === 'map') return true;
  const children = [...(t.fields?.map((f) => f.type) ?? []), ...(t.types ?? []), ...(t.underlyingType === undefined ? [] : [t.underlyingType])];
  const found = children.some((c) => holdsBlocks(c, seen));
  seen.delete(t);
  return found;
}

/** The values one value of a constant-size type decodes to (itself and its fields'). */
function valueCount(t: AvscType): number {
  if (t.typeName === 'record' || t.typeName === 'error') return 1 + (t.fields ?? []).reduce((n, f) => n + valueCount(f.type), 0);
  return t.typeName.startsWith('logical:') && t.underlyingType !== undefined ? valueCount(t.underlyingType) : 1;
}

/** The bytes every value of a type takes when that is a constant (null, boolean, float, fixed, a record of such), else undefined. */
const constantSizes = new WeakMap<object, number | null>();

function constantSize(t: AvscType, inProgress = new Set<AvscType>()): number | undefined {
  const cached = constantSizes.get(t);
  if (cached !== undefined) return cached ?? undefined;
  if (inProgress.has(t)) return undefined;
  let size: number | undefined;
  switch (t.typeName) {
    case 'null':
      size = 0;
      break;
    case 'boolean':
      size = 1;
      break;
    case 'float':
      size = 4;
      break;
    case 'double':
      size = 8;
      break;
    case 'fixed':
      size = t.size ?? 0;
      break;
    case 'record':
    case 'error': {
      inProgress.add(t);
      size = 0;
      for (const f of t.fields ?? []) {
        const s = constantSize(f.type, inProgress);
        if (s === undefined) {
          size = undefined;
          break;
        }
        size += s;
      }
      inProgress.delete(t);
      break;
    }
    default:
      size = t.typeName.startsWith('logical:') && t.underlyingType !== undefined ? constantSize(t.underlyingType, inProgress) : undefined;
  }
  constantSizes.set(t, size ?? null);
  return size;
}

class Walk {
  pos = 0;
  empty = 0;
  values = 0;
  readonly budget: number;
  constructor(readonly buf: Buffer) {
    this.budget = valueBudget(buf.length);
  }

  count(n: number): void {
    this.values += n;
    if (this.values > this.budget) throw new DecodeBoundError('too_large', `it decodes to more than ${this.budget} values (records, fields and items) from ${this.buf.length} bytes`);
  }

  get left(): number {
    return this.buf.length - this.pos;
  }

  cut(what: string): never {
    throw new DecodeBoundError('bad_payload', `${what} at byte ${this.pos} is cut short (the payload has ${this.buf.length} bytes)`);
  }

  /** A zigzag varint long (at most 10 bytes), as a number (exact to 2^53: enough to compare with any length). */
  long(what: string): number {
    let n = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.buf.length) this.cut(what);
      const b = this.buf[this.pos++]!;
      n += (b & 0x7f) * scale;
      scale *= 128;
      if ((b & 0x80) === 0) return n % 2 === 0 ? n / 2 : -(n + 1) / 2;
    }
    throw new DecodeBoundError('bad_payload', `${what} at byte ${this.pos} is a varint longer than 10 bytes`);
  }

  skip(n: number, what: string): void {
    if (n > this.left) this.cut(what);
    this.pos += n;
  }

  /** A length (of a string, bytes, a block): not negative, not past the end. */
  length(what: string): number {
    const at = this.pos;
    const n = this.long(what);
    if (n < 0) throw new DecodeBoundError('bad_payload', `${what} at byte ${at} has a negative length ${n}`);
    if (n > this.left) throw new DecodeBoundError('bad_payload', `${what} at byte ${at} claims ${n} bytes; ${this.left} are left`);
    return n;
  }

  value(t: AvscType, depth: number): void {
    this.count(1);
    switch (t.typeName) {
      case 'null':
        return;
      case 'boolean':
        return this.skip(1, 'a boolean');
      case 'int':
      case 'long':
      case 'abstract:long':
        this.long('an int or long');
        return;
      case 'float':
        return this.skip(4, 'a float');
      case 'double':
        return this.skip(8, 'a double');
      case 'bytes':
      case 'string':
        this.skip(this.length(`a ${t.typeName}`), `a ${t.typeName}`);
        return;
      case 'fixed':
        return this.skip(t.size ?? 0, 'a fixed');
      case 'enum': {
        const at = this.pos;
        const i = this.long('an enum');
        if (i < 0 || i >= (t.symbols?.length ?? 0)) throw new DecodeBoundError('bad_payload', `the enum at byte ${at} names symbol ${i}; it has ${t.symbols?.length ?? 0}`);
        return;
      }
      case 'union:unwrapped':
      case 'union:wrapped': {
        const at = this.pos;
        const i = this.long('a union branch');
        const branch = t.types?.[i];
        if (branch === undefined) throw new DecodeBoundError('bad_payload', `the union at byte ${at} names branch ${i}; it has ${t.types?.length ?? 0}`);
        return this.nested(branch, depth);
      }
      case 'record':
      case 'error':
        this.deeper(depth);
        for (const f of t.fields ?? []) this.value(f.type, depth + 1);
        return;
      case 'array':
        return this.blocks(t.itemsType!, false, depth);
      case 'map':
        return this.blocks(t.valuesType!, true, depth);
      default:
        if (t.underlyingType !== undefined) return this.value(t.underlyingType, depth);
        throw new DecodeBoundError('bad_payload', `the schema has a type this decoder does not know (${t.typeName})`);
    }
  }

  private nested(t: AvscType, depth: number): void {
    this.deeper(depth);
    this.value(t, depth + 1);
  }

  private deeper(depth: number): void {
    if (depth + 1 > MAX_NESTING) throw new DecodeBoundError('too_large', `values nest more than ${MAX_NESTING} deep`);
  }

  /** An array's or map's blocks: a count (negative: followed by the block's size in bytes), 0 ends them. */
  private blocks(item: AvscType, map: boolean, depth: number): void {
    this.deeper(depth);
    const what = map ? 'a map block' : 'an array block';
    // A map entry starts with its key (a string: at least its length byte), so only array items can be empty.
    const size = map ? undefined : constantSize(item);
    const each = size === undefined ? 0 : valueCount(item);
    for (;;) {
      const at = this.pos;
      let n = this.long(what);
      if (n === 0) return;
      if (n < 0) {
        n = -n;
        this.length(`${what}'s size`);
      }
      if (size === 0) {
        this.empty += n;
        if (this.empty > MAX_EMPTY_ITEMS) throw new DecodeBoundError('too_large', `arrays of items that take no bytes hold more than ${MAX_EMPTY_ITEMS} items (the block at byte ${at} claims ${n})`);
        this.count(n * each);
        continue;
      }
      if (n > this.left / (size ?? 1)) throw new DecodeBoundError('bad_payload', `${what} at byte ${at} claims ${n} items; ${this.left} bytes are left`);
      if (size !== undefined) {
        this.count(n * each);
        this.pos += n * size;
        continue;
      }
      for (let i = 0; i < n; i++) {
        if (map) this.skip(this.length('a map key'), 'a map key');
        this.value(item, depth + 1);
      }
    }
  }
}

/** Throws a DecodeBoundError when the payload claims more than it holds or more than a record may hold. */
export function scanAvro(type: avro.Type, payload: Buffer): void {
  new Walk(payload).value(type as unknown as AvscType, 0);
}
