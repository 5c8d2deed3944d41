/**
 * Micro-benchmarks of the worker's per-record conversions, behind the figures in bench/README.md:
 * decoding the canonical event text (fast path, with ASCII and with non-ASCII strings: the strict-string
 * checks cost more on V8's two-byte strings) against the general lossless-JSON path, and int64 →
 * Long through the 32-bit halves (`toLong`) against the driver's `Long.fromString`.
 *
 *   node --import tsx bench/micro.ts [--records 200000]
 */
import { decodeEvent, decodeJson, encodeEvent } from '../src/app/event.js';
import { insertQueries } from '../src/app/event-job.js';
import cassandra from 'cassandra-driver';
import { Long, toLong } from '../src/cassandra/session.js';

const at = process.argv.indexOf('--records');
const n = at >= 0 ? Number(process.argv[at + 1]) : 200_000;
let x = 0x9e3779b97f4a7c15n;
const ids = Array.from({ length: n }, () => (x = BigInt.asIntN(64, x * 6364136223846793005n + 1442695040888963407n)));
const texts = ids.map((id, i) => encodeEvent({ id, ts: 1_700_000_000_000 + i, source: 'My Router', client: 'Airmiles Rewards Network', health: 2 }));
const buffers = texts.map((t) => Buffer.from(t));
const wide = ids.map((id, i) => Buffer.from(encodeEvent({ id, ts: 1_700_000_000_000 + i, source: 'Routeur Düsseldorf ✓', client: 'Réseau 😀 Airmiles', health: 2 })));

/** Best of 5 rounds, in µs per record. */
function time(fn: () => void): number {
  let best = Infinity;
  for (let r = 0; r < 5; r++) {
    const t = performance.now();
    fn();
    best = Math.min(best, ((performance.now() - t) / n) * 1000);
  }
  return best;
}

const decodeFast = time(() => buffers.forEach((b) => decodeEvent(b)));
const decodeWide = time(() => wide.forEach((b) => decodeEvent(b)));
const decodeGeneral = time(() => texts.forEach((t) => decodeJson(t)));
const longHalves = time(() => ids.forEach((v) => toLong(v)));
const longString = time(() => ids.forEach((v) => Long.fromString(v.toString())));
// The events inserts of one 2,000-record batch in chunks of 100, down to the bytes of each value as the
// driver's Encoder gives them (what its batch request then copies): before, slice + map with a Long,
// a Date and the driver's per-value encoding; now insertQueries, whose values are already bytes (the
// driver passes a Buffer through).
const decoded = buffers.map((b, i) => {
  const d = decodeEvent(b);
  if (!d.ok) throw new Error(d.detail);
  return { record: { topic: 't', partition: 0, offset: BigInt(i), key: null, value: b, timestampMs: 0 }, value: d.value };
});
const insert = 'INSERT INTO ks.events (id, ts, partition, offset, source, client, health) VALUES (?, ?, ?, ?, ?, ?, ?)';
/** The driver's own encoder (exported, though its typings leave it out). */
const encoder = new (cassandra as unknown as { Encoder: new (protocolVersion: number, options: object) => { encode(v: unknown, type: string): Buffer } }).Encoder(4, {});
const types = ['bigint', 'timestamp', 'int', 'bigint', 'text', 'text', 'int'];
const encodeAll = (queries: Array<{ params: unknown[] }>) => {
  for (const q of queries) for (let k = 0; k < 7; k++) encoder.encode(q.params[k], types[k]!);
};
const paramsMap = time(() => {
  for (let i = 0; i < decoded.length; i += 100) {
    encodeAll(decoded.slice(i, i + 100).map(({ record, value: e }) => ({ query: insert, params: [toLong(e.id), new Date(e.ts), 0, toLong(record.offset), e.source, e.client, e.health] })));
  }
});
const paramsLoop = time(() => {
  for (let i = 0; i < decoded.length; i += 100) encodeAll(insertQueries(insert, 0, decoded, i, Math.min(decoded.length, i + 100)));
});
const row = (what: string, us: number, base: number) => `${what.padEnd(44)} ${us.toFixed(3).padStart(7)} µs   ${(base / us).toFixed(1)}×`;
process.stdout.write(
  [
    `${n.toLocaleString('en-US')} records, best of 5 rounds`,
    row('decodeEvent (canonical text: fast path)', decodeFast, decodeGeneral),
    row('decodeEvent (fast path, non-ASCII strings)', decodeWide, decodeGeneral),
    row('decodeJson (general lossless path)', decodeGeneral, decodeGeneral),
    row('toLong (32-bit halves)', longHalves, longString),
    row('Long.fromString(bigint.toString())', longString, longString),
    row('insertQueries + driver encode (bytes in place)', paramsLoop, paramsMap),
    row('rows by slice + map + driver encode (before)', paramsMap, paramsMap),
    '',
  ].join('\n'),
);
