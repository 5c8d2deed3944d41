/**
 * A sink's `mode: aggregate` settings (src/jobs/sink/sink-config.ts): the group columns, the event-time
 * windows and the aggregates, checked against the columns, each problem naming its key.
 */
import { cqlTypeName, type CqlType } from './cql-types.js';

/** How an aggregate's input adds up: exact integers, exact decimals, doubles, or times (min and max only). */
export type Arithmetic = 'int' | 'decimal' | 'double' | 'timestamp';

export interface AggregateColumn {
  /** The result column. */
  readonly name: string;
  readonly fn: 'count' | 'sum' | 'min' | 'max' | 'avg';
  /** The input column's index among the sink's columns (none for count). */
  readonly column?: number;
  readonly arithmetic?: Arithmetic;
  /** The result column's CQL type. */
  readonly type: string;
}

export interface AggregateSpec {
  /** The group columns' indexes among the sink's columns. */
  readonly groupBy: readonly number[];
  /** Event-time windows: the timestamp column's index, size and slide in ms; none: one running total per group. */
  readonly window?: { readonly time: number; readonly sizeMs: number; readonly slideMs: number };
  readonly aggregates: readonly AggregateColumn[];
  /** closeAfter: a window closes on a partition once its watermark is `afterMs` past the window's end; its row then goes to `topic`. */
  readonly close?: { readonly afterMs: number; readonly topic: string };
}

/** The types a group column may have: those with one canonical text (as upsert keys). */
const GROUP_TYPES = ['text', 'int', 'bigint', 'smallint', 'tinyint', 'boolean', 'timestamp', 'uuid', 'timeuuid', 'decimal'];
const ARITHMETIC: Readonly<Record<string, Arithmetic>> = { int: 'int', bigint: 'int', smallint: 'int', tinyint: 'int', decimal: 'decimal', double: 'double', float: 'double', timestamp: 'timestamp' };
const SUM_TYPE: Readonly<Record<Arithmetic, string>> = { int: 'bigint', decimal: 'decimal', double: 'double', timestamp: '' };
const UNIT_MS: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
/** Columns of the tables that are not the config's. */
export const WINDOW_COLUMNS = ['window_start', 'window_end'];

export function durationMs(text: string): number {
  const m = /^(\d+)(ms|s|m|h|d)$/.exec(text)!;
  return Number(m[1]) * UNIT_MS[m[2]!]!;
}

interface RawAggregate {
  name?: string;
  table: string;
  closeAfter?: string;
  closedTopic?: string;
  groupBy?: string[];
  window?: { time: string; size: string; slide?: string };
  aggregates?: Record<string, string>;
}

/** The aggregate settings of a config in `mode`, or undefined; problems are pushed, naming their key. */
export function aggregateSpec(c: RawAggregate & { mode: string }, columns: ReadonlyArray<{ name: string; type: CqlType }>, problems: string[]): AggregateSpec | undefined {
  if (c.mode !== 'aggregate') {
    for (const k of ['groupBy', 'window', 'aggregates', 'closeAfter', 'closedTopic'] as const) if (c[k] !== undefined) problems.push(`${k}: only for mode aggregate`);
    return undefined;
  }
  const index = (name: string) => columns.findIndex((x) => x.name === name);
  const scalar = (i: number) => (columns[i]!.type.kind === 'scalar' ? cqlTypeName(columns[i]!.type) : '');
  if (c.groupBy === undefined) problems.push('groupBy: mode aggregate needs the group columns, e.g. groupBy: [customer]');
  if (c.aggregates === undefined) problems.push('aggregates: mode aggregate needs at least one, e.g. aggregates: { orders: count, revenue: sum(total) }');
  const groupBy: number[] = [];
  for (const [i, name] of (c.groupBy ?? []).entries()) {
    const at = index(name);
    if (at < 0) problems.push(`groupBy.${i}: ${name} is not one of the columns`);
    else if (!GROUP_TYPES.includes(scalar(at))) problems.push(`groupBy.${i}: ${name} is a ${cqlTypeName(columns[at]!.type)}; a group column is ${GROUP_TYPES.join(', ')}`);
    else groupBy.push(at);
  }
  let window: AggregateSpec['window'];
  if (c.window !== undefined) {
    const time = index(c.window.time);
    const sizeMs = durationMs(c.window.size);
    const slideMs = c.window.slide === undefined ? sizeMs : durationMs(c.window.slide);
    if (time < 0) problems.push(`window.time: ${c.window.time} is not one of the columns`);
    else if (scalar(time) !== 'timestamp') problems.push(`window.time: ${c.window.time} is a ${cqlTypeName(columns[time]!.type)}; the window's time is a timestamp column`);
    if (slideMs > sizeMs || sizeMs % slideMs !== 0) problems.push(`window.slide: ${c.window.slide} must divide the size ${c.window.size} (a record then falls in size/slide windows)`);
    else if (sizeMs / slideMs > 100) problems.push(`window.slide: ${c.window.size} / ${c.window.slide} is ${sizeMs / slideMs} windows per record; at most 100`);
    if (time >= 0) window = { time, sizeMs, slideMs };
  }
  const aggregates: AggregateColumn[] = [];
  for (const [name, text] of Object.entries(c.aggregates ?? {})) {
    if (columns.some((x, i) => x.name === name && groupBy.includes(i)) || WINDOW_COLUMNS.includes(name)) {
      problems.push(`aggregates.${name}: the name is taken by a group column or the window's (${WINDOW_COLUMNS.join(', ')})`);
      continue;
    }
    if (text.trim() === 'count') {
      aggregates.push({ name, fn: 'count', type: 'bigint' });
      continue;
    }
    const m = /^\s*(sum|min|max|avg)\(\s*([a-z][a-z0-9_]*)\s*\)\s*$/.exec(text);
    if (m === null) {
      problems.push(`aggregates.${name}: expected count, sum(<column>), min(<column>), max(<column>) or avg(<column>), got ${JSON.stringify(text)}`);
      continue;
    }
    const fn = m[1] as 'sum' | 'min' | 'max' | 'avg';
    const column = index(m[2]!);
    if (column < 0) {
      problems.push(`aggregates.${name}: ${m[2]} is not one of the columns`);
      continue;
    }
    const arithmetic = ARITHMETIC[scalar(column)];
    const numeric = arithmetic !== undefined && arithmetic !== 'timestamp';
    if (arithmetic === undefined || ((fn === 'sum' || fn === 'avg') && !numeric)) {
      problems.push(`aggregates.${name}: ${fn} of ${m[2]}, a ${cqlTypeName(columns[column]!.type)}; ${fn === 'sum' || fn === 'avg' ? 'sum and avg take int, bigint, smallint, tinyint, decimal, double or float' : 'min and max take numbers and timestamps'}`);
      continue;
    }
    const type = fn === 'avg' ? 'double' : fn === 'sum' ? SUM_TYPE[arithmetic] : scalar(column);
    aggregates.push({ name, fn, column, arithmetic, type });
  }
  let close: AggregateSpec['close'];
  if (c.closeAfter !== undefined) {
    if (c.window === undefined) problems.push('closeAfter: only with a window (a running total never closes)');
    else close = { afterMs: durationMs(c.closeAfter), topic: c.closedTopic ?? `${c.name ?? c.table}.closed` };
  } else if (c.closedTopic !== undefined) problems.push('closedTopic: only with closeAfter');
  return { groupBy, ...(window === undefined ? {} : { window }), aggregates, ...(close === undefined ? {} : { close }) };
}

/** The window starts a time falls in (ascending): those s = k·slide with s ≤ t < s + size. */
export function windowStarts(t: number, w: { sizeMs: number; slideMs: number }): number[] {
  const last = Math.floor(t / w.slideMs) * w.slideMs;
  const out: number[] = [];
  for (let s = last - w.sizeMs + w.slideMs; s <= last; s += w.slideMs) out.push(s);
  return out;
}
