// Issue 37 item 6: `version:` orders an upsert sink's records by a field that grows per key instead of
// the offset. What a record's version is (a number, a timestamp, ISO text; from the value, a header,
// $timestamp or a Debezium change event's source), what is refused at start, and each bad version
// quarantined with its own reason.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { versionOf } from '../../src/jobs/sink/row-version.js';
import { configProblem } from './sink-fakes.js';

const rec = (key: string | null, value: unknown, o: { offset?: bigint; headers?: Array<[string, Buffer]>; timestampMs?: number } = {}): SourceRecord => ({
  topic: 't',
  partition: 3,
  offset: o.offset ?? 9n,
  key: key === null ? null : Buffer.from(key),
  value: value === null ? null : Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)),
  timestampMs: o.timestampMs ?? 1_765_000_000_000,
  ...(o.headers === undefined ? {} : { headers: o.headers }),
});
const base = { topic: 't', table: 'kv', mode: 'upsert', key: ['id'], columns: { id: 'bigint', v: 'text' } };

test('versionOf: whole numbers and timestamps below 2^44 are versions; anything else is why not', () => {
  assert.deepEqual(versionOf(0, 'v'), { ok: true, version: 0 });
  assert.deepEqual(versionOf(12345678901n, 'v'), { ok: true, version: 12345678901 });
  assert.deepEqual(versionOf(new Date(1_765_000_000_123), 'v'), { ok: true, version: 1_765_000_000_123 });
  assert.deepEqual(versionOf('2025-12-06T05:46:40.123Z', 'v'), { ok: true, version: Date.parse('2025-12-06T05:46:40.123Z') });
  assert.deepEqual(versionOf('2025-12-06T06:46:40.123+01:00', 'v'), { ok: true, version: Date.parse('2025-12-06T05:46:40.123Z') });
  assert.deepEqual(versionOf(17592186044415, 'v'), { ok: true, version: 17592186044415 });
  const why = (v: unknown) => {
    const r = versionOf(v, 'value.v');
    assert.equal(r.ok, false, String(v));
    return (r as { detail: string }).detail;
  };
  assert.equal(why(undefined), 'version value.v is missing');
  assert.equal(why(null), 'version value.v is null');
  assert.equal(why(-1), 'version value.v is negative: -1');
  assert.equal(why(1.5), 'version value.v: expected a whole number (or a string of digits), got 1.5');
  assert.equal(why('soon'), 'version value.v: expected epoch milliseconds or an ISO-8601 string with a time zone (2026-01-31T12:00:00Z), got "soon"');
  assert.equal(why(true), 'version value.v: expected a whole number (or a string of digits), got true');
  assert.equal(why('2025-12-06 05:46:40Z'), 'version value.v: expected epoch milliseconds or an ISO-8601 string with a time zone (2026-01-31T12:00:00Z), got "2025-12-06 05:46:40Z"');
  assert.deepEqual(versionOf('24023928', 'v'), { ok: true, version: 24023928 }, 'a string of digits, as some converters write an int64');
  assert.match(why(17592186044416), /^version value\.v is 17592186044416, at or above 2\^44/);
  assert.match(why(1_765_000_000_000_000n), /at or above 2\^44 .*epoch microseconds/);
  assert.equal(why('1969-12-31T23:59:59Z'), 'version value.v is negative: 1969-12-31T23:59:59Z is before 1970');
});

test('the config: version is for upsert tables, from any source but $topic, $partition, $offset, never with unset cells; a stored setting that frees the topic to gain partitions', () => {
  assert.match(configProblem({ ...base, mode: 'log', key: undefined, version: 'v2' }), /version: orders an upsert table's records by key; mode log keeps every record/);
  assert.match(configProblem({ ...base, version: '$offset' }), /version: \$offset does not order a key's records across partitions/);
  assert.match(configProblem({ ...base, version: 'now()' }), /version: now\(\) is not a pure function of the record/);
  assert.match(configProblem({ ...base, columns: { id: 'bigint', v: { type: 'text', onNull: 'unset' } }, version: 'n' }), /columns\.v\.onNull: unset with a version is not supported/);
  assert.equal(configProblem({ ...base, envelope: 'debezium', version: 'updated_at' }), 's.yaml: version: updated_at: with envelope: debezium a value path is read from the change event, whose fields are source, ts_ms, after, before, op, transaction (a field of the row: after.updated_at)');
  assert.equal(configProblem({ ...base, envelope: 'debezium', version: 'source.ts_us' }), 's.yaml: version: source.ts_us counts microseconds, above the 2^44 a version stays below (where wall-clock write times begin); use the milliseconds, source.ts_ms');
  assert.ok(new SinkJob(sinkConfig({ ...base, envelope: 'debezium', version: 'after.updated_at' })));
  assert.equal(configProblem({ ...base, envelope: 'debezium', version: 'before.updated_at' }), 's.yaml: version: before.updated_at: the row before a change does not order it; name the row\'s field as after.updated_at (a delete, whose after is null, reads it from before)');
  assert.match(configProblem({ ...base, versoin: 'n' }), /versoin: unknown key \(did you mean version\?\)/);
  const plain = new SinkJob(sinkConfig(base));
  const versioned = new SinkJob(sinkConfig({ ...base, version: 'value.meta.n' }));
  assert.equal(plain.keysStayOnPartition, true);
  assert.equal(versioned.keysStayOnPartition, false);
  assert.equal(versioned.settings['version'], 'meta.n');
  assert.equal(plain.settings['version'], undefined);
  assert.equal(new SinkJob(sinkConfig({ ...base, version: 'header.rev' })).settings['version'], 'header:rev');
});

test('a row and a delete carry their version; a bad version is quarantined (bad_version), and the records after it flow', () => {
  const codec = new SinkCodec(sinkConfig({ ...base, version: 'n' }));
  const d = codec.decode(rec('7', { id: 7, v: 'a', n: 41 }));
  assert.ok(d.ok && d.value.kind === 'row');
  assert.equal(d.value.version, 41);
  assert.deepEqual(canonical(d.value.values), ['7', 'a']);
  assert.deepEqual(codec.expect(rec('7', { id: 7, v: 'a', n: 41 })), { kind: 'row', key: { id: (d.value.key as unknown[])[0] }, row: { v: 'a' }, version: 41 });
  for (const [n, detail] of [
    [undefined, 'version n is missing'],
    ['x', 'version n: expected epoch milliseconds or an ISO-8601 string with a time zone (2026-01-31T12:00:00Z), got "x"'],
    [-3, 'version n is negative: -3'],
  ] as const) {
    assert.deepEqual(codec.decode(rec('7', { id: 7, v: 'a', ...(n === undefined ? {} : { n }) })), { ok: false, reason: 'bad_version', detail });
  }
  // A problem of the row comes first (the same reason whichever way it is decoded).
  assert.equal((codec.decode(rec('8', { id: 7, v: 'a' })) as { reason: string }).reason, 'key_mismatch');
  // A tombstone has no value to read the version from: quarantined, with the way out.
  assert.deepEqual(codec.decode(rec('7', null)), { ok: false, reason: 'bad_version', detail: 'a tombstone (a record without a value) has no version n to order its delete by; with tombstones, read the version from a header or $timestamp' });
  // From a header or the Kafka timestamp, a tombstone deletes at its version.
  const byHeader = new SinkCodec(sinkConfig({ ...base, version: 'header.rev' }));
  assert.deepEqual(byHeader.decode(rec('7', null, { headers: [['rev', Buffer.from('1200')]] })), { ok: true, value: { kind: 'delete', key: (d.value.key as unknown[]), version: 1200 } });
  assert.deepEqual(byHeader.decode(rec('7', null)), { ok: false, reason: 'bad_version', detail: 'version header.rev is missing' });
  assert.deepEqual(byHeader.decode(rec('7', null, { headers: [['rev', Buffer.from('2025-12-06T05:46:40Z')]] })), { ok: true, value: { kind: 'delete', key: (d.value.key as unknown[]), version: Date.parse('2025-12-06T05:46:40Z') } });
  const byTime = new SinkCodec(sinkConfig({ ...base, version: '$timestamp' }));
  const t = byTime.decode(rec('7', { id: 7, v: 'b' }, { timestampMs: 1_765_000_000_321 }));
  assert.ok(t.ok && t.value.kind === 'row' && t.value.version === 1_765_000_000_321);
  assert.deepEqual(byTime.expect(rec('7', null, { timestampMs: 5 })), { kind: 'delete', key: { id: (d.value.key as unknown[])[0] }, version: 5 });
});

test("Debezium: the version is read from the change event (source.lsn, ts_ms), a delete carries it, and the tombstone after a delete writes nothing", () => {
  const config = sinkConfig({ ...base, envelope: 'debezium', columns: { id: 'bigint', v: 'text' }, version: 'source.lsn' });
  const codec = new SinkCodec(config);
  const source = { connector: 'postgresql', lsn: 24023928, ts_ms: 1733480000000 };
  const event = (op: string, lsn: number, after: object | null, before: object | null = null) => ({ before, after, source: { ...source, lsn }, op, ts_ms: 1733480000123 });
  const key = JSON.stringify({ id: 7 });
  const u = codec.decode(rec(key, event('u', 24023990, { id: 7, v: 'b' })));
  assert.ok(u.ok && u.value.kind === 'row' && u.value.version === 24023990);
  const withSchemas = codec.decode(rec(key, { schema: { type: 'struct' }, payload: event('c', 24023000, { id: 7, v: 'a' }) }));
  assert.ok(withSchemas.ok && withSchemas.value.kind === 'row' && withSchemas.value.version === 24023000);
  const del = codec.decode(rec(key, event('d', 24024100, null, { id: 7, v: 'b' })));
  assert.ok(del.ok && del.value.kind === 'delete' && del.value.version === 24024100);
  assert.deepEqual(codec.expect(rec(key, null)), { kind: 'none', why: 'tombstone' });
  assert.deepEqual(codec.decode(rec(key, { ...event('u', 0, { id: 7, v: 'b' }), source: { connector: 'postgresql' } })), { ok: false, reason: 'bad_version', detail: 'version source.lsn is missing' });
  const byTs = new SinkCodec(sinkConfig({ ...base, envelope: 'debezium', version: 'ts_ms' }));
  const r = byTs.decode(rec(key, event('r', 1, { id: 7, v: 'a' })));
  assert.ok(r.ok && r.value.kind === 'row' && r.value.version === 1733480000123);
});

test("Debezium: a version of the row (after.updated_at) is read, for a delete, from before; without it there (Postgres without REPLICA IDENTITY FULL) the delete is quarantined, saying why", () => {
  const codec = new SinkCodec(sinkConfig({ ...base, envelope: 'debezium', columns: { id: 'bigint', v: 'text' }, version: 'after.rev' }));
  const event = (op: string, after: object | null, before: object | null) => ({ before, after, source: { connector: 'mysql', file: 'mysql-bin.000003', pos: 154 }, op, ts_ms: 1733480000123 });
  const key = JSON.stringify({ id: 7 });
  const u = codec.decode(rec(key, event('u', { id: 7, v: 'b', rev: 4 }, { id: 7, v: 'a', rev: 3 })));
  assert.ok(u.ok && u.value.kind === 'row' && u.value.version === 4);
  // The delete of the row at rev 4 deletes at 4: it wins the tie with that row's write, and a later insert (rev 5) stands.
  const del = codec.decode(rec(key, event('d', null, { id: 7, v: 'b', rev: 4 })));
  assert.deepEqual(del.ok && del.value, { kind: 'delete', key: del.ok ? del.value.key : [], version: 4 });
  assert.deepEqual(codec.decode(rec(key, event('d', null, { id: 7 }))), {
    ok: false,
    reason: 'bad_version',
    detail: 'version after.rev is missing (a delete reads it from before, the deleted row: Postgres writes the whole row there only with REPLICA IDENTITY FULL)',
  });
  assert.deepEqual(codec.expect(rec(key, event('d', null, { id: 7, v: 'b', rev: 4 }))), { kind: 'delete', key: { id: (u.ok ? u.value.key : [])[0] }, version: 4 });
});
