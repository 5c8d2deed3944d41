/**
 * Where a sink column's value comes from (its `field:`), and that value read from a record. Every
 * source is a pure function of the record, so a replay or a zombie writes the same cell again:
 *
 *   a.b, value.a.b   a field of the decoded value (a.b: nested)
 *   key              the whole decoded key, when it is a single value (a JSON scalar, or a registry key's)
 *   key.x            a field of the decoded key (a JSON object, or a registry key record)
 *   header.name      the Kafka header's bytes (its last one when repeated), decoded as the column's
 *                    type: text as UTF-8, numbers, booleans, uuids, dates … from their text, blob raw
 *   $topic $partition $offset $timestamp
 *                    the record's topic (text), partition (int, bigint), offset (bigint) and Kafka
 *                    timestamp (timestamp, or bigint epoch ms)
 *
 * What is not a function of the record (`now()`, `uuid()`, the worker's clock) is refused: a replay
 * would write another value, and `verify --job` could not recompute the row.
 */
import { LosslessNumber } from 'lossless-json';
import type { SourceRecord } from '../../engine/job.js';
import { didYouMean } from '../../suggest.js';
import type { CqlType } from './cql-types.js';

export type SourceKind = 'value' | 'key' | 'header' | 'meta';
export const META_FIELDS = ['topic', 'partition', 'offset', 'timestamp'] as const;
export type MetaField = (typeof META_FIELDS)[number];

export interface ColumnSource {
  readonly source: SourceKind;
  /** The path within the source: a value's or key's field path (empty: the whole key), a header's name, a metadata name. */
  readonly path: readonly string[];
  /** The field as written (`value.a.b`, `a.b`, `header.trace`, `$offset`), for messages. */
  readonly spec: string;
}

const SOURCES_HELP = 'a column\'s field is a.b or value.a.b (the value\'s), key or key.x (the record key\'s), header.<name>, or $topic, $partition, $offset, $timestamp';

/** The types each metadata field may be stored as. */
const META_TYPES: Readonly<Record<MetaField, readonly string[]>> = {
  topic: ['text'],
  partition: ['int', 'bigint'],
  offset: ['bigint'],
  timestamp: ['timestamp', 'bigint'],
};

/** Parses a `field:`; a string is the problem (why it is refused). */
export function parseColumnSource(spec: string): ColumnSource | string {
  const s = spec.trim();
  if (/[()]/.test(s)) {
    return `${s} is not a pure function of the record: a value computed when the row is written (now(), uuid(), a clock) differs on every replay, so the row would not be the record's and verify --job could not prove it; ${SOURCES_HELP}`;
  }
  if (s.startsWith('$')) {
    const name = s.slice(1);
    if ((META_FIELDS as readonly string[]).includes(name)) return { source: 'meta', path: [name], spec: s };
    if (/^(now|today|time|date|clock|uuid|random|wallclock|current\w*|write\w*)$/i.test(name)) {
      return `${s} is not a pure function of the record: it would differ on every replay, so the row would not be the record's and verify --job could not prove it; ${SOURCES_HELP}`;
    }
    return `${s}: unknown record metadata${didYouMean(s, META_FIELDS.map((f) => `$${f}`))}; the metadata are $topic, $partition, $offset, $timestamp`;
  }
  const dot = s.indexOf('.');
  const head = dot < 0 ? s : s.slice(0, dot);
  const rest = dot < 0 ? '' : s.slice(dot + 1);
  if (head === 'key') return { source: 'key', path: rest === '' ? [] : rest.split('.'), spec: s };
  if (head === 'header') {
    if (rest === '') return `${s}: name the header, header.<name>`;
    return { source: 'header', path: [rest], spec: s };
  }
  if (head === 'value') {
    // `value` alone: the value's field named value, as it always was.
    return { source: 'value', path: rest === '' ? ['value'] : rest.split('.'), spec: s };
  }
  return { source: 'value', path: s.split('.'), spec: s };
}

/**
 * Whether an upsert's JSON record key is its one key column's value itself rather than a JSON object of
 * the key columns' fields: one column, unless its field is a field of the key (`key.x` names the x of a
 * key object). (src/jobs/sink/key-encoding.ts)
 */
export function scalarKey(keyColumns: ReadonlyArray<{ readonly source: SourceKind; readonly field: readonly string[] }>): boolean {
  return keyColumns.length === 1 && !(keyColumns[0]!.source === 'key' && keyColumns[0]!.field.length > 0);
}

/**
 * A value's field path as a `field:` that names it (a derived column's, printed or passed on): prefixed
 * with `value.` when it would otherwise name another source (key.x, header.h, $offset).
 */
export function valueFieldSpec(path: string): string {
  const head = path.split('.')[0]!;
  return head === 'key' || head === 'header' || head === 'value' || head.startsWith('$') || /[()]/.test(path) ? `value.${path}` : path;
}

/** Why a source cannot fill a column of this type, or undefined. */
export function sourceTypeProblem(src: ColumnSource, type: CqlType): string | undefined {
  if (src.source === 'meta') {
    const allowed = META_TYPES[src.path[0] as MetaField];
    const name = type.kind === 'scalar' ? type.name : type.kind;
    if (!allowed.includes(name)) return `${src.spec} is stored as ${allowed.join(' or ')}, not ${name}`;
  }
  if (src.source === 'header' && type.kind !== 'scalar') return `${src.spec}: a header's bytes fill a scalar column (text, a number, blob, …), not a ${type.kind}`;
  return undefined;
}

/** The settings' text of a source: a value's path untagged (a.b, so settings stored when only value paths existed still match), the others tagged so they differ from any value path. */
export function sourceSetting(src: ColumnSource): string {
  switch (src.source) {
    case 'value':
      return src.path.join('.');
    case 'key':
      return `key:${src.path.join('.')}`;
    case 'header':
      return `header:${src.path[0]!}`;
    case 'meta':
      return `$${src.path[0]!}`;
  }
}

/** A record's metadata field, as the decoder would hand a value (numbers lossless). */
export function metaValue(record: SourceRecord, name: MetaField): unknown {
  switch (name) {
    case 'topic':
      return record.topic;
    case 'partition':
      return new LosslessNumber(String(record.partition));
    case 'offset':
      return new LosslessNumber(String(record.offset));
    case 'timestamp':
      return new LosslessNumber(String(record.timestampMs));
  }
}

/** The bytes of a record's header (its last one when the name repeats), or undefined. */
export function headerBytes(record: SourceRecord, name: string): Buffer | undefined {
  const hs = record.headers;
  if (hs === undefined) return undefined;
  for (let i = hs.length - 1; i >= 0; i--) if (hs[i]![0] === name) return hs[i]![1];
  return undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const NUMERIC = ['int', 'bigint', 'smallint', 'tinyint', 'float', 'double', 'decimal', 'timestamp'];
const NUMBER_TEXT = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;

/**
 * A header's bytes as the value `convert` takes for the column's type: blob raw; the others from
 * their UTF-8 text (numbers as lossless numbers, true/false as booleans, else the text, which
 * convert parses: a uuid, a date, an ISO timestamp). A string is why the bytes are no such value.
 */
export function headerValue(bytes: Buffer, type: CqlType): { ok: true; value: unknown } | { ok: false; problem: string } {
  if (type.kind === 'scalar' && type.name === 'blob') return { ok: true, value: bytes };
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { ok: false, problem: `${bytes.length} byte(s) that are not UTF-8 text` };
  }
  const name = type.kind === 'scalar' ? type.name : '';
  if (NUMERIC.includes(name) && NUMBER_TEXT.test(text)) return { ok: true, value: new LosslessNumber(text) };
  if (name === 'boolean') return text === 'true' || text === 'false' ? { ok: true, value: text === 'true' } : { ok: false, problem: `expected true or false, got ${JSON.stringify(text.slice(0, 80))}` };
  return { ok: true, value: text };
}
