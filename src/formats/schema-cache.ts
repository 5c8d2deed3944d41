/**
 * The schemas a worker has met, by id, compiled once: fetched from the registry before a batch is
 * decoded (`fetch`, async, retried by the engine while the registry does not answer), then read by the
 * decoders synchronously (`get`). A schema id never changes meaning in a registry, so an entry is kept
 * for the life of the process: while the registry is down, records whose schemas are known keep
 * flowing; only a batch holding an id never seen waits for it.
 *
 * An id the registry answers it does not know is cached as unknown too (its records are quarantined),
 * so a topic full of such records does not ask again for every batch.
 */
import type avro from 'avsc';
import { SchemaRegistry, type SchemaType } from '../registry/schema-registry.js';
import { avroType } from './avro.js';
import { jsonSchema, type JsonSchema } from './json-schema.js';
import { protoSchema, type ProtoSchema } from './protobuf.js';

export type CachedSchema =
  | { readonly kind: 'AVRO'; readonly id: number; readonly text: string; readonly avro: avro.Type }
  | { readonly kind: 'PROTOBUF'; readonly id: number; readonly text: string; readonly proto: ProtoSchema }
  | { readonly kind: 'JSON'; readonly id: number; readonly text: string; readonly json: JsonSchema }
  /** The registry does not know the id. */
  | { readonly kind: 'unknown'; readonly id: number }
  /** Registered, but not usable here (it does not compile, or imports other subjects). */
  | { readonly kind: 'invalid'; readonly id: number; readonly type: SchemaType; readonly problem: string };

export class SchemaCache {
  private readonly schemas = new Map<number, CachedSchema>();
  private readonly inFlight = new Map<number, Promise<void>>();

  constructor(readonly registry: SchemaRegistry) {}

  get(id: number): CachedSchema | undefined {
    return this.schemas.get(id);
  }

  /** Fetches and compiles the ids not cached yet (each once, however many batches ask at the same time). */
  async fetch(ids: Iterable<number>): Promise<void> {
    const waits: Promise<void>[] = [];
    for (const id of new Set(ids)) {
      if (this.schemas.has(id)) continue;
      let p = this.inFlight.get(id);
      if (p === undefined) {
        p = this.load(id).finally(() => this.inFlight.delete(id));
        this.inFlight.set(id, p);
      }
      waits.push(p);
    }
    await Promise.all(waits);
  }

  private async load(id: number): Promise<void> {
    const s = await this.registry.byId(id);
    this.schemas.set(id, s === null ? { kind: 'unknown', id } : compile(id, s.type, s.schema, s.references.length));
  }
}

/** Compiles a registered schema; a problem is kept as the schema's (its records are quarantined with it). */
export function compile(id: number, type: SchemaType, text: string, references = 0): CachedSchema {
  if (references > 0) return { kind: 'invalid', id, type, problem: `it references ${references} other schema(s), which this version does not resolve` };
  try {
    if (type === 'AVRO') return { kind: 'AVRO', id, text, avro: avroType(text) };
    if (type === 'PROTOBUF') return { kind: 'PROTOBUF', id, text, proto: protoSchema(text) };
    return { kind: 'JSON', id, text, json: jsonSchema(text) };
  } catch (e) {
    return { kind: 'invalid', id, type, problem: `it does not compile: ${(e as Error).message.split('\n')[0]}` };
  }
}
