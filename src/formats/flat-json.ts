/**
 * The sink's JSON fast path: a flat object — string values without escapes, numbers, true, false,
 * null, no nesting — scanned in one pass with no per-character string building. What it returns is
 * exactly what lossless-json's `parse` returns for the same text (numbers as LosslessNumber, keys in
 * order); for anything else (an escape, a nested value, a duplicate key, `__proto__`, a syntax error)
 * it returns undefined and the caller takes lossless-json's path, which then decides, so every error
 * and every unusual record is judged exactly as lossless-json alone would judge it.
 * test/unit/flat-json.test.ts compares the two on seeded random texts.
 */
import { LosslessNumber } from 'lossless-json';

const SPACE = 0x20;
const TAB = 0x09;
const NL = 0x0a;
const CR = 0x0d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const COLON = 0x3a;
const OPEN = 0x7b;
const CLOSE = 0x7d;
const MINUS = 0x2d;
const PLUS = 0x2b;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;

const isDigit = (c: number) => c >= ZERO && c <= NINE;

/** Whether `c` is JSON whitespace (lossless-json's set: space, tab, newline, carriage return). */
const isSpace = (c: number) => c === SPACE || c === NL || c === TAB || c === CR;

/** What a member's value is (FlatTokens.kind). */
export const STRING = 1;
export const NUMBER = 2;
export const TRUE = 3;
export const FALSE = 4;
export const NULL = 5;

/**
 * A flat object's members as spans of its text, in order: no string is built while scanning. `hash`
 * is a hash of the key's characters (equal keys, equal hashes). Grows as needed; reused across texts.
 */
export class FlatTokens {
  count = 0;
  keyStart = new Int32Array(16);
  keyEnd = new Int32Array(16);
  hash = new Int32Array(16);
  kind = new Uint8Array(16);
  /** A string's span without its quotes; a number's text. */
  valueStart = new Int32Array(16);
  valueEnd = new Int32Array(16);

  add(): number {
    if (this.count === this.kind.length) {
      const grow = <T extends Int32Array | Uint8Array>(a: T): T => {
        const b = new (a.constructor as new (n: number) => T)(a.length * 2);
        b.set(a);
        return b;
      };
      this.keyStart = grow(this.keyStart);
      this.keyEnd = grow(this.keyEnd);
      this.hash = grow(this.hash);
      this.kind = grow(this.kind);
      this.valueStart = grow(this.valueStart);
      this.valueEnd = grow(this.valueEnd);
    }
    return this.count++;
  }
}

/** The hash FlatTokens gives a key. */
function keyHash(key: string): number {
  let h = 0;
  for (let i = 0; i < key.length; i++) h = (Math.imul(h, 31) + key.charCodeAt(i)) | 0;
  return h;
}

/**
 * Scans `text` as a flat object into `t`: false for anything else (an escape, a control character, a
 * nested value, a syntax error), which lossless-json then judges. Duplicate keys and `__proto__` are
 * the caller's to refuse. One function, one index, no closures: the sink's per-record hot path.
 */
export function scanFlatObject(text: string, t: FlatTokens): boolean {
  t.count = 0;
  const n = text.length;
  let i = 0;
  while (isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== OPEN) return false;
  i++;
  while (isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) === CLOSE) {
    i++;
  } else {
    for (;;) {
      if (text.charCodeAt(i) !== QUOTE) return false;
      const m = t.add();
      let h = 0;
      let c = 0;
      const keyStart = ++i;
      for (; i < n; i++) {
        c = text.charCodeAt(i);
        if (c === QUOTE || c === BACKSLASH || c < SPACE) break;
        h = (Math.imul(h, 31) + c) | 0;
      }
      if (c !== QUOTE || i >= n) return false;
      t.keyStart[m] = keyStart;
      t.keyEnd[m] = i;
      t.hash[m] = h;
      i++;
      while (isSpace(text.charCodeAt(i))) i++;
      if (text.charCodeAt(i) !== COLON) return false;
      i++;
      while (isSpace(text.charCodeAt(i))) i++;
      c = text.charCodeAt(i);
      if (c === QUOTE) {
        const start = ++i;
        for (; i < n; i++) {
          c = text.charCodeAt(i);
          if (c === QUOTE || c === BACKSLASH || c < SPACE) break;
        }
        if (c !== QUOTE || i >= n) return false;
        t.kind[m] = STRING;
        t.valueStart[m] = start;
        t.valueEnd[m] = i;
        i++;
      } else if (c === MINUS || isDigit(c)) {
        // RFC 8259's number grammar, as lossless-json reads it.
        const start = i;
        if (c === MINUS) i++;
        if (text.charCodeAt(i) === ZERO) i++;
        else if (isDigit(text.charCodeAt(i))) while (isDigit(text.charCodeAt(++i)));
        else return false;
        if (text.charCodeAt(i) === DOT) {
          if (!isDigit(text.charCodeAt(++i))) return false;
          while (isDigit(text.charCodeAt(++i)));
        }
        const e = text.charCodeAt(i);
        if (e === 0x65 || e === 0x45) {
          const sign = text.charCodeAt(++i);
          if (sign === MINUS || sign === PLUS) i++;
          if (!isDigit(text.charCodeAt(i))) return false;
          while (isDigit(text.charCodeAt(++i)));
        }
        t.kind[m] = NUMBER;
        t.valueStart[m] = start;
        t.valueEnd[m] = i;
      } else if (text.startsWith('true', i)) {
        t.kind[m] = TRUE;
        i += 4;
      } else if (text.startsWith('false', i)) {
        t.kind[m] = FALSE;
        i += 5;
      } else if (text.startsWith('null', i)) {
        t.kind[m] = NULL;
        i += 4;
      } else {
        return false;
      }
      while (isSpace(text.charCodeAt(i))) i++;
      const next = text.charCodeAt(i);
      i++;
      if (next === CLOSE) break;
      if (next !== COMMA) return false;
      while (isSpace(text.charCodeAt(i))) i++;
    }
  }
  while (isSpace(text.charCodeAt(i))) i++;
  return i === n;
}

const scratch = new FlatTokens();

/**
 * A flat object, exactly as lossless-json's `parse` returns it (numbers as LosslessNumber, keys in
 * order), or undefined: not a flat object, a duplicate key or `__proto__` (lossless-json decides).
 */
export function parseFlatObject(text: string): Record<string, unknown> | undefined {
  if (!scanFlatObject(text, scratch)) return undefined;
  const t = scratch;
  const out: Record<string, unknown> = {};
  for (let m = 0; m < t.count; m++) {
    const key = text.slice(t.keyStart[m], t.keyEnd[m]);
    if (key === '__proto__' || Object.prototype.hasOwnProperty.call(out, key)) return undefined;
    out[key] = tokenValue(text, t, m);
  }
  return out;
}

/** Member `m`'s value as lossless-json gives it. */
function tokenValue(text: string, t: FlatTokens, m: number): unknown {
  switch (t.kind[m]) {
    case STRING:
      return text.slice(t.valueStart[m], t.valueEnd[m]);
    case NUMBER:
      return new LosslessNumber(text.slice(t.valueStart[m], t.valueEnd[m]));
    case TRUE:
      return true;
    case FALSE:
      return false;
    default:
      return null;
  }
}

/**
 * Picks the members of the named `keys` out of a flat object without building it (a column-directed
 * read: members no key names cost no string). `pick` fills `at` (the member of each key, −1 when
 * absent) and is false where parseFlatObject would be undefined, and also when two keys' hashes are
 * equal (a possible duplicate: the general path decides).
 */
export class FlatPicker {
  readonly tokens = new FlatTokens();
  /** Per key, its member in `tokens`, or −1. */
  readonly at: Int32Array;
  private readonly hashes: Int32Array;
  private seen = new Int32Array(64);
  private seenUsed = new Uint8Array(64);

  constructor(private readonly keys: readonly string[]) {
    this.at = new Int32Array(keys.length);
    this.hashes = Int32Array.from(keys, keyHash);
  }

  pick(text: string): boolean {
    const t = this.tokens;
    if (!scanFlatObject(text, t)) return false;
    if (this.sameShape(text)) return true;
    this.shape = -1;
    this.at.fill(-1);
    // Distinct hashes, so distinct keys: an open-addressed set of the hashes seen.
    if (t.count * 2 > this.seen.length) {
      // At most half full, so a probe always ends.
      let size = this.seen.length;
      while (size < t.count * 2) size *= 2;
      this.seen = new Int32Array(size);
      this.seenUsed = new Uint8Array(size);
    }
    const mask = this.seen.length - 1;
    this.seenUsed.fill(0);
    let collided = false;
    for (let m = 0; m < t.count; m++) {
      const h = t.hash[m]!;
      let s = h & mask;
      while (this.seenUsed[s] === 1) {
        if (this.seen[s] === h) return false;
        s = (s + 1) & mask;
      }
      this.seenUsed[s] = 1;
      this.seen[s] = h;
      const start = t.keyStart[m]!;
      const length = t.keyEnd[m]! - start;
      if (length === 9 && text.startsWith('__proto__', start)) return false;
      for (let k = 0; k < this.keys.length; k++) {
        if (this.hashes[k] !== h) continue;
        if (this.keys[k]!.length === length && text.startsWith(this.keys[k]!, start)) this.at[k] = m;
        else collided = true;
      }
    }
    // A member with a key's hash but not its name: its shape cannot stand for the next text's.
    if (collided) return true;
    if (this.shapeHashes.length < t.count) this.shapeHashes = new Int32Array(t.count * 2);
    this.shapeHashes.set(t.hash.subarray(0, t.count));
    this.shape = t.count;
    return true;
  }

  /** The members' hashes of the last text picked (its `shape` of them), all distinct. */
  private shapeHashes = new Int32Array(16);
  private shape = -1;

  /**
   * Whether the text just scanned has the last picked text's member hashes in the same order (a topic's
   * records mostly share one shape), so `at` holds for it too. Sound: its hashes are distinct (they were
   * last time), so are its keys; a member a key names has that key's hash, which only the member `at`
   * names had last time (a shape with a member of a key's hash and another name is not kept), and its
   * text is compared here; only `__proto__` is looked for again.
   */
  private sameShape(text: string): boolean {
    const t = this.tokens;
    if (t.count !== this.shape) return false;
    for (let m = 0; m < t.count; m++) {
      if (t.hash[m] !== this.shapeHashes[m]) return false;
      if (t.keyEnd[m]! - t.keyStart[m]! === 9 && text.startsWith('__proto__', t.keyStart[m])) return false;
    }
    for (let k = 0; k < this.keys.length; k++) {
      const m = this.at[k]!;
      if (m >= 0 && (t.keyEnd[m]! - t.keyStart[m]! !== this.keys[k]!.length || !text.startsWith(this.keys[k]!, t.keyStart[m]))) return false;
    }
    return true;
  }
}
