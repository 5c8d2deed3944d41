/**
 * Debezium's change events (`envelope: debezium`): what a sink row is read from. A change event's
 * value is `{ before, after, source, op, ts_ms, transaction }`, or that under `{ schema, payload }`
 * when Kafka Connect's JsonConverter writes its schemas; `op` is c (insert), u (update), r (a snapshot
 * read), d (delete), t (truncate) or m (a logical decoding message). After a delete Debezium writes a
 * tombstone (a null value) with the same key, which an upsert sink reads as a delete too.
 *
 * Within a partition a key's events are in the database's commit order (Debezium keys them by the
 * table's primary key), so the sink's offset order is the change order; a key moves to another
 * partition only when the topic gains partitions, which stops an upsert sink (rule 4 of
 * src/jobs/sink/sink-job.ts).
 */

export type Change =
  | { ok: true; op: 'c' | 'u' | 'r' | 'd'; row: Record<string, unknown> | null }
  | { ok: false; reason: 'bad_envelope' | 'unsupported_op'; detail: string };

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Date) && !Buffer.isBuffer(v) && !(v as { isLosslessNumber?: unknown }).isLosslessNumber;

/** `{ schema, payload }` (JsonConverter with schemas.enable=true) → the payload; anything else as it is. */
export function unwrapSchema(doc: Record<string, unknown>): unknown {
  const keys = Object.keys(doc);
  return keys.length === 2 && 'schema' in doc && 'payload' in doc ? doc['payload'] : doc;
}

/**
 * The row a change event stands for: `after` for c, u and r; for d, `before` (null when Debezium
 * left it out: an upsert sink needs only the key). Why not, for anything else.
 */
export function change(doc: Record<string, unknown>): Change {
  const e = unwrapSchema(doc);
  if (!isObject(e)) return { ok: false, reason: 'bad_envelope', detail: 'the value under payload is not a change event (an object of before, after, source, op)' };
  const op = e['op'];
  if (op === undefined || op === null) return { ok: false, reason: 'bad_envelope', detail: 'a change event without op (envelope: debezium reads { before, after, source, op, ts_ms })' };
  switch (op) {
    case 'c':
    case 'u':
    case 'r': {
      const after = e['after'];
      if (!isObject(after)) return { ok: false, reason: 'bad_envelope', detail: `op ${op} without the row: after is ${after === undefined ? 'missing' : after === null ? 'null' : 'not an object'}` };
      return { ok: true, op: op as 'c' | 'u' | 'r', row: after };
    }
    case 'd': {
      const before = e['before'];
      if (before !== undefined && before !== null && !isObject(before)) return { ok: false, reason: 'bad_envelope', detail: 'op d with a before that is not an object' };
      return { ok: true, op: 'd', row: isObject(before) ? before : null };
    }
    case 't':
    case 'm':
      return { ok: false, reason: 'unsupported_op', detail: `op ${op} (${op === 't' ? 'a truncate: no key to delete, and a sink does not empty its table' : 'a logical decoding message: no row'})` };
    default:
      return { ok: false, reason: 'bad_envelope', detail: `op ${JSON.stringify(typeof op === 'string' ? op.slice(0, 20) : op)} is none of c, u, r, d, t, m` };
  }
}
