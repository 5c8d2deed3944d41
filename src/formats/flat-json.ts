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

export function parseFlatObject(text: string): Record<string, unknown> | undefined {
  const n = text.length;
  let i = 0;
  const ws = () => {
    for (let c = text.charCodeAt(i); c === SPACE || c === NL || c === TAB || c === CR; c = text.charCodeAt(++i));
  };
  /** A string without escapes or control characters at i (on its opening quote); undefined otherwise. */
  const str = (): string | undefined => {
    const start = ++i;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (c === QUOTE) return text.slice(start, i++);
      if (c === BACKSLASH || c < SPACE) return undefined;
    }
    return undefined;
  };
  ws();
  if (text.charCodeAt(i) !== OPEN) return undefined;
  i++;
  ws();
  const out: Record<string, unknown> = {};
  if (text.charCodeAt(i) === CLOSE) {
    i++;
  } else {
    for (;;) {
      if (text.charCodeAt(i) !== QUOTE) return undefined;
      const key = str();
      if (key === undefined || key === '__proto__' || Object.prototype.hasOwnProperty.call(out, key)) return undefined;
      ws();
      if (text.charCodeAt(i) !== COLON) return undefined;
      i++;
      ws();
      const c = text.charCodeAt(i);
      let value: unknown;
      if (c === QUOTE) {
        value = str();
        if (value === undefined) return undefined;
      } else if (c === MINUS || isDigit(c)) {
        // RFC 8259's number grammar, as lossless-json reads it.
        const start = i;
        if (text.charCodeAt(i) === MINUS) i++;
        if (text.charCodeAt(i) === ZERO) i++;
        else if (isDigit(text.charCodeAt(i))) while (isDigit(text.charCodeAt(++i)));
        else return undefined;
        if (text.charCodeAt(i) === DOT) {
          if (!isDigit(text.charCodeAt(++i))) return undefined;
          while (isDigit(text.charCodeAt(++i)));
        }
        const e = text.charCodeAt(i);
        if (e === 0x65 || e === 0x45) {
          const s = text.charCodeAt(++i);
          if (s === MINUS || s === PLUS) i++;
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
      ws();
      const next = text.charCodeAt(i);
      i++;
      if (next === CLOSE) break;
      if (next !== COMMA) return undefined;
      ws();
    }
  }
  ws();
  return i === n ? out : undefined;
}
