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

/** The end of the string whose opening quote is at `at`: the index of its closing quote, or −1 for an escape, a control character or no end. */
function stringEnd(text: string, at: number): number {
  for (let i = at + 1; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) return i;
    if (c === BACKSLASH || c < SPACE) return -1;
  }
  return -1;
}

export function parseFlatObject(text: string): Record<string, unknown> | undefined {
  // One function, one index, no closures: this is the sink's per-record hot path.
  const n = text.length;
  let i = 0;
  while (isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== OPEN) return undefined;
  i++;
  while (isSpace(text.charCodeAt(i))) i++;
  const out: Record<string, unknown> = {};
  if (text.charCodeAt(i) === CLOSE) {
    i++;
  } else {
    for (;;) {
      if (text.charCodeAt(i) !== QUOTE) return undefined;
      let end = stringEnd(text, i);
      if (end < 0) return undefined;
      const key = text.slice(i + 1, end);
      if (key === '__proto__' || Object.prototype.hasOwnProperty.call(out, key)) return undefined;
      i = end + 1;
      while (isSpace(text.charCodeAt(i))) i++;
      if (text.charCodeAt(i) !== COLON) return undefined;
      i++;
      while (isSpace(text.charCodeAt(i))) i++;
      const c = text.charCodeAt(i);
      let value: unknown;
      if (c === QUOTE) {
        end = stringEnd(text, i);
        if (end < 0) return undefined;
        value = text.slice(i + 1, end);
        i = end + 1;
      } else if (c === MINUS || isDigit(c)) {
        // RFC 8259's number grammar, as lossless-json reads it.
        const start = i;
        if (c === MINUS) i++;
        if (text.charCodeAt(i) === ZERO) i++;
        else if (isDigit(text.charCodeAt(i))) while (isDigit(text.charCodeAt(++i)));
        else return undefined;
        if (text.charCodeAt(i) === DOT) {
          if (!isDigit(text.charCodeAt(++i))) return undefined;
          while (isDigit(text.charCodeAt(++i)));
        }
        const e = text.charCodeAt(i);
        if (e === 0x65 || e === 0x45) {
          const sign = text.charCodeAt(++i);
          if (sign === MINUS || sign === PLUS) i++;
          if (!isDigit(text.charCodeAt(i))) return undefined;
          while (isDigit(text.charCodeAt(++i)));
        }
        value = new LosslessNumber(text.slice(start, i));
      } else if (text.startsWith('true', i)) {
        value = true;
        i += 4;
      } else if (text.startsWith('false', i)) {
        value = false;
        i += 5;
      } else if (text.startsWith('null', i)) {
        value = null;
        i += 4;
      } else {
        return undefined;
      }
      out[key] = value;
      while (isSpace(text.charCodeAt(i))) i++;
      const next = text.charCodeAt(i);
      i++;
      if (next === CLOSE) break;
      if (next !== COMMA) return undefined;
      while (isSpace(text.charCodeAt(i))) i++;
    }
  }
  while (isSpace(text.charCodeAt(i))) i++;
  return i === n ? out : undefined;
}
