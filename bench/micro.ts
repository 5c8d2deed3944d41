/**
 * Micro-benchmarks of the worker's per-record conversions, behind the figures in bench/README.md:
 * decoding the canonical event text (fast path, with ASCII and with non-ASCII strings: the strict-string
 * checks cost more on V8's two-byte strings) against the general lossless-JSON path, and int64 →
 * Long through the 32-bit halves (`toLong`) against the driver's `Long.fromString`, a batch's
 * request frame built from pre-encoded rows against the driver's BatchRequest, and the sink's decode
 * with its columns picked out of the flat text against the value parsed whole, and an upsert sink's
 * decode ordered by a version against by offset.
 *
 *   node --import tsx bench/micro.ts [--records 200000]
 */
import { decodeEvent, decodeJson, encodeEvent } from '../src/jobs/events/event.js';
import { createRequire } from 'node:module';
import { insertRows, insertStatement } from '../src/jobs/events/event-job.js';
import { ORIGINAL_LAYOUT } from '../src/jobs/events/events-layout.js';
import { BatchRows } from '../src/cassandra/batch-rows.js';
import { EncodedBatchRequest } from '../src/cassandra/prepared-batch.js';
import cassandra from 'cassandra-driver';
import { Long, toLong } from '../src/cassandra/session.js';
import { SinkCodec } from '../src/jobs/sink/sink-codec.js';
import { sinkConfig as parseSinkConfig } from '../src/jobs/sink/sink-config.js';
import { sinkConfig as benchSinkConfig } from './sink.js';
import { sampleRecords } from '../src/jobs/sink/sample.js';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

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
// The events inserts of one 2,000-record batch in batches of 100, down to the request frame the driver
// writes to the socket: before, a statement object and a parameter array per row (each value already
// bytes) and the driver's BatchRequest, which adds a 4-byte length buffer per value and concatenates;
// now insertRows, every row's entry written into one buffer, and the request copying it whole
// (src/cassandra/prepared-batch.ts; the driver's awaited prepared-cache lookup per row, also gone, is
// not in this figure).
const decoded = buffers.map((b, i) => {
  const d = decodeEvent(b);
  if (!d.ok) throw new Error(d.detail);
  return { record: { topic: 't', partition: 0, offset: BigInt(i), key: null, value: b, timestampMs: 0 }, value: d.value };
});
const require = createRequire(import.meta.url);
const { BatchRequest } = require('cassandra-driver/lib/requests.js') as { BatchRequest: new (q: unknown[], o: unknown) => { write(e: unknown, id: number): Buffer } };
const { DefaultExecutionOptions } = require('cassandra-driver/lib/execution-options.js') as { DefaultExecutionOptions: { create(o: object, c: unknown): any } };
const { query: insert, values: nValues } = insertStatement('ks', ORIGINAL_LAYOUT);
const encoder = new (cassandra as unknown as { Encoder: new (protocolVersion: number, options: object) => { encode(v: unknown, type: string): Buffer; protocolVersion: number } }).Encoder(4, {});
const queryId = Buffer.alloc(16, 1);
const meta = { columns: Array.from({ length: nValues }, () => ({ type: { code: 0 } })) };
const client = new cassandra.Client({ contactPoints: ['127.0.0.1'], localDataCenter: 'datacenter1' });
const options = DefaultExecutionOptions.create({ prepare: true, logged: false, consistency: 6 }, client);
const texts8 = new Map<string, Buffer>();
const utf8 = (s: string) => texts8.get(s) ?? (texts8.set(s, Buffer.from(s)), texts8.get(s)!);
const int = (v: number) => encoder.encode(v, 'int');
const int64 = (v: bigint) => encoder.encode(toLong(v), 'bigint');
const framesBefore = time(() => {
  for (let i = 0; i < decoded.length; i += 100) {
    const items = decoded.slice(i, i + 100).map(({ record, value: e }) => ({
      query: insert,
      queryId,
      meta,
      params: [int64(e.id), encoder.encode(new Date(e.ts), 'timestamp'), int(0), int64(record.offset), utf8(e.source), utf8(e.client), int(e.health)],
    }));
    new BatchRequest(items, options).write(encoder, 1);
  }
});
const framesNow = time(() => {
  for (let i = 0; i < decoded.length; i += 100) {
    const to = Math.min(decoded.length, i + 100);
    const rows = new BatchRows(queryId, nValues, 80, to - i);
    insertRows(rows, 0, decoded, i, to);
    new EncodedBatchRequest({ query: insert, queryId, meta }, options, rows).write(encoder, 1);
  }
});
// The sink's decode of the same events in log mode (bench/sink.ts's config): the columns picked out of
// the flat text (SinkCodec's flat path) against the value parsed whole, then each column read.
const sinkFlat = new SinkCodec(parseSinkConfig(benchSinkConfig('log', 't')));
const sinkGeneral = new SinkCodec(parseSinkConfig(benchSinkConfig('log', 't')));
(sinkGeneral as unknown as { flat: unknown }).flat = undefined;
const sinkRecords = decoded.map((d) => d.record);
const sinkDecodeFlat = time(() => sinkRecords.forEach((r) => sinkFlat.decode(r)));
const sinkDecodeGeneral = time(() => sinkRecords.forEach((r) => sinkGeneral.decode(r)));
// An upsert sink's decode ordered by a version (`version: rev`) against by offset, on the orders
// sink's samples (which carry a random version each).
const ordersRaw = parseYaml(readFileSync('examples/sinks/orders.yaml', 'utf8')) as Record<string, unknown>;
const byVersionConfig = parseSinkConfig({ ...ordersRaw, version: 'rev' });
const ordersRecords = [...sampleRecords(byVersionConfig, { seed: 1, count: n, badRatio: 0 })].map((r, i) => ({
  topic: 't',
  partition: 0,
  offset: BigInt(i),
  key: r.key === null ? null : Buffer.from(r.key),
  value: r.value === null ? null : Buffer.from(r.value),
  timestampMs: 1_700_000_000_000,
}));
const byOffset = new SinkCodec(parseSinkConfig(ordersRaw));
const byVersion = new SinkCodec(byVersionConfig);
const upsertByOffset = time(() => ordersRecords.forEach((r) => byOffset.decode(r)));
const upsertByVersion = time(() => ordersRecords.forEach((r) => byVersion.decode(r)));
const row = (what: string, us: number, base: number) => `${what.padEnd(44)} ${us.toFixed(3).padStart(7)} µs   ${(base / us).toFixed(1)}×`;
process.stdout.write(
  [
    `${n.toLocaleString('en-US')} records, best of 5 rounds`,
    row('decodeEvent (canonical text: fast path)', decodeFast, decodeGeneral),
    row('decodeEvent (fast path, non-ASCII strings)', decodeWide, decodeGeneral),
    row('decodeJson (general lossless path)', decodeGeneral, decodeGeneral),
    row('toLong (32-bit halves)', longHalves, longString),
    row('Long.fromString(bigint.toString())', longString, longString),
    row('insertRows + EncodedBatchRequest (one buffer)', framesNow, framesBefore),
    row('row objects + driver BatchRequest (before)', framesBefore, framesBefore),
    row('sink decode, log mode (columns picked)', sinkDecodeFlat, sinkDecodeGeneral),
    row('sink decode, log mode (value parsed whole)', sinkDecodeGeneral, sinkDecodeGeneral),
    row('sink decode, upsert (orders) by offset', upsertByOffset, upsertByOffset),
    row('sink decode, upsert (orders) by version', upsertByVersion, upsertByOffset),
    '',
  ].join('\n'),
);
