/**
 * A sink's `where:`: a small declarative predicate over the record, any column source
 * (src/jobs/sink/column-source.ts). A record it does not hold for is filtered: no row, no quarantine row;
 * the checkpoint passes it, exactlyonce_sink_filtered_total counts it, and `verify --job` proves it was
 * the rule that left it out (recomputing the predicate from the record).
 *
 *   where: { field: value.status, equals: paid }
 *   where: { field: header.source, in: [web, app] }
 *   where: { field: value.coupon, exists: true }     # present and not null (false: missing or null)
 *   where: { not: { field: $partition, equals: 0 } }
 *   where: { all: [ <predicate>, … ] }               # and; any: or
 *
 * equals and in compare the field's value with literals (text, numbers, booleans): numbers by their
 * value (1.0 equals 1), a header's or the record key's text as a number when the literal is one.
 * A field that is missing equals nothing. Deterministic: a pure function of the record.
 */
import { isLosslessNumber } from 'lossless-json';
import { didYouMean } from '../../suggest.js';
import { parseColumnSource, type ColumnSource } from './column-source.js';

export type Literal = string | number | boolean;
export type Predicate =
  | { readonly op: 'equals'; readonly field: ColumnSource; readonly values: readonly Literal[] }
  | { readonly op: 'exists'; readonly field: ColumnSource; readonly exists: boolean }
  | { readonly op: 'not'; readonly of: Predicate }
  | { readonly op: 'all' | 'any'; readonly of: readonly Predicate[] };

const KEYS = ['field', 'equals', 'in', 'exists', 'not', 'all', 'any'];
const isLiteral = (v: unknown): v is Literal => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/** Parses a `where:` (as YAML or JSON gave it); problems are pushed as `where.…: why`. */
export function parsePredicate(raw: unknown, at: string, problems: string[]): Predicate | undefined {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    problems.push(`${at}: expected a predicate: { field, equals | in | exists }, { not }, { all: [...] } or { any: [...] }`);
    return undefined;
  }
  const o = raw as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => !KEYS.includes(k));
  for (const k of unknown) {
    const hint = didYouMean(k, KEYS);
    problems.push(`${at}.${k}: unknown key${hint !== '' ? hint : `; a predicate's keys are ${KEYS.join(', ')}`}`);
  }
  if (unknown.length > 0) return undefined;
  const ops = ['equals', 'in', 'exists', 'not', 'all', 'any'].filter((k) => k in o);
  if (ops.length !== 1) {
    problems.push(`${at}: expected exactly one of equals, in, exists (with field), not, all, any${ops.length > 1 ? `; got ${ops.join(', ')}` : ''}`);
    return undefined;
  }
  const op = ops[0]!;
  if (op === 'not' || op === 'all' || op === 'any') {
    if ('field' in o) problems.push(`${at}.field: ${op} takes predicates, not a field`);
    if (op === 'not') {
      const of = parsePredicate(o['not'], `${at}.not`, problems);
      return of === undefined ? undefined : { op, of };
    }
    const list = o[op];
    if (!Array.isArray(list) || list.length === 0) {
      problems.push(`${at}.${op}: expected a non-empty list of predicates`);
      return undefined;
    }
    const of = list.map((p, i) => parsePredicate(p, `${at}.${op}.${i}`, problems));
    return of.every((p) => p !== undefined) ? { op, of: of as Predicate[] } : undefined;
  }
  if (typeof o['field'] !== 'string' || o['field'] === '') {
    problems.push(`${at}.field: ${o['field'] === undefined ? `missing (${op} needs the field it tests)` : 'expected a field: value.a.b, key.x, header.<name>, $topic, …'}`);
    return undefined;
  }
  const field = parseColumnSource(o['field']);
  if (typeof field === 'string') {
    problems.push(`${at}.field: ${field}`);
    return undefined;
  }
  if (op === 'exists') {
    if (typeof o['exists'] !== 'boolean') {
      problems.push(`${at}.exists: expected true or false`);
      return undefined;
    }
    return { op, field, exists: o['exists'] };
  }
  if (op === 'equals') {
    if (!isLiteral(o['equals'])) {
      problems.push(`${at}.equals: expected a text, number or boolean${o['equals'] === null ? ' (null: use exists: false)' : ''}`);
      return undefined;
    }
    return { op: 'equals', field, values: [o['equals']] };
  }
  const values = o['in'];
  if (!Array.isArray(values) || values.length === 0 || !values.every(isLiteral)) {
    problems.push(`${at}.in: expected a non-empty list of texts, numbers or booleans`);
    return undefined;
  }
  return { op: 'equals', field, values };
}

/** The fields a predicate reads, each once (by source and path), with the literals it compares them with. */
export function predicateFields(p: Predicate): Array<{ field: ColumnSource; literals: Literal[] }> {
  const out: Array<{ field: ColumnSource; literals: Literal[] }> = [];
  const walk = (q: Predicate): void => {
    if (!('field' in q)) {
      if (q.op === 'not') walk(q.of);
      else q.of.forEach(walk);
      return;
    }
    const same = (f: ColumnSource) => f.source === q.field.source && f.path.join('.') === q.field.path.join('.');
    let f = out.find((x) => same(x.field));
    if (f === undefined) out.push((f = { field: q.field, literals: [] }));
    if (q.op === 'equals') f.literals.push(...q.values);
  };
  walk(p);
  return out;
}

/** The predicate as stable text, for the job's stored settings. */
export function predicateSetting(p: Predicate): unknown {
  switch (p.op) {
    case 'equals':
      return { field: p.field.source === 'value' ? p.field.path.join('.') : p.field.spec, in: p.values };
    case 'exists':
      return { field: p.field.source === 'value' ? p.field.path.join('.') : p.field.spec, exists: p.exists };
    case 'not':
      return { not: predicateSetting(p.of) };
    default:
      return { [p.op]: p.of.map(predicateSetting) };
  }
}

const INTEGER = /^-?\d+$/;
const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/** A field's value as a number's text, when it is one (`asText`: text that spells a number counts, for headers and keys). */
function numberOf(v: unknown, asText: boolean): string | undefined {
  if (isLosslessNumber(v)) return (v as { toString(): string }).toString();
  if (typeof v === 'number' && Number.isFinite(v)) return String(v);
  if (typeof v === 'bigint') return v.toString();
  if (asText && typeof v === 'string' && NUMBER.test(v)) return v;
  return undefined;
}

function sameNumber(a: string, b: string): boolean {
  if (INTEGER.test(a) && INTEGER.test(b)) return BigInt(a) === BigInt(b);
  return Number(a) === Number(b);
}

/** Whether a field's value equals a literal (see the header comment). */
export function literalEquals(v: unknown, literal: Literal, textual: boolean): boolean {
  if (v === undefined || v === null) return false;
  if (typeof literal === 'number') {
    const n = numberOf(v, textual);
    return n !== undefined && sameNumber(n, String(literal));
  }
  if (typeof literal === 'boolean') return v === literal || (textual && v === String(literal));
  return typeof v === 'string' && v === literal;
}

/**
 * Evaluates a predicate; `value(field)` gives a field's raw value (undefined: missing) and whether it is
 * text read from bytes (a header, the record key).
 */
export function holds(p: Predicate, value: (field: ColumnSource) => { v: unknown; textual: boolean }): boolean {
  switch (p.op) {
    case 'equals': {
      const { v, textual } = value(p.field);
      return p.values.some((l) => literalEquals(v, l, textual));
    }
    case 'exists': {
      const { v } = value(p.field);
      return (v !== undefined && v !== null) === p.exists;
    }
    case 'not':
      return !holds(p.of, value);
    case 'all':
      return p.of.every((x) => holds(x, value));
    case 'any':
      return p.of.some((x) => holds(x, value));
  }
}
