// Issue 37 item 3: a TTL per table (ttl) or per record (ttlField); rows expire at record time + TTL
// whenever they are written, and verify --job expects an expired row's absence.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { ttlLeft } from '../../src/jobs/sink/row-ttl.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { configProblem } from './sink-fakes.js';

const problem = (raw: unknown) => configProblem(raw);
const base = { topic: 't', table: 'tb', mode: 'log', columns: { n: 'int' } };
const T = 1_767_225_600_000;
const rec = (value: string, headers?: Array<[string, string]>): SourceRecord => ({
  topic: 't',
  partition: 0,
  offset: 3n,
  key: null,
  value: Buffer.from(value),
  timestampMs: T,
  ...(headers === undefined ? {} : { headers: headers.map(([n, v]) => [n, Buffer.from(v)] as const) }),
});

test('ttl: units s, m, h, d; anything else, both keys, too long or a metadata field is refused naming the key', () => {
  assert.deepEqual(sinkConfig({ ...base, ttl: '7d' }).ttl, { seconds: 7 * 86_400 });
  assert.deepEqual(sinkConfig({ ...base, ttl: '90s' }).ttl, { seconds: 90 });
  assert.deepEqual(sinkConfig({ ...base, ttl: '15m' }).ttl, { seconds: 900 });
  assert.equal(problem({ ...base, ttl: '7 days' }), 's.yaml: ttl: expected a whole number and a unit: 90s, 15m, 12h or 7d');
  assert.equal(problem({ ...base, ttl: '0s' }), 's.yaml: ttl: expected a whole number and a unit: 90s, 15m, 12h or 7d');
  assert.equal(problem({ ...base, ttl: '7301d' }), 's.yaml: ttl: 7301d is longer than the 20 years (630720000 s) Cassandra allows');
  assert.equal(problem({ ...base, ttl: '1d', ttlField: 'ttl' }), 's.yaml: ttlField: give ttl (one TTL for every row) or ttlField (one per record), not both');
  assert.equal(problem({ ...base, ttlFeild: 'ttl' }), 's.yaml: ttlFeild: unknown key (did you mean ttlField?)');
  assert.match(problem({ ...base, ttlField: 'now()' }), /^s\.yaml: ttlField: now\(\) is not a pure function of the record/);
  assert.match(problem({ ...base, ttlField: '$offset' }), /^s\.yaml: ttlField: \$offset is no number of seconds/);
});

test('the row expires at record time + TTL: its expectation says when', () => {
  const e = new SinkCodec(sinkConfig({ ...base, ttl: '1h' })).expect(rec('{"n": 1}'));
  assert.equal(e.kind === 'row' && e.expiresAtMs, T + 3_600_000);
  const up = sinkConfig({ topic: 't', table: 'tb', mode: 'upsert', key: ['id'], columns: { id: 'bigint', n: 'int' }, ttl: '1h' });
  const u = new SinkCodec(up).expect({ ...rec('{"id": 5, "n": 1}'), key: Buffer.from('5') });
  assert.equal(u.kind === 'row' && u.expiresAtMs, T + 3_600_000);
});

test('ttlField: seconds per record from the value or a header; missing, negative or not a whole number is quarantined (bad_ttl)', () => {
  const codec = new SinkCodec(sinkConfig({ ...base, ttlField: 'ttl' }));
  const e = codec.expect(rec('{"n": 1, "ttl": 60}'));
  assert.equal(e.kind === 'row' && e.expiresAtMs, T + 60_000);
  assert.deepEqual(codec.decode(rec('{"n": 1, "ttl": -5}')), { ok: false, reason: 'bad_ttl', detail: 'ttlField ttl is negative: -5' });
  assert.deepEqual(codec.decode(rec('{"n": 1, "ttl": "60"}')), { ok: false, reason: 'bad_ttl', detail: 'ttlField ttl is not a number of seconds: "60"' });
  assert.deepEqual(codec.decode(rec('{"n": 1, "ttl": 1.5}')), { ok: false, reason: 'bad_ttl', detail: 'ttlField ttl is not a whole number of seconds: 1.5' });
  assert.deepEqual(codec.decode(rec('{"n": 1}')), { ok: false, reason: 'bad_ttl', detail: 'ttlField ttl is missing' });
  const h = new SinkCodec(sinkConfig({ ...base, ttlField: 'header.ttl' }));
  const fromHeader = h.expect(rec('{"n": 1}', [['ttl', '30']]));
  assert.equal(fromHeader.kind === 'row' && fromHeader.expiresAtMs, T + 30_000);
  assert.deepEqual(h.expect(rec('{"n": 1}', [['ttl', 'soon']])), { kind: 'quarantine', reason: 'bad_ttl' });
});

test('ttlLeft: the seconds left until record time + TTL, rounded up, so a replay never extends a row; past: 0 or less', () => {
  assert.equal(ttlLeft(T + 3_600_000, T), 3600);
  assert.equal(ttlLeft(T + 3_600_000, T + 1_800_500), 1800);
  assert.equal(ttlLeft(T + 1000, T + 999), 1);
  assert.equal(ttlLeft(T, T), 0);
  assert.ok(ttlLeft(T, T + 5000) < 0);
  assert.equal(ttlLeft(T + 100 * 630_720_000_000, T), 630_720_000, "at most Cassandra's longest");
});

test('the TTL is in the stored settings (only when given: older sinks keep theirs)', () => {
  assert.equal(new SinkJob(sinkConfig({ ...base, ttl: '2h' })).settings['ttl'], '7200s');
  assert.equal(new SinkJob(sinkConfig({ ...base, ttlField: 'header.ttl' })).settings['ttlField'], 'header:ttl');
  assert.deepEqual(Object.keys(new SinkJob(sinkConfig(base)).settings).sort(), ['columns', 'key', 'mode', 'table']);
});
