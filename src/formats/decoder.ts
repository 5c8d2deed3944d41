/**
 * Formats are decoders, not jobs (Kafka Connect's converters): a Decoder turns a record's key or value
 * bytes into a typed value, whatever job then stores it. `json` needs nothing else; `avro`, `protobuf`
 * and `json-schema` read the Confluent wire format and need the record's schema from the Schema
 * Registry. That lookup is the one asynchronous step, split off: `prepare` fetches the schemas a batch
 * needs (the engine runs it before decoding, retried while the registry does not answer: Job.lookup),
 * and `decode` stays pure and synchronous over the schemas cached.
 *
 * Typed values: JSON numbers as LosslessNumber (exact digits); Avro and Protobuf 64-bit integers as
 * BigInt, decimals as LosslessNumber, timestamps and dates as Date, bytes as Buffer (src/formats/avro.ts,
 * protobuf.ts). A record that cannot be decoded says why, with the schema id, and is quarantined:
 *   missing_magic_byte  not in the wire format (e.g. plain JSON on an Avro topic)
 *   unknown_schema      the registry answers that it has no schema with that id (asked again with
 *                       backoff first: src/formats/schema-cache.ts)
 *   wrong_schema_type   the id names a schema of another format (a Protobuf schema on an Avro sink)
 *   bad_schema          the schema is registered but cannot be used (does not compile, references, a JSON Schema pattern
 *                       with nested repetition that could backtrack for ever: src/formats/json-schema.ts)
 *   bad_payload         the payload does not match its schema (truncated, wrong bytes, fails validation),
 *                       or claims more than it holds (an array of 2^31 items in 11 bytes)
 *   too_large           beyond what one record may make a decoder allocate or compute (nested past
 *                       MAX_NESTING, too many empty items, a huge decimal: src/formats/bounds.ts)
 *   bad_json            (json) not JSON
 */
import { parse } from 'lossless-json';
import type { DecodeLookup, SourceRecord } from '../engine/job.js';
import type { SchemaRegistryConfig } from '../config.js';
import { SchemaRegistry, type SchemaType } from '../registry/schema-registry.js';
import { DecodeBoundError, jsonTooDeep } from './bounds.js';
import { SchemaCache, type SchemaCacheOptions } from './schema-cache.js';
import { readWireHeader } from './wire.js';

export const FORMATS = ['json', 'avro', 'protobuf', 'json-schema'] as const;
export type Format = (typeof FORMATS)[number];

export type DecodeResult = { ok: true; value: unknown; schemaId?: number } | { ok: false; reason: string; detail: string };

export interface Decoder {
  readonly format: Format;
  /** Fetches the schemas these payloads name that are not cached yet; rejects (retriable) while the registry does not answer. */
  prepare(payloads: Iterable<Buffer | null>): Promise<void>;
  /** Pure: bytes → typed value, or why not. A registry format's schema must have been prepared. */
  decode(bytes: Buffer): DecodeResult;
}

/** The registry format's schema type. */
const SCHEMA_TYPE: Record<Exclude<Format, 'json'>, SchemaType> = { avro: 'AVRO', protobuf: 'PROTOBUF', 'json-schema': 'JSON' };

export function isRegistryFormat(f: Format): f is Exclude<Format, 'json'> {
  return f !== 'json';
}

/** JSON text, numbers lossless. */
export const jsonDecoder: Decoder = {
  format: 'json',
  prepare: async () => undefined,
  decode(bytes) {
    const text = bytes.toString('utf8');
    const deep = jsonTooDeep(text);
    if (deep !== undefined) return { ok: false, reason: 'too_large', detail: deep };
    try {
      return { ok: true, value: parse(text) };
    } catch (e) {
      return { ok: false, reason: 'bad_json', detail: firstLine(e) };
    }
  },
};

/** One registry and its schemas, shared by the decoders that use it (a record's key and value). */
export function schemaCache(config: SchemaRegistryConfig, options?: SchemaCacheOptions): SchemaCache {
  return new SchemaCache(new SchemaRegistry(config), options);
}

/** A decoder of `format`; a registry format needs the cache of the registry its schemas are in. */
export function createDecoder(format: Format, cache?: SchemaCache): Decoder {
  if (format === 'json') return jsonDecoder;
  if (cache === undefined) throw new Error(`the ${format} decoder needs a Schema Registry`);
  return new RegistryDecoder(format, cache);
}

/** A decode before its lookup: the caller's fault, never the record's (a job must not quarantine for it). */
export class SchemaNotFetched extends Error {}

class RegistryDecoder implements Decoder {
  constructor(
    readonly format: Exclude<Format, 'json'>,
    private readonly cache: SchemaCache,
  ) {}

  async prepare(payloads: Iterable<Buffer | null>): Promise<void> {
    const ids: number[] = [];
    for (const p of payloads) {
      if (p === null) continue;
      const h = readWireHeader(p);
      // Asked again: an id never fetched, and one whose "no such id" is no longer believed (SchemaCache).
      if (h.ok && !this.cache.has(h.id)) ids.push(h.id);
    }
    if (ids.length > 0) await this.cache.fetch(ids);
  }

  decode(bytes: Buffer): DecodeResult {
    const h = readWireHeader(bytes);
    if (!h.ok) return { ok: false, reason: 'missing_magic_byte', detail: h.detail };
    const s = this.cache.get(h.id);
    if (s === undefined) throw new SchemaNotFetched(`schema id ${h.id} was not fetched: the job's lookup must run before decode`);
    const where = `schema id ${h.id}`;
    if (s.kind === 'unknown') return { ok: false, reason: 'unknown_schema', detail: `${where} is not in the Schema Registry at ${this.cache.registry.config.url}` };
    if (s.kind === 'invalid') return { ok: false, reason: 'bad_schema', detail: `${where} (${s.type}) cannot be used: ${s.problem}` };
    if (s.kind !== SCHEMA_TYPE[this.format]) return { ok: false, reason: 'wrong_schema_type', detail: `${where} is a ${s.kind} schema; this decoder reads ${this.format}` };
    try {
      const value = s.decode(h.payload);
      return { ok: true, value, schemaId: h.id };
    } catch (e) {
      // Whatever a library throws on a stranger's bytes (a RangeError, a TypeError, a non-Error) is the record's fault.
      if (e instanceof DecodeBoundError) return { ok: false, reason: e.reason, detail: `${where} (${s.kind}): ${e.message}` };
      return { ok: false, reason: 'bad_payload', detail: `the payload does not match ${where} (${s.kind}): ${firstLine(e)}` };
    }
  }
}

/** A thrown value's message, one line of at most 200 characters. */
function firstLine(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  return m.split('\n')[0]!.slice(0, 200);
}

/**
 * The engine's lookup step for a job reading records with these decoders (Job.lookup): fetches the
 * schemas of a batch's values and keys before they are decoded. Undefined when none needs a registry.
 */
export function decoderLookup(decoders: { value?: Decoder; key?: Decoder }): DecodeLookup | undefined {
  const { value, key } = decoders;
  const needs = (d: Decoder | undefined): d is Decoder => d !== undefined && isRegistryFormat(d.format);
  if (!needs(value) && !needs(key)) return undefined;
  return {
    server: 'Schema Registry',
    async fetch(records: readonly SourceRecord[]) {
      await Promise.all([
        needs(value) ? value.prepare(records.map((r) => r.value)) : undefined,
        needs(key) ? key.prepare(records.map((r) => r.key)) : undefined,
      ]);
    },
  };
}
