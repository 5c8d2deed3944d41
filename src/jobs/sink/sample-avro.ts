/**
 * Seeded sample records of an Avro sink (`chaos --job`, `bench --sink` with `format: avro`): the JSON
 * samples of src/jobs/sink/sample.ts, same seed and keys, written as Avro in the Confluent wire format under
 * a schema made from the config's columns (every field a union with null, so a sample missing a field
 * still encodes and the sink quarantines it as `missing_field`). A sample whose value no Avro of the
 * schema can hold (a wrong type) is written as a record the sink must quarantine: in turn a payload
 * that does not match its schema, one without the wire format's magic byte, and one naming a schema
 * id the registry does not know.
 */
import { isLosslessNumber, parse } from 'lossless-json';
import type avro from 'avsc';
import { avroType, encodeAvro } from '../../formats/avro.js';
import { withWireHeader } from '../../formats/wire.js';
import type { ScalarType, CqlType } from './cql-types.js';
import { sampleRecords } from './sample.js';
import type { SinkConfig } from './sink-config.js';

function scalarSchema(t: ScalarType): unknown {
  switch (t) {
    case 'text':
      return 'string';
    case 'bigint':
      return 'long';
    case 'timestamp':
      return { type: 'long', logicalType: 'timestamp-millis' };
    case 'uuid':
      return { type: 'string', logicalType: 'uuid' };
    case 'decimal':
      return { type: 'bytes', logicalType: 'decimal', precision: 38, scale: 2 };
    case 'smallint':
    case 'tinyint':
      return 'int';
    case 'date':
    case 'time':
    case 'inet':
    case 'timeuuid':
      return 'string'; // the sink reads these from their text
    case 'blob':
      return 'bytes';
    default:
      return t; // int, float, double, boolean
  }
}

function fieldSchema(t: CqlType): unknown {
  if (t.kind === 'scalar') return scalarSchema(t.name);
  return t.kind === 'map' ? { type: 'map', values: fieldSchema(t.of) } : { type: 'array', items: fieldSchema(t.of) };
}

/** The value schema of a sink's samples: its columns at their field paths, nested records for `a.b`. */
export function sampleValueSchema(config: SinkConfig): object {
  type Node = { fields: Map<string, Node | CqlType> };
  const root: Node = { fields: new Map() };
  for (const c of config.columns) {
    let node = root;
    for (const p of c.field.slice(0, -1)) {
      let next = node.fields.get(p);
      if (next === undefined || !('fields' in next)) node.fields.set(p, (next = { fields: new Map() }));
      node = next as Node;
    }
    node.fields.set(c.field[c.field.length - 1]!, c.type);
  }
  let n = 0;
  const record = (node: Node, name: string): object => ({
    type: 'record',
    name,
    fields: [...node.fields].map(([f, v]) => ({ name: f, type: ['null', 'fields' in v ? record(v, `${name}_${f}_${++n}`) : fieldSchema(v)], default: null })),
  });
  return record(root, `${config.name.replace(/[^A-Za-z0-9_]/g, '_')}_sample`);
}

/** The key schema: the single key column's type (an Avro key of several columns is not sampled). */
export function sampleKeySchema(config: SinkConfig): unknown {
  const col = config.columns.find((c) => c.name === config.key[0])!;
  return fieldSchema(col.type);
}

/** A sample's JSON field as the Avro value of its column type, or undefined when it cannot be one. */
function avroValue(t: ScalarType, v: unknown): unknown {
  const num = isLosslessNumber(v) ? v.toString() : undefined;
  switch (t) {
    case 'text':
    case 'uuid':
    case 'date':
    case 'time':
    case 'inet':
    case 'timeuuid':
      return typeof v === 'string' ? v : undefined;
    case 'blob':
      return typeof v === 'string' ? Buffer.from(v, 'base64') : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    case 'int':
    case 'smallint':
    case 'tinyint':
    case 'float':
    case 'double':
      return num === undefined ? undefined : Number(num);
    case 'bigint':
      return num !== undefined && /^-?\d+$/.test(num) ? BigInt(num) : undefined;
    case 'timestamp':
      return num !== undefined ? new Date(Number(num)) : typeof v === 'string' ? new Date(Date.parse(v)) : undefined;
    case 'decimal':
      return num;
  }
}

function convertField(t: CqlType, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (t.kind === 'scalar') return avroValue(t.name, v);
  if (t.kind !== 'map') return Array.isArray(v) ? v.map((x) => convertField(t.of, x)) : undefined;
  return typeof v === 'object' && !Array.isArray(v) && !isLosslessNumber(v) ? Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, convertField(t.of, x)])) : undefined;
}

/** The Avro value of a JSON sample document (fields at the config's paths), or undefined when it cannot be one. */
function toAvro(config: SinkConfig, type: avro.Type, doc: Record<string, unknown>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const c of config.columns) {
    let src: unknown = doc;
    for (const p of c.field) src = src !== null && typeof src === 'object' ? (src as Record<string, unknown>)[p] : undefined;
    const v = convertField(c.type, src);
    if (v === undefined && src !== undefined && src !== null) return undefined; // avsc would write undefined as null
    let node = out;
    for (const p of c.field.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    node[c.field[c.field.length - 1]!] = v;
  }
  return type.isValid(out) ? out : undefined;
}

export interface AvroSampleIds {
  value: number;
  /** The key's schema id, when keys are Avro too. */
  key?: number;
}

export function* sampleAvroRecords(config: SinkConfig, ids: AvroSampleIds, o: { seed: number; count: number; badRatio: number }): Generator<{ key: string | Buffer | null; value: Buffer | null }> {
  const valueType = avroType(JSON.stringify(sampleValueSchema(config)));
  const keyType = ids.key === undefined ? undefined : avroType(JSON.stringify(sampleKeySchema(config)));
  const keyCol = config.columns.find((c) => c.name === config.key[0]);
  let broken = 0;
  for (const s of sampleRecords(config, o)) {
    let key: string | Buffer | null = s.key;
    if (keyType !== undefined && s.key !== null && keyCol !== undefined) {
      const raw = keyCol.type.kind === 'scalar' && ['text', 'uuid', 'timestamp'].includes(keyCol.type.name) ? s.key : parse(s.key);
      const kv = convertField(keyCol.type, raw);
      key = kv === undefined ? Buffer.from(s.key) : withWireHeader(ids.key!, encodeAvro(keyType, kv));
    }
    if (s.value === null) {
      yield { key, value: null };
      continue;
    }
    const doc = parse(s.value) as Record<string, unknown>;
    const v = toAvro(config, valueType, doc);
    if (v !== undefined) {
      yield { key, value: withWireHeader(ids.value, encodeAvro(valueType, v)) };
      continue;
    }
    const kind = broken++ % 3;
    const value = kind === 0 ? withWireHeader(ids.value, Buffer.from([0x02, 0xff, 0xff])) : kind === 1 ? Buffer.from(s.value) : withWireHeader(0x7fff_fff0, Buffer.from([0]));
    yield { key, value };
  }
}
