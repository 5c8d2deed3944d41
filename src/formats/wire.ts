/**
 * The Confluent wire format every Schema Registry serializer writes (Java, librdkafka, Python, ours):
 * a magic byte 0, the schema id as a 4-byte big-endian integer, then the payload.
 * https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/index.html#wire-format
 */

export const MAGIC_BYTE = 0;
export const HEADER_BYTES = 5;

export type WireHeader = { ok: true; id: number; payload: Buffer } | { ok: false; detail: string };

export function readWireHeader(bytes: Buffer): WireHeader {
  if (bytes.length < HEADER_BYTES || bytes[0] !== MAGIC_BYTE) {
    const first = bytes.length === 0 ? 'it is empty' : `its first byte is 0x${bytes[0]!.toString(16).padStart(2, '0')}${bytes[0]! >= 0x20 && bytes[0]! < 0x7f ? ` '${String.fromCharCode(bytes[0]!)}'` : ''}`;
    return {
      ok: false,
      detail: bytes.length > 0 && bytes[0] === MAGIC_BYTE
        ? `${bytes.length} bytes: too short for the wire format's magic byte and 4-byte schema id`
        : `no magic byte 0 of the Schema Registry wire format (${first}): not written by a Schema Registry serializer`,
    };
  }
  return { ok: true, id: bytes.readUInt32BE(1), payload: bytes.subarray(HEADER_BYTES) };
}

/** A payload with its wire header (tests, chaos samples, the benchmark). */
export function withWireHeader(id: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  header.writeUInt8(MAGIC_BYTE, 0);
  header.writeUInt32BE(id, 1);
  return Buffer.concat([header, payload]);
}
