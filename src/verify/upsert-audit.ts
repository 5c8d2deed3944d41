/**
 * An upsert job's table against its log, in bounded memory (docs/design.md §4 invariant 7): per key, the
 * row of its last record (the highest offset not quarantined), or no row when that record deletes
 * the key, written at that record's timestamp; every key's records on one partition; no row for a key
 * no record names.
 *
 * A keyed merge: every record is written as one line `key, partition, offset, what it says` to an
 * external sort (src/verify/external-sort.ts), so a key's records come back together, in offset
 * order, whatever the number of keys; each key is then reduced to its last record and judged
 * (judgeKey, src/verify/compare-rows.ts). A full run sorts the table's rows (one scan, paged) the
 * same way and merges the two sorted streams, which also finds rows for keys no record names; an
 * incremental run looks up the row of each key that has a new record (a point read by its primary
 * key), and judges nothing else. Memory: the sort's budget, one key's records, and the point reads in
 * flight — independent of the number of keys.
 */
import { types, type Client, type Row } from '../cassandra/session.js';
import type { Expectation } from '../engine/job-audit.js';
import { canonical, decimalText } from '../jobs/sink/cql-types.js';
import { ExternalSort } from './external-sort.js';
import { judgeKey, type KeyContext, type KeyGroup, type TableRow } from './compare-rows.js';
import { execute, pagedRows } from './reads.js';
import type { ViolationKind, ViolationLog } from './report.js';

const text = (v: unknown) => JSON.stringify(canonical(v));
const SEP = '\u0000';
/** Point reads in flight at once (incremental runs). */
const READS_IN_FLIGHT = 64;

/** The table, its columns, the write timestamps and the counters are what judgeKey reads (KeyContext). */
export interface UpsertContext extends KeyContext {
  readonly session: Client;
  readonly keyspace: string;
  readonly keyColumns: readonly string[];
  readonly violations: ViolationLog;
  /** Violations on rows no record names (no partition to count them on). */
  readonly unattributed: { missing: number; extra: number; mismatched: number };
  /** Bytes of lines held before the sort spills a run to disk. */
  readonly memoryBytes: number;
  readonly spillDir?: string;
}

export class UpsertAudit {
  private readonly log: ExternalSort;
  private readonly scan: ExternalSort;

  constructor(private readonly ctx: UpsertContext) {
    this.log = new ExternalSort(ctx.memoryBytes, ctx.spillDir);
    this.scan = new ExternalSort(ctx.memoryBytes, ctx.spillDir);
  }

  /** Runs the sorts wrote to disk. */
  get spilledRuns(): number {
    return this.log.spilledRuns + this.scan.spilledRuns;
  }

  /** A record that writes or deletes its key; `inFlight`: at or beyond its partition's checkpoint. */
  async add(partition: number, offset: bigint, e: Expectation & { kind: 'row' | 'delete' }, inFlight: boolean): Promise<void> {
    const flags = (inFlight ? 1 : 0) | (e.kind === 'delete' ? 2 : 0);
    const values = inFlight || e.kind === 'delete' ? null : this.ctx.valueColumns.map((c) => canonical(e.row[c]));
    const expires = e.kind === 'row' && e.expiresAtMs !== undefined ? e.expiresAtMs : null;
    const unset = e.kind === 'row' && e.unset !== undefined && e.unset.length > 0 ? this.ctx.valueColumns.flatMap((c, i) => (e.unset!.includes(c) ? [i] : [])) : null;
    const payload = JSON.stringify([flags, values, inFlight ? null : packKey(e.key), expires, unset]);
    // A versioned key's records sort by version first (a version is below 2^44: 14 digits).
    const version = e.version === undefined ? '' : String(e.version).padStart(14, '0');
    await this.log.add(`${text(e.key)}${SEP}${version}${SEP}${String(partition).padStart(10, '0')}${SEP}${String(offset).padStart(20, '0')}${SEP}${payload}`);
  }

  /** Full run: every key of the log and every row of the table, merged. */
  async judgeAll(): Promise<void> {
    const { ctx } = this;
    for await (const row of pagedRows(ctx.session, this.select(''), [], (r) => this.tableRow(r))) {
      await this.scan.add(`${row.key}${SEP}${JSON.stringify([row.values, row.wt])}`);
    }
    const rows = this.scan.sorted()[Symbol.asyncIterator]();
    let head = await nextRow(rows);
    for await (const g of this.groups()) {
      while (head !== undefined && head.key < g.key) {
        this.unnamed(head);
        head = await nextRow(rows);
      }
      const row = head !== undefined && head.key === g.key ? head : undefined;
      if (row !== undefined) head = await nextRow(rows);
      this.judge(g, row);
    }
    for (; head !== undefined; head = await nextRow(rows)) this.unnamed(head);
  }

  /** Incremental run: the row of each key with a record below its checkpoint among those added. */
  async judgeTouched(): Promise<void> {
    const where = this.ctx.keyColumns.map((k) => `${k} = ?`).join(' AND ');
    const query = this.select(` WHERE ${where}`);
    let batch: KeyGroup[] = [];
    const flush = async () => {
      const rows = await Promise.all(batch.map((g) => execute(this.ctx.session, query, this.ctx.keyColumns.map((k) => (unpack(g.last!.packedKey) as Record<string, unknown>)[k]))));
      batch.forEach((g, i) => {
        const r = rows[i]!.first();
        this.judge(g, r === null ? undefined : this.tableRow(r));
      });
      batch = [];
    };
    for await (const g of this.groups()) {
      if (g.last === undefined) continue; // only in flight: judged once checkpointed
      batch.push(g);
      if (batch.length >= READS_IN_FLIGHT) await flush();
    }
    if (batch.length > 0) await flush();
  }

  /** Removes the sorts' files (idempotent). */
  async close(): Promise<void> {
    await Promise.all([this.log.close(), this.scan.close()]);
  }

  private select(where: string): string {
    const { ctx } = this;
    const times = ctx.valueColumns.map((c, i) => `WRITETIME(${c}) AS wt${i}`);
    return `SELECT ${[...ctx.keyColumns, ...ctx.valueColumns, ...times].join(', ')} FROM ${ctx.keyspace}.${ctx.table}${where}`;
  }

  private tableRow(row: Row): TableRow {
    const { ctx } = this;
    // A collection's WRITETIME is one per element (Cassandra 5); a null cell has none.
    const written = ctx.valueColumns
      .flatMap((_, i) => [row[`wt${i}`]].flat())
      .filter((t) => t !== null && t !== undefined)
      .map((t) => BigInt(String(t)));
    const wt = written.length === 0 ? null : written.reduce((a, b) => (a > b ? a : b));
    return { key: text(Object.fromEntries(ctx.keyColumns.map((k) => [k, row[k]]))), values: ctx.valueColumns.map((c) => canonical(row[c])), wt: wt === null ? null : String(wt) };
  }

  /** The log's records, sorted, one group per key. */
  private async *groups(): AsyncGenerator<KeyGroup> {
    let g: KeyGroup | undefined;
    for await (const line of this.log.sorted()) {
      const a = line.indexOf(SEP);
      const v = line.indexOf(SEP, a + 1);
      const b = line.indexOf(SEP, v + 1);
      const c = line.indexOf(SEP, b + 1);
      const key = line.slice(0, a);
      const version = v === a + 1 ? null : Number(line.slice(a + 1, v));
      const partition = Number(line.slice(v + 1, b));
      const offset = BigInt(line.slice(b + 1, c));
      const [flags, values, packedKey, expiresAtMs, unset] = JSON.parse(line.slice(c + 1)) as [number, unknown[] | null, unknown, number | null, number[] | null];
      if (g === undefined || g.key !== key) {
        if (g !== undefined) yield g;
        g = { key, partitions: [], last: undefined, cells: undefined, inFlight: new Set(), firstPartition: partition, setAt: undefined, known: undefined };
      }
      if (!g.partitions.includes(partition)) {
        // A version orders a key's records on any partition.
        if (g.partitions.length > 0 && version === null) {
          this.note('mismatch', partition, offset, `key ${key} has records on partitions ${[...g.partitions, partition].join(' and ')}: an upsert needs all records of a key on one partition (key the records by it)`);
        }
        g.partitions.push(partition);
      }
      if ((flags & 1) !== 0) {
        const ts = version !== null ? BigInt(version) : this.ctx.writeTimestamp?.(offset);
        if (ts !== undefined) g.inFlight.add(ts);
      } else {
        const del = (flags & 2) !== 0;
        // A tie (records in version order): a delete wins it, as in Cassandra; between values each
        // cell is the greater, so any of the tied records' values is accepted (g.cells).
        const tie = version !== null && g.last !== undefined && g.last.version === version;
        if (tie && g.last!.del) continue;
        let expiry = expiresAtMs;
        if (tie && !del) {
          // (A tied record already past its TTL was written as a delete, which wins: the row may be
          // gone from the earliest expiry among them.)
          const before = g.last!.expiresAtMs;
          expiry = before === null ? expiresAtMs : expiresAtMs === null ? before : Math.min(before, expiresAtMs);
        }
        if (version !== null) writeCells(g, this.ctx.valueColumns.length, version, del ? null : values!, unset);
        let merged = values;
        if (del) {
          // A delete hides every older cell: what follows starts from nothing, known to be null.
          if (g.setAt !== undefined) {
            g.setAt.fill(null);
            g.known!.fill(true);
          }
        } else if (unset !== null || g.setAt !== undefined) {
          // Unset cells keep the key's earlier value: the row is the merge of its records in offset
          // order (a tied record's unset cell keeps what the records before it, tied ones included, wrote).
          const n = this.ctx.valueColumns.length;
          const prev = g.last !== undefined && !g.last.del ? g.last.values! : new Array<unknown>(n).fill(null);
          if (g.setAt === undefined) {
            // The records before wrote every column (none was unset): what the last of them wrote is known.
            const before = g.last;
            g.setAt = before === undefined || before.del ? new Array<bigint | null>(n).fill(null) : before.values!.map((v) => (v === null ? null : before.offset));
            g.known = new Array<boolean>(n).fill(before !== undefined);
          }
          merged = values!.map((v, i) => {
            if (unset?.includes(i)) return prev[i];
            g!.known![i] = true;
            g!.setAt![i] = v === null ? null : offset;
            return v;
          });
        }
        g.last = { partition, offset, del, values: merged, packedKey, expiresAtMs: expiry, version };
      }
    }
    if (g !== undefined) yield g;
  }

  private judge(g: KeyGroup, row: TableRow | undefined): void {
    judgeKey(this.ctx, (kind, partition, offset, message) => this.note(kind, partition, offset, message), g, row);
  }

  private note(kind: ViolationKind, partition: number | undefined, offset: bigint | undefined, message: string): void {
    this.ctx.violations.add({ kind, message, ...(partition === undefined ? {} : { partition }), ...(offset === undefined ? {} : { offset: String(offset) }) });
    const c = partition === undefined ? this.ctx.unattributed : this.ctx.counts(partition);
    if (kind === 'missing') c.missing++;
    else if (kind === 'extra') c.extra++;
    else c.mismatched++;
  }

  /** A row for a key no record below the checkpoints names. */
  private unnamed(row: TableRow): void {
    this.note('extra', undefined, undefined, `${this.ctx.table} key ${row.key}: a row, though no record below the checkpoints names this key`);
  }
}

/**
 * A versioned key's cells as Cassandra keeps them, its records added in version order: each cell's
 * values written at the highest version that wrote it (several on a tie: Cassandra keeps the greater,
 * or a null, and within a batch the sink writes only the later offset's, so any of them is accepted),
 * a delete's as null (it wins a tie: what its version writes after it is shadowed). `values` null: a
 * delete; `unset`: the cells the record does not write.
 */
function writeCells(g: KeyGroup, n: number, version: number, values: readonly unknown[] | null, unset: readonly number[] | null): void {
  const c = (g.cells ??= { at: new Array<number | null>(n).fill(null), values: Array.from({ length: n }, () => []) });
  if (values === null) {
    c.at.fill(version);
    for (let i = 0; i < n; i++) c.values[i] = [null];
    return;
  }
  // (A record tied with a delete never comes here: the caller skips it.)
  for (let i = 0; i < n; i++) {
    if (unset?.includes(i)) continue;
    if (c.at[i] === version) c.values[i]!.push(values[i]);
    else {
      c.at[i] = version;
      c.values[i] = [values[i]];
    }
  }
}

async function nextRow(it: AsyncIterator<string>): Promise<TableRow | undefined> {
  const n = await it.next();
  if (n.done === true) return undefined;
  const line = n.value;
  const a = line.indexOf(SEP);
  const [values, wt] = JSON.parse(line.slice(a + 1)) as [unknown[], string | null];
  return { key: line.slice(0, a), values, wt };
}

/**
 * The driver's types a key's values are packed as by their text, each under its tag, in the order
 * they are tested (a TimeUuid is a Uuid too, so it comes first).
 */
const TEXT_TYPES = [
  ['$L', types.Long],
  ['$D', types.BigDecimal],
  ['$T', types.TimeUuid],
  ['$U', types.Uuid],
  ['$ld', types.LocalDate],
  ['$lt', types.LocalTime],
  ['$I', types.InetAddress],
] as const;
const FROM_TEXT = new Map<string, (text: string) => unknown>(TEXT_TYPES.map(([tag, type]) => [tag, (x: string) => type.fromString(x)]));

/**
 * A key's values as JSON that keeps the driver's types (Long, BigDecimal, Uuid, Date, Buffer, …), so
 * that an incremental run can bind them to look the row up. Tagged objects: `{"$L": "12"}`.
 */
export function packKey(v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (typeof v === 'bigint') return { $b: v.toString() };
  if (v instanceof Date) return { $d: v.getTime() };
  for (const [tag, type] of TEXT_TYPES) {
    // The driver's BigDecimal toString is quadratic in digits.
    if (v instanceof type) return { [tag]: v instanceof types.BigDecimal ? decimalText(v) : v.toString() };
  }
  if (Buffer.isBuffer(v)) return { $x: v.toString('hex') };
  if (Array.isArray(v)) return v.map(packKey);
  if (v instanceof Map) return { $M: [...v].map(([k, x]) => [packKey(k), packKey(x)]) };
  if (typeof v === 'object') return { $o: Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, packKey(x)])) };
  return v;
}

export function unpack(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(unpack);
  const [tag, x] = Object.entries(v as Record<string, unknown>)[0] ?? [];
  const fromText = FROM_TEXT.get(tag ?? '');
  if (fromText !== undefined) return fromText(x as string);
  switch (tag) {
    case '$b':
      return BigInt(x as string);
    case '$d':
      return new Date(x as number);
    case '$x':
      return Buffer.from(x as string, 'hex');
    case '$M':
      return new Map((x as Array<[unknown, unknown]>).map(([k, y]) => [unpack(k), unpack(y)]));
    case '$o':
      return Object.fromEntries(Object.entries(x as Record<string, unknown>).map(([k, y]) => [k, unpack(y)]));
    default:
      return v;
  }
}
