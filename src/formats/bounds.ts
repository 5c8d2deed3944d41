/**
 * What one record may make a decoder allocate or compute. A decoder reads bytes a stranger wrote: a
 * count or a length in them is a claim, and a claim larger than the bytes behind it would make the
 * library allocate (or loop) for what is not there. So every decoder checks, before it allocates:
 * - a length or a count of items that take at least one byte each is at most the bytes left;
 * - items that take no bytes at all (Avro `null`, an empty record, a zero-size fixed) are at most
 *   MAX_EMPTY_ITEMS in one record;
 * - the values one record decodes to (records, fields, items) are at most valueBudget(its bytes): a
 *   schema can make one byte decode to many values (a record of 1,000 null fields and a boolean);
 * - values nest at most MAX_NESTING deep: the parsers recurse, and a depth that only the call stack
 *   bounds would decide a record by where it was decoded (a worker and the auditor could disagree);
 * - a decimal holds at most MAX_DECIMAL_BYTES (its digits are written out, quadratic in its length).
 * What is then allocated is linear in the record's size, which `--max-record-bytes` (the events job)
 * or the broker's message size bounds. A record past a bound is quarantined: `too_large` when it is
 * well-formed but beyond what a record may hold here, `bad_payload` (`bad_json`) when it claims more
 * than it carries.
 */

/** How deep arrays, maps, objects and messages may nest in one record. */
export const MAX_NESTING = 100;
/** Items that take no bytes (Avro null, empty records) in one record. */
export const MAX_EMPTY_ITEMS = 65_536;
/**
 * The values (records, fields, items, entries) one record of `bytes` may decode to: 8 per byte, past
 * MAX_EMPTY_ITEMS. A value that takes a byte is one of at most `bytes`; nested records of few bytes
 * each reach a few per byte; only a schema of mostly empty fields reaches more.
 */
export function valueBudget(bytes: number): number {
  return MAX_EMPTY_ITEMS + 8 * bytes;
}
/** An Avro decimal's unscaled bytes (1,024 bytes is about 2,466 digits). */
export const MAX_DECIMAL_BYTES = 1024;

/** A record the decoder refuses before allocating for it: its quarantine reason and why. */
export class DecodeBoundError extends Error {
  constructor(
    readonly reason: 'too_large' | 'bad_payload',
    message: string,
  ) {
    super(message);
  }
}

const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * The first depth past `max` that a JSON text's arrays and objects reach, or undefined. One pass over
 * the text, skipping strings; it does not check the grammar (the parser does, after).
 */
export function jsonNestingPast(text: string, max = MAX_NESTING): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > max) return depth;
    } else if (c === CLOSE_BRACE || c === CLOSE_BRACKET) depth--;
  }
  return undefined;
}

/** Why a JSON text nests too deep, or undefined. */
export function jsonTooDeep(text: string): string | undefined {
  return jsonNestingPast(text) === undefined ? undefined : `it nests arrays and objects more than ${MAX_NESTING} deep`;
}
