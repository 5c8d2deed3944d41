/**
 * A registered schema compiled for decoding: Avro (avsc), Protobuf (protobufjs) or JSON Schema (ajv).
 * Loaded by the schema cache only once a registry format meets its first schema, so that a command
 * or a JSON job never loads these libraries.
 */
import type avro from 'avsc';
import type { SchemaType } from '../registry/schema-registry.js';
import { avroType, decodeAvro } from './avro.js';
import { decodeJsonSchema, jsonSchema, type JsonSchema } from './json-schema.js';
import { decodeProtobuf, protoSchema, type ProtoSchema } from './protobuf.js';

export type CompiledSchema =
  | { readonly kind: 'AVRO'; readonly id: number; readonly avro: avro.Type; decode(payload: Buffer): unknown }
  | { readonly kind: 'PROTOBUF'; readonly id: number; readonly proto: ProtoSchema; decode(payload: Buffer): unknown }
  | { readonly kind: 'JSON'; readonly id: number; readonly json: JsonSchema; decode(payload: Buffer): unknown };

export type CachedSchema =
  | CompiledSchema
  /** The registry does not know the id. */
  | { readonly kind: 'unknown'; readonly id: number }
  /** Registered, but not usable here (it does not compile, or imports other subjects). */
  | { readonly kind: 'invalid'; readonly id: number; readonly type: SchemaType; readonly problem: string };

/** Compiles a registered schema; a problem is kept as the schema's (its records are quarantined with it). */
export function compile(id: number, type: SchemaType, text: string, references = 0): CachedSchema {
  if (references > 0) return { kind: 'invalid', id, type, problem: `it references ${references} other schema(s), which this version does not resolve` };
  try {
    if (type === 'AVRO') {
      const t = avroType(text);
      return { kind: 'AVRO', id, avro: t, decode: (p) => decodeAvro(t, p) };
    }
    if (type === 'PROTOBUF') {
      const s = protoSchema(text);
      return { kind: 'PROTOBUF', id, proto: s, decode: (p) => decodeProtobuf(s, p) };
    }
    const s = jsonSchema(text);
    return { kind: 'JSON', id, json: s, decode: (p) => decodeJsonSchema(s, p) };
  } catch (e) {
    return { kind: 'invalid', id, type, problem: `it does not compile: ${(e as Error).message.split('\n')[0]}` };
  }
}
