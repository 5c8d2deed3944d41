/** Rows as an aligned text table, cqlsh-style: what the CLI, the bench report and the tests print. */
export function formatTable(columns: string[], rows: unknown[][]): string {
  const cells = rows.map((r) => r.map(formatCell));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i]!.length)));
  const line = (r: string[]) => ' ' + r.map((v, i) => v.padEnd(widths[i]!)).join(' | ');
  const header = line(columns);
  return [header, header.replace(/[^|]/g, '-').replaceAll('|', '+'), ...cells.map(line)].join('\n');
}

function formatCell(v: unknown): string {
  if (v === null || v === undefined) return 'null';
  if (Buffer.isBuffer(v)) return '0x' + v.toString('hex');
  if (v instanceof Date) return v.toISOString();
  // A set column (the session reads sets as Set), as cqlsh writes one.
  if (v instanceof Set) return `{${[...v].map(formatCell).join(', ')}}`;
  if (typeof v === 'object' && 'toString' in v && v.constructor.name !== 'Object') return String(v);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
