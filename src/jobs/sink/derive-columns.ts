/**
 * A sink's columns derived from a registered schema, for a config that leaves `columns` out
 * (`sink --print-cql` prints them, the worker stores them as the job's settings): one column per
 * scalar field, nested records flattened (`customer.id` → column `customer_id`), arrays and maps of
 * scalars as frozen lists and maps. A field no supported CQL type holds (bytes, a union of several
 * types, an array of records) is left out, and said so.
 *
 * Avro: string, enum → text; uuid → uuid; int → int; long → bigint; float, double → double; boolean;
 * decimal → decimal; date, timestamp-millis/-micros → timestamp; a union with null → its other type.
 * A field's default becomes the column's default, so records written before the field was added get
 * it, as Avro's schema resolution would give them.
 * Protobuf (the file's first message): 32-bit ints → int (uint32 → bigint), 64-bit → bigint (uint64,
 * fixed64 → decimal: beyond int64), float, double → double, bool, string, enum → text,
 * google.protobuf.Timestamp → timestamp.
 * JSON Schema: string → text (format uuid → uuid, date-time → timestamp), integer → bigint, number →
 * double, boolean; objects with properties flattened, with additionalProperties → map.
 *
 * Derived columns are not required (a record of an older version may lack a newer field); key columns
 * are, as always.
 */
import type avro from 'avsc';
import protobuf from 'protobufjs';
import type { CachedSchema } from '../../formats/compile.js';
import type { ScalarType } from './cql-types.js';

/** One derived column, as a config would spell it. */
export interface DerivedColumn {
  name: string;
  type: string;
  field: string;
  default?: unknown;
}

export interface Derived {
  columns: DerivedColumn[];
  /** Fields left out, each with why. */
  skipped: string[];
}

type Kind = { kind: 'scalar'; name: ScalarType } | { kind: 'list' | 'map'; of: ScalarType } | { kind: 'record'; fields: Array<{ name: string; t: unknown; default?: unknown }> } | { kind: 'none'; why: string };

const spell = (k: Kind) => (k.kind === 'scalar' ? k.name : k.kind === 'list' ? `list<${k.of}>` : k.kind === 'map' ? `map<text, ${k.of}>` : '');

/** A CQL name from a field path: lower case, [a-z0-9_], starting with a letter, at most 48. */
function columnName(path: readonly string[]): string {
  let n = path.join('_').replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase().replace(/[^a-z0-9_]/g, '_');
  if (!/^[a-z]/.test(n)) n = `f_${n}`;
  return n.slice(0, 48);
}

function walk(kindOf: (t: unknown) => Kind, root: unknown): Derived {
  const out: Derived = { columns: [], skipped: [] };
  const visit = (t: unknown, path: string[], dflt: unknown, depth: number) => {
    const k = kindOf(t);
    if (k.kind === 'record') {
      if (depth > 8) return void out.skipped.push(`${path.join('.')}: nested more than 8 deep`);
      for (const f of k.fields) visit(f.t, [...path, f.name], f.default, depth + 1);
      return;
    }
    if (k.kind === 'none') return void out.skipped.push(`${path.join('.')}: ${k.why}`);
    const col: DerivedColumn = { name: columnName(path), type: spell(k), field: path.join('.') };
    if (dflt !== undefined && dflt !== null && k.kind === 'scalar' && (typeof dflt !== 'object' || dflt === null)) col.default = dflt;
    if (out.columns.some((c) => c.name === col.name)) return void out.skipped.push(`${col.field}: its column name ${col.name} is taken by another field`);
    out.columns.push(col);
  };
  visit(root, [], undefined, 0);
  return out;
}

// ---- Avro ----

function avroKind(t: unknown): Kind {
  const type = t as avro.Type & { typeName: string };
  const name = type.typeName;
  const scalar = avroScalar(name);
  if (scalar !== undefined) return { kind: 'scalar', name: scalar };
  if (name === 'record' || name === 'error') {
    const r = type as unknown as { fields: Array<{ name: string; type: avro.Type; defaultValue(): unknown }> };
    return { kind: 'record', fields: r.fields.map((f) => ({ name: f.name, t: f.type, default: safeDefault(f) })) };
  }
  if (name.startsWith('union')) {
    const branches = (type as unknown as { types: Array<avro.Type & { typeName: string }> }).types.filter((b) => b.typeName !== 'null');
    return branches.length === 1 ? avroKind(branches[0]) : { kind: 'none', why: `a union of ${branches.length} types` };
  }
  if (name === 'array' || name === 'map') {
    const inner = (type as unknown as { itemsType?: avro.Type; valuesType?: avro.Type });
    const k = avroKind(name === 'array' ? inner.itemsType : inner.valuesType);
    return k.kind === 'scalar' ? { kind: name === 'array' ? 'list' : 'map', of: k.name } : { kind: 'none', why: `${name === 'array' ? 'an array' : 'a map'} of ${k.kind === 'none' ? 'unsupported values' : 'non-scalar values'}` };
  }
  return { kind: 'none', why: `Avro ${name.replace(/^logical:/, '')} has no column type here` };
}

function avroScalar(name: string): ScalarType | undefined {
  switch (name) {
    case 'string':
    case 'enum':
      return 'text';
    case 'logical:uuid':
      return 'uuid';
    case 'int':
      return 'int';
    case 'long':
    case 'abstract:long':
      return 'bigint';
    case 'float':
    case 'double':
      return 'double';
    case 'boolean':
      return 'boolean';
    case 'logical:decimal':
      return 'decimal';
    case 'logical:date':
    case 'logical:timestamp-millis':
    case 'logical:timestamp-micros':
    case 'logical:local-timestamp-millis':
    case 'logical:local-timestamp-micros':
      return 'timestamp';
    default:
      return undefined;
  }
}

function safeDefault(f: { defaultValue(): unknown }): unknown {
  try {
    const d = f.defaultValue();
    return typeof d === 'bigint' ? d.toString() : d instanceof Date ? d.toISOString() : typeof d === 'object' && d !== null && 'isLosslessNumber' in d ? String(d) : d;
  } catch {
    return undefined;
  }
}

// ---- Protobuf ----

function protoKind(t: unknown): Kind {
  if (t instanceof protobuf.Type) {
    if (t.fullName === '.google.protobuf.Timestamp') return { kind: 'scalar', name: 'timestamp' };
    return { kind: 'record', fields: t.fieldsArray.map((f) => ({ name: f.name, t: f })) };
  }
  const f = t as protobuf.Field;
  const one = (): Kind => {
    if (f.resolvedType instanceof protobuf.Type) return protoKind(f.resolvedType);
    if (f.resolvedType instanceof protobuf.Enum) return { kind: 'scalar', name: 'text' };
    const s = protoScalar(f.type);
    return s === undefined ? { kind: 'none', why: `protobuf ${f.type} has no column type here` } : { kind: 'scalar', name: s };
  };
  if (f.map || f.repeated) {
    const k = one();
    return k.kind === 'scalar' ? { kind: f.map ? 'map' : 'list', of: k.name } : { kind: 'none', why: `${f.map ? 'a map' : 'a repeated field'} of non-scalar values` };
  }
  return one();
}

function protoScalar(type: string): ScalarType | undefined {
  if (['int32', 'sint32', 'sfixed32'].includes(type)) return 'int';
  if (['uint32', 'fixed32', 'int64', 'sint64', 'sfixed64'].includes(type)) return 'bigint';
  if (['uint64', 'fixed64'].includes(type)) return 'decimal';
  if (type === 'double' || type === 'float') return 'double';
  if (type === 'bool') return 'boolean';
  if (type === 'string') return 'text';
  return undefined;
}

// ---- JSON Schema ----

function jsonKind(t: unknown): Kind {
  const s = (t ?? {}) as Record<string, unknown>;
  const types = ([] as unknown[]).concat(s['type'] ?? []).filter((x) => x !== 'null');
  const type = types.length === 1 ? types[0] : s['properties'] !== undefined ? 'object' : undefined;
  if (type === 'string') return { kind: 'scalar', name: s['format'] === 'uuid' ? 'uuid' : s['format'] === 'date-time' ? 'timestamp' : 'text' };
  if (type === 'integer') return { kind: 'scalar', name: 'bigint' };
  if (type === 'number') return { kind: 'scalar', name: 'double' };
  if (type === 'boolean') return { kind: 'scalar', name: 'boolean' };
  if (type === 'object') {
    const props = s['properties'] as Record<string, unknown> | undefined;
    if (props !== undefined) return { kind: 'record', fields: Object.entries(props).map(([name, p]) => ({ name, t: p, default: (p as Record<string, unknown>)['default'] })) };
    const k = typeof s['additionalProperties'] === 'object' ? jsonKind(s['additionalProperties']) : { kind: 'none' as const, why: '' };
    return k.kind === 'scalar' ? { kind: 'map', of: k.name } : { kind: 'none', why: 'an object without properties or scalar additionalProperties' };
  }
  if (type === 'array') {
    const k = jsonKind(s['items']);
    return k.kind === 'scalar' ? { kind: 'list', of: k.name } : { kind: 'none', why: 'an array of non-scalar items' };
  }
  return { kind: 'none', why: types.length > 1 ? `one of the types ${types.join(', ')}` : 'no single type' };
}

/** The columns of a registered schema's record (Avro record, Protobuf first message, JSON Schema object). */
export function deriveColumns(schema: CachedSchema): Derived {
  switch (schema.kind) {
    case 'AVRO':
      return walk(avroKind, schema.avro);
    case 'PROTOBUF': {
      const first = schema.proto.messages[0];
      if (first === undefined) return { columns: [], skipped: ['the .proto file declares no message'] };
      return walk(protoKind, first);
    }
    case 'JSON':
      return walk(jsonKind, schema.json.schema);
    default:
      return { columns: [], skipped: [`schema id ${schema.id}: ${schema.kind === 'invalid' ? schema.problem : 'not in the registry'}`] };
  }
}
