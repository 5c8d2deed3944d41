/**
 * Protobuf through protobufjs: the registry holds the schema as .proto text, parsed here (with the
 * well-known types google/protobuf/*.proto that protobufjs bundles). @confluentinc/schemaregistry's
 * own Protobuf serde asks the registry for a serialized FileDescriptorProto instead
 * (`?format=serialized`), which Apicurio 3.3.3 answers with raw bytes inside a JSON string (mangled
 * by the UTF-8 of JSON): parsing the text works with any registry.
 *
 * The payload starts with the message indexes of the wire format (a zigzag varint count, then that
 * many indexes; a single 0 for the first message of the file), which name the message type.
 * Values: int64 / uint64 / sint64 / fixed64 / sfixed64 as BigInt (exact), 32-bit integers and
 * floating point as numbers, enums by name, bytes as Buffers, google.protobuf.Timestamp as a Date
 * (to the millisecond), maps as plain objects, repeated fields as arrays, nested messages as objects
 * (null when absent). Proto3 scalars absent from the payload have their default (0, "", false), as
 * protobuf defines; a field with explicit presence (`optional`, or a message) is null when absent.
 */
import protobuf from 'protobufjs';
import { DecodeBoundError, MAX_NESTING, valueBudget } from './bounds.js';

const LONGS = new Set(['int64', 'uint64', 'sint64', 'fixed64', 'sfixed64']);

export interface ProtoSchema {
  readonly root: protobuf.Root;
  /** The file's message types in declaration order, each with its nested ones (for the message indexes). */
  readonly messages: readonly protobuf.Type[];
}

/** Parses a registered .proto text; throws on one protobufjs cannot read or resolve. */
export function protoSchema(text: string): ProtoSchema {
  const root = new protobuf.Root();
  for (const file of Object.keys(protobuf.common).filter((n) => n.endsWith('.proto'))) root.addJSON(protobuf.common.get(file)!.nested!);
  const parsed = protobuf.parse(text, root, { keepCase: true });
  root.resolveAll();
  const pkg = parsed.package === undefined ? root : root.lookup(parsed.package);
  if (!(pkg instanceof protobuf.Namespace)) throw new Error(`package ${parsed.package} not found`);
  return { root, messages: pkg.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type && !n.fullName.startsWith('.google.protobuf.')) };
}

/** Reads a zigzag varint at `at`; [value, next offset]. */
function readVarint(b: Buffer, at: number): [number, number] {
  let result = 0;
  let shift = 0;
  for (;;) {
    if (at >= b.length) throw new Error('the message indexes are cut short');
    const byte = b[at++]!;
    result |= (byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) break;
    shift += 7;
    if (shift > 28) throw new Error('a message index is not a varint');
  }
  return [(result >>> 1) ^ -(result & 1), at];
}

/** The message type the indexes name, and where the message starts. */
function messageType(schema: ProtoSchema, payload: Buffer): [protobuf.Type, number] {
  let [count, at] = readVarint(payload, 0);
  // Each index takes at least a byte: a count past the bytes left is a lie, not a path to allocate.
  if (count < 0 || count > payload.length - at) throw new DecodeBoundError('bad_payload', `the message indexes claim ${count} indexes; ${payload.length - at} bytes are left`);
  const path = count === 0 ? [0] : [];
  for (let i = 0; i < count; i++) {
    let index: number;
    [index, at] = readVarint(payload, at);
    path.push(index);
  }
  let candidates: readonly protobuf.Type[] = schema.messages;
  let type: protobuf.Type | undefined;
  for (const index of path) {
    type = candidates[index];
    if (type === undefined) throw new Error(`message index ${path.join('.')} is not a message of the schema`);
    candidates = type.nestedArray.filter((n): n is protobuf.Type => n instanceof protobuf.Type);
  }
  return [type!, at];
}

export function decodeProtobuf(schema: ProtoSchema, payload: Buffer): unknown {
  const [type, at] = messageType(schema, payload);
  let message: protobuf.Message;
  try {
    message = type.decode(payload.subarray(at));
  } catch (e) {
    // protobufjs stops at protoc's recursion limit (100, as MAX_NESTING); lengths it checks itself.
    if (e instanceof Error && /maximum nesting depth/.test(e.message)) throw new DecodeBoundError('too_large', `messages nest more than ${MAX_NESTING} deep`);
    throw e;
  }
  // toObject gives every message all its schema's fields: a schema of many fields makes an empty
  // message (two bytes in a repeated field) many values, so they are counted before it runs.
  const budget = valueBudget(payload.length);
  const values = countValues(type, message as unknown as Record<string, unknown>, budget);
  if (values > budget) throw new DecodeBoundError('too_large', `it decodes to more than ${budget} values (messages, fields and items) from ${payload.length} bytes`);
  const err = type.verify(message);
  if (err !== null) throw new Error(err);
  return typed(type, type.toObject(message, { longs: String, enums: String, bytes: Buffer as never, defaults: true, arrays: true, objects: true }));
}

/** The values toObject makes of a decoded message (each message's fields and items), counted up to past `budget`. */
function countValues(type: protobuf.Type, message: Record<string, unknown>, budget: number, seen = 0): number {
  let n = seen + 1 + type.fieldsArray.length;
  for (const f of type.fieldsArray) {
    if (n > budget) return n;
    const v = message[f.name];
    if (v === undefined || v === null || !Object.prototype.hasOwnProperty.call(message, f.name)) continue;
    const sub = f.resolvedType instanceof protobuf.Type ? f.resolvedType : undefined;
    const items = f.map ? Object.values(v as Record<string, unknown>) : f.repeated ? (v as unknown[]) : [v];
    if (f.map || f.repeated) n += items.length;
    if (sub !== undefined) for (const x of items) if (n <= budget) n = countValues(sub, x as Record<string, unknown>, budget, n);
  }
  return n;
}

function typed(type: protobuf.Type, obj: Record<string, unknown>): Record<string, unknown> {
  if (type.fullName === '.google.protobuf.Timestamp') return { value: timestamp(obj) };
  const out: Record<string, unknown> = {};
  for (const f of type.fieldsArray) {
    const v = obj[f.name];
    const explicit = f.options?.['proto3_optional'] === true || f.partOf !== null || f.resolvedType instanceof protobuf.Type;
    if (v === undefined || v === null || (explicit && !hasField(obj, f.name))) {
      out[f.name] = f.repeated ? [] : f.map ? {} : null;
      continue;
    }
    const one = (x: unknown): unknown => scalar(f, x);
    if (f.map) out[f.name] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, one(x)]));
    else if (f.repeated) out[f.name] = (v as unknown[]).map(one);
    else out[f.name] = one(v);
  }
  return out;
}

function hasField(obj: Record<string, unknown>, name: string): boolean {
  return Object.prototype.hasOwnProperty.call(obj, name) && obj[name] !== null;
}

function scalar(f: protobuf.Field, v: unknown): unknown {
  if (f.resolvedType instanceof protobuf.Type) {
    if (f.resolvedType.fullName === '.google.protobuf.Timestamp') return timestamp(v as Record<string, unknown>);
    return typed(f.resolvedType, v as Record<string, unknown>);
  }
  if (LONGS.has(f.type)) return BigInt(v as string);
  return v;
}

function timestamp(v: Record<string, unknown>): Date {
  const seconds = BigInt(String(v['seconds'] ?? '0'));
  const nanos = Number(v['nanos'] ?? 0);
  return new Date(Number(seconds * 1000n) + Math.floor(nanos / 1e6));
}
