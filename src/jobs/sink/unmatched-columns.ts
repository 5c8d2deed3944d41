/**
 * A column whose field path matches nothing in any record of a batch (`field: headers.source` when no
 * value has `headers`) stores null for every record, silently, though a path that is absent only in
 * some records is an optional field and fine. So each batch's rows say which paths they lacked, and a
 * path that no row of the batch matched is reported: a warning, at most once per column per
 * WARN_EVERY_MS, and a count per column for the caller's metric.
 */
import type { SinkRow } from './sink-codec.js';

/** How often one column's warning is logged at most, in ms. */
export const WARN_EVERY_MS = 60_000;

/** The columns (by index) that no row of the batch matched; none for a batch without rows. */
export function unmatchedColumns(columnCount: number, rows: Iterable<SinkRow>): number[] {
  // A column no row matched is absent from every row: count each column's absences (each row lists a column once).
  let seen = 0;
  const absences = new Array<number>(columnCount).fill(0);
  for (const r of rows) {
    if (r.kind !== 'row') continue;
    seen++;
    for (const i of r.absent) absences[i]!++;
  }
  if (seen === 0) return [];
  return absences.flatMap((n, i) => (n === seen ? [i] : []));
}

/** Reports unmatched columns: `count` for every batch (a metric), `warn` rate-limited per column. */
export class UnmatchedReporter {
  private readonly warnedAt = new Map<string, number>();

  constructor(
    private readonly columns: readonly { name: string; field: readonly string[] }[],
    private readonly warn: (column: string, line: string) => void,
    private readonly count: (column: string) => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  batch(partition: number, rows: Iterable<SinkRow>, records: number): void {
    for (const i of unmatchedColumns(this.columns.length, rows)) {
      const c = this.columns[i]!;
      this.count(c.name);
      const last = this.warnedAt.get(c.name);
      if (last !== undefined && this.now() - last < WARN_EVERY_MS) continue;
      this.warnedAt.set(c.name, this.now());
      this.warn(c.name, `column ${c.name}: field ${c.field.join('.')} matched nothing in any of the ${records} records of a batch of partition ${partition}; it stores null for each (check the column's field path)`);
    }
  }
}
