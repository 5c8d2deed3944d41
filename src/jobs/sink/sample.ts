/**
 * Seeded sample records for a sink's config, for `chaos --job` and `bench --sink`: values of every
 * column's type (bigints over the whole int64 range, written as exact JSON digits), timestamps both as
 * epoch ms and ISO-8601, nested fields. In upsert mode a small pool of keys gets updates and deletes
 * (tombstones), each record keyed by its key so one key stays on one partition (with a `version:` field,
 * a random version each, and no tombstones); with `envelope: debezium`, change events around the rows
 * (deletes as op d and their tombstone); `badRatio` of them
 * break a rule of the config (a wrong type, a missing required field, a key that differs from the
 * record key). Columns read from headers get headers (text, as producers write them), and a TTL or
 * version read from a header or the value its own; columns of the key (`key.x`) are in the record key,
 * and the record's metadata ($offset, $timestamp, …) are Kafka's.
 */
import { prng } from '../../prng.js';
import type { CqlType, ScalarType } from './cql-types.js';
import { scalarKey } from './column-source.js';
import { predicateFields, type Literal } from './filter.js';
import type { SinkColumn, SinkConfig } from './sink-config.js';

export interface SampleRecord {
  key: string | null;
  value: string | null;
  headers?: Record<string, string | Buffer>;
}

/** A JSON text (numbers exact, as digits). */
type Json = { raw: string };

function hex(rand: () => number, n: number): string {
  return Array.from({ length: n }, () => Math.floor(rand() * 16).toString(16)).join('');
}

function scalarValue(type: ScalarType, rand: () => number): Json {
  switch (type) {
    case 'text':
      return { raw: JSON.stringify(`t-${hex(rand, 6)}${rand() < 0.1 ? ' ✓ é' : ''}`) };
    case 'int':
      return { raw: String(Math.floor(rand() * 2 ** 32) - 2 ** 31) };
    case 'bigint': {
      const big = (BigInt(Math.floor(rand() * 2 ** 31)) << 32n) | BigInt(Math.floor(rand() * 2 ** 32));
      return { raw: String(rand() < 0.5 ? -big : big) };
    }
    case 'double':
      return { raw: String(Math.round((rand() - 0.5) * 1e7) / 1000) };
    case 'boolean':
      return { raw: rand() < 0.5 ? 'true' : 'false' };
    case 'timestamp': {
      const ms = 1_600_000_000_000 + Math.floor(rand() * 1e11);
      return { raw: rand() < 0.5 ? String(ms) : JSON.stringify(new Date(ms).toISOString()) };
    }
    case 'uuid':
      return { raw: JSON.stringify(`${hex(rand, 8)}-${hex(rand, 4)}-4${hex(rand, 3)}-a${hex(rand, 3)}-${hex(rand, 12)}`) };
    case 'decimal':
      return { raw: `${Math.floor(rand() * 1e6)}.${String(Math.floor(rand() * 100)).padStart(2, '0')}` };
    case 'smallint':
      return { raw: String(Math.floor(rand() * 2 ** 16) - 2 ** 15) };
    case 'tinyint':
      return { raw: String(Math.floor(rand() * 2 ** 8) - 2 ** 7) };
    case 'float':
      return { raw: String(Math.round((rand() - 0.5) * 1e5) / 100) };
    case 'date':
      return { raw: JSON.stringify(new Date(1_600_000_000_000 + Math.floor(rand() * 1e11)).toISOString().slice(0, 10)) };
    case 'time':
      return { raw: JSON.stringify(`${String(Math.floor(rand() * 24)).padStart(2, '0')}:${String(Math.floor(rand() * 60)).padStart(2, '0')}:07.${hex(rand, 3).replace(/[a-f]/g, '5')}`) };
    case 'blob':
      return { raw: JSON.stringify(Buffer.from(hex(rand, 8), 'hex').toString('base64')) };
    case 'inet':
      return { raw: JSON.stringify(`10.${Math.floor(rand() * 256)}.${Math.floor(rand() * 256)}.1`) };
    case 'timeuuid':
      return { raw: JSON.stringify(`${hex(rand, 8)}-${hex(rand, 4)}-1${hex(rand, 3)}-a${hex(rand, 3)}-${hex(rand, 12)}`) };
  }
}

function value(type: CqlType, rand: () => number): Json {
  if (type.kind === 'scalar') return scalarValue(type.name, rand);
  const n = Math.floor(rand() * 4);
  if (type.kind === 'list' || type.kind === 'set') return { raw: `[${Array.from({ length: n }, () => value(type.of, rand).raw).join(',')}]` };
  return { raw: `{${Array.from({ length: n }, (_, i) => `"k${i}":${value(type.of, rand).raw}`).join(',')}}` };
}

/** A sampled value as a header's bytes carry it (column-source.ts headerValue): text, numbers' digits, a timestamp in ISO-8601, a blob raw. */
function headerText(type: ScalarType, v: Json): string | Buffer {
  const j = JSON.parse(v.raw) as unknown;
  if (type === 'blob') return Buffer.from(j as string, 'base64');
  if (type === 'timestamp') return new Date(typeof j === 'number' ? j : Date.parse(j as string)).toISOString();
  return typeof j === 'string' ? j : v.raw;
}

/** Whether every column, TTL and version of the config can be sampled in JSON (not: a TTL or version from the key, an aggregate's group or time from the key or a header). */
export function sampled(config: SinkConfig): boolean {
  const ttl = config.ttl !== undefined && 'field' in config.ttl ? config.ttl.field : undefined;
  // (An aggregate's groups and windows are drawn for value fields only.)
  const agg = config.aggregate;
  const grouping = agg === undefined ? [] : [...agg.groupBy, ...(agg.window === undefined ? [] : [agg.window.time])];
  return ttl?.source !== 'key' && config.version?.source !== 'key' && grouping.every((i) => config.columns[i]!.source === 'value');
}

/**
 * The headers and value fields a `where:` reads that no column does, each with the literals it is
 * compared with: the samples set them (mostly to one of those), so that the filter keeps some records.
 */
function filterFields(config: SinkConfig): Array<{ source: 'value' | 'header'; path: readonly string[]; literals: Literal[] }> {
  // Not a field the samples set otherwise, nor one within or around it: a column's, the TTL's, the version's.
  const ttl = config.ttl !== undefined && 'field' in config.ttl ? [config.ttl.field] : [];
  const taken = [...config.columns.map((c) => ({ source: c.source, path: c.field })), ...ttl, ...(config.version === undefined ? [] : [config.version])];
  const within = (a: readonly string[], b: readonly string[]) => a.length <= b.length && a.every((p, i) => p === b[i]);
  return (config.where === undefined ? [] : predicateFields(config.where))
    .filter(({ field: { source, path } }) => (source === 'value' || source === 'header') && !taken.some((t) => t.source === source && (within(t.path, path) || within(path, t.path))))
    .map(({ field, literals }) => ({ source: field.source as 'value' | 'header', path: field.path, literals }));
}

/** A JSON object text with each column's value at its field path. */
function render(fields: Array<[readonly string[], Json]>): string {
  type Node = { [k: string]: Node | Json };
  const root: Node = {};
  for (const [path, v] of fields) {
    let node = root;
    for (const p of path.slice(0, -1)) node = (node[p] ??= {}) as Node;
    node[path[path.length - 1]!] = v;
  }
  const out = (n: Node | Json): string => ('raw' in n && typeof n.raw === 'string' ? n.raw : `{${Object.entries(n).map(([k, x]) => `${JSON.stringify(k)}:${out(x as Node)}`).join(',')}}`);
  return out(root);
}

export function* sampleRecords(config: SinkConfig, o: { seed: number; count: number; badRatio: number }): Generator<SampleRecord> {
  const rand = prng(o.seed);
  const keyCols = config.key.map((k) => config.columns.find((c) => c.name === k)!);
  // A key in its canonical spelling (src/jobs/sink/key-encoding.ts): a timestamp key as epoch ms.
  const keyValue = (c: SinkColumn): Json => {
    const v = value(c.type, rand);
    return c.type.kind === 'scalar' && c.type.name === 'timestamp' && v.raw.startsWith('"') ? { raw: String(Date.parse(JSON.parse(v.raw) as string)) } : v;
  };
  const keys: Json[][] = Array.from({ length: Math.max(5, Math.ceil(o.count / 8)) }, () => keyCols.map(keyValue));
  // (A Debezium record key is a JSON object of the key's fields, whatever their number.)
  const keyText = (k: Json[]) =>
    scalarKey(keyCols) && config.envelope !== 'debezium'
      ? keyCols[0]!.type.kind === 'scalar' && ['text', 'uuid', 'timestamp'].includes(keyCols[0]!.type.name) ? (JSON.parse(k[0]!.raw) as unknown as string).toString() : k[0]!.raw
      : render(keyCols.map((c, i) => [c.field, k[i]!]));
  // An aggregate's records fall in few groups and windows (20 groups, half an hour), so that windows
  // gather records of every partition and merges meet.
  const agg = config.aggregate;
  const groups = agg === undefined ? [] : Array.from({ length: 20 }, () => agg.groupBy.map((i) => value(config.columns[i]!.type, rand)));
  const aggValue = (c: SinkColumn, group: Json[]): Json | undefined => {
    const at = config.columns.indexOf(c);
    if (agg?.window?.time === at) return { raw: String(1_700_000_000_000 + Math.floor(rand() * 1_800_000)) };
    const g = agg?.groupBy.indexOf(at) ?? -1;
    return g >= 0 ? group[g] : undefined;
  };
  // A version read from the value (`version:`): a random whole number per record, so a key's records
  // come in no version order and sometimes tie. No tombstones then: they have no value to read it from.
  const versionPath = config.version?.source === 'value' ? config.version.path : undefined;
  // A version or TTL (seconds: some short, so that rows expire while the run goes on) from a header.
  const versionHeader = config.version?.source === 'header' ? config.version.path[0]! : undefined;
  const ttlField = config.ttl !== undefined && 'field' in config.ttl ? config.ttl.field : undefined;
  const valueCols = config.columns.filter((c) => c.source === 'value');
  const headerCols = config.columns.filter((c) => c.source === 'header');
  const filtered = filterFields(config);
  // A log-mode sink's columns that read the record key: a key object of their fields (or, for the
  // whole key alone, a value's text).
  const keyReaders = config.mode === 'log' ? config.columns.filter((c) => c.source === 'key') : [];
  const logKey = (): string | null => {
    const fields = keyReaders.filter((c) => c.field.length > 0 && (c.required || rand() < 0.8)).map((c): [readonly string[], Json] => [c.field, value(c.type, rand)]);
    if (keyReaders.some((c) => c.field.length > 0)) return render(fields);
    const v = JSON.parse(value(keyReaders[0]!.type, rand).raw) as unknown;
    return typeof v === 'string' ? v : JSON.stringify(v);
  };
  // With envelope: debezium each record is a change event around the row (Postgres-shaped): c, r or u
  // with the row as `after`, or d with it as `before` and then the tombstone Debezium writes after a
  // delete. A version path names a field of the event (source.lsn, ts_ms) or of the row (after.x).
  const debezium = config.envelope === 'debezium';
  const inRow = versionPath !== undefined && debezium && versionPath[0] === 'after';
  const rowVersionPath = versionPath === undefined ? undefined : debezium ? (inRow ? versionPath.slice(1) : undefined) : versionPath;
  for (let i = 0; i < o.count; i++) {
    const key = config.mode === 'upsert' ? keys[Math.floor(rand() * keys.length)]! : undefined;
    const group = agg === undefined ? [] : groups[Math.floor(rand() * groups.length)]!;
    const fields: Array<[readonly string[], Json]> = valueCols
      .filter((c: SinkColumn) => c.required || config.key.includes(c.name) || rand() < 0.8)
      .map((c) => [c.field, key !== undefined && config.key.includes(c.name) ? key[config.key.indexOf(c.name)]! : ((agg === undefined ? undefined : aggValue(c, group)) ?? value(c.type, rand))]);
    // (Drawn only for a versioned sink: the other sinks' seeds keep their records.)
    const version: Json = versionPath === undefined && versionHeader === undefined ? { raw: '0' } : { raw: String(Math.floor(rand() * o.count * 2)) };
    const headers: Record<string, string | Buffer> = {};
    for (const c of headerCols) {
      if (!c.required && !config.key.includes(c.name) && rand() >= 0.8) continue;
      const v = key !== undefined && config.key.includes(c.name) ? key[config.key.indexOf(c.name)]! : value(c.type, rand);
      if (c.type.kind === 'scalar') headers[c.field[0]!] = headerText(c.type.name, v); // (the config refuses others)
    }
    for (const f of filtered) {
      if (rand() >= 0.8) continue;
      const v: Literal = f.literals.length > 0 && rand() < 0.7 ? f.literals[Math.floor(rand() * f.literals.length)]! : `x-${hex(rand, 4)}`;
      if (f.source === 'header') headers[f.path[0]!] = String(v);
      else fields.push([f.path, { raw: JSON.stringify(v) }]);
    }
    if (versionHeader !== undefined) headers[versionHeader] = version.raw;
    if (ttlField !== undefined) {
      const ttl = String(rand() < 0.3 ? 5 + Math.floor(rand() * 40) : 3600 + Math.floor(rand() * 3600));
      if (ttlField.source === 'header') headers[ttlField.path[0]!] = ttl;
      else fields.push([ttlField.path, { raw: ttl }]);
    }
    const withHeaders = <R extends SampleRecord>(r: R): R => (Object.keys(headers).length === 0 ? r : { ...r, headers });
    if (rowVersionPath !== undefined) {
      const at = fields.findIndex(([f]) => f.join('.') === rowVersionPath.join('.'));
      const v: [readonly string[], Json] = [rowVersionPath, version];
      if (at >= 0) fields[at] = v;
      else fields.push(v);
    }
    const bad = rand() < o.badRatio;
    if (bad) {
      const kind = Math.floor(rand() * 3);
      if (kind === 0 && fields.length > 0) fields[0] = [fields[0]![0], { raw: '{"not": "this type"}' }];
      else if (kind === 1) fields.splice(0, fields.length);
      else if (key !== undefined && keyCols[0]!.source === 'value') fields.push([keyCols[0]!.field, value(keyCols[0]!.type, rand)]);
      else {
        // (A header that does not decode as its column's type, when some column reads one.)
        const h = headerCols.find((c) => !config.key.includes(c.name) && c.type.kind === 'scalar' && !['text', 'blob'].includes(c.type.name));
        if (h !== undefined) headers[h.field[0]!] = 'not-a-value';
      }
    }
    if (debezium) {
      const del = !bad && rand() < 0.1;
      const row = { raw: render(fields) };
      const event: Array<[readonly string[], Json]> = [
        [['before'], del ? row : { raw: 'null' }],
        [['after'], del ? { raw: 'null' } : row],
        [['source', 'connector'], { raw: '"postgresql"' }],
        [['op'], { raw: JSON.stringify(del ? 'd' : (['c', 'u', 'r'] as const)[Math.floor(rand() * 3)]) }],
        [['ts_ms'], { raw: String(1_700_000_000_000 + i) }],
      ];
      if (versionPath !== undefined && !inRow) event.push([versionPath, version]);
      const k = key === undefined ? null : keyText(key);
      yield withHeaders({ key: k, value: render(event) });
      // (One of the `count` records.)
      if (del && key !== undefined && i + 1 < o.count) {
        i++;
        yield withHeaders({ key: k, value: null });
      }
      continue;
    }
    if (key !== undefined && !bad && versionPath === undefined && rand() < 0.1) {
      yield withHeaders({ key: keyText(key), value: null }); // a tombstone: deletes the key
      continue;
    }
    yield withHeaders({ key: key !== undefined ? keyText(key) : keyReaders.length > 0 ? logKey() : null, value: render(fields) });
  }
}
