// Issue 37 item 5: where: a declarative predicate over any column source; filtered records leave nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { configProblem } from './sink-fakes.js';

const problem = (raw: unknown) => configProblem(raw);
const base = { topic: 't', table: 'tb', mode: 'log', columns: { status: 'text' } };
const rec = (value: string | null, o: { key?: string; headers?: Array<[string, string]>; partition?: number } = {}): SourceRecord => ({
  topic: 't',
  partition: o.partition ?? 0,
  offset: 5n,
  key: o.key === undefined ? null : Buffer.from(o.key),
  value: value === null ? null : Buffer.from(value),
  timestampMs: 0,
  ...(o.headers === undefined ? {} : { headers: o.headers.map(([n, v]) => [n, Buffer.from(v)] as const) }),
});
const kind = (where: unknown, r: SourceRecord, extra: Record<string, unknown> = {}) => new SinkCodec(sinkConfig({ ...base, ...extra, where })).expect(r).kind;

test('where: equals, in, exists, not, all, any over value, header, key and metadata fields', () => {
  const paid = rec('{"status": "paid", "total": 10.0, "coupon": null}', { headers: [['source', 'web'], ['n', '7']], key: '{"shop": "s1"}', partition: 2 });
  assert.equal(kind({ field: 'value.status', equals: 'paid' }, paid), 'row');
  assert.equal(kind({ field: 'status', equals: 'new' }, paid), 'none');
  assert.equal(kind({ field: 'total', equals: 10 }, paid), 'row', 'numbers by value: 10.0 equals 10');
  assert.equal(kind({ field: 'total', equals: '10' }, paid), 'none', 'a number is not the text "10"');
  assert.equal(kind({ field: 'header.source', in: ['app', 'web'] }, paid), 'row');
  assert.equal(kind({ field: 'header.n', equals: 7 }, paid), 'row', "a header's text compares as a number with a number");
  assert.equal(kind({ field: 'key.shop', equals: 's1' }, paid), 'row');
  assert.equal(kind({ field: '$partition', in: [1, 2] }, paid), 'row');
  assert.equal(kind({ field: 'coupon', exists: true }, paid), 'none', 'null is not there');
  assert.equal(kind({ field: 'coupon', exists: false }, paid), 'row');
  assert.equal(kind({ field: 'nothing', equals: 'x' }, paid), 'none', 'a missing field equals nothing');
  assert.equal(kind({ not: { field: 'header.source', equals: 'web' } }, paid), 'none');
  assert.equal(kind({ all: [{ field: 'status', equals: 'paid' }, { field: 'header.source', equals: 'app' }] }, paid), 'none');
  assert.equal(kind({ any: [{ field: 'status', equals: 'new' }, { field: 'header.source', equals: 'web' }] }, paid), 'row');
  assert.deepEqual(new SinkCodec(sinkConfig({ ...base, where: { field: 'status', equals: 'x' } })).expect(paid), { kind: 'none', why: 'filtered' });
});

test('where: a record that cannot be decoded is still quarantined; an upsert tombstone is never filtered', () => {
  assert.deepEqual(new SinkCodec(sinkConfig({ ...base, where: { field: 'status', equals: 'x' } })).expect(rec('{"status":')), { kind: 'quarantine', reason: 'bad_json' });
  const up = sinkConfig({ topic: 't', table: 'tb', mode: 'upsert', key: ['id'], columns: { id: 'bigint', status: 'text' }, where: { field: 'status', equals: 'paid' } });
  assert.equal(new SinkCodec(up).expect(rec(null, { key: '4' })).kind, 'delete');
  assert.equal(new SinkCodec(up).expect(rec('{"id": 4, "status": "new"}', { key: '4' })).kind, 'none');
});

test('where: problems name their path; an unknown key gets did-you-mean; a mistyped top-level where too', () => {
  assert.equal(problem({ ...base, where: { field: 'status', equal: 'paid' } }), 's.yaml: where.equal: unknown key (did you mean equals?)');
  assert.equal(problem({ ...base, where: { field: 'status' } }), 's.yaml: where: expected exactly one of equals, in, exists (with field), not, all, any');
  assert.equal(problem({ ...base, where: { field: 'status', equals: 'a', in: ['b'] } }), 's.yaml: where: expected exactly one of equals, in, exists (with field), not, all, any; got equals, in');
  assert.equal(problem({ ...base, where: { all: [{ field: 'status', equals: 'a' }, { field: 'x', in: [] }] } }), 's.yaml: where.all.1.in: expected a non-empty list of texts, numbers or booleans');
  assert.equal(problem({ ...base, where: { equals: 'a' } }), 's.yaml: where.field: missing (equals needs the field it tests)');
  assert.match(problem({ ...base, where: { not: { field: 'now()', exists: true } } }), /^s\.yaml: where\.not\.field: now\(\) is not a pure function of the record/);
  assert.equal(problem({ ...base, where: { field: 'c', equals: null } }), 's.yaml: where.equals: expected a text, number or boolean (null: use exists: false)');
  assert.equal(problem({ ...base, wehre: {} }), 's.yaml: wehre: unknown key (did you mean where?)');
  assert.equal(problem({ ...base, where: 'status = paid' }), 's.yaml: where: expected a predicate: { field, equals | in | exists }, { not }, { all: [...] } or { any: [...] }');
});

test('where is in the stored settings (a worker with another rule refuses)', () => {
  assert.equal(new SinkJob(sinkConfig({ ...base, where: { not: { field: 'value.status', in: ['x'] } } })).settings['where'], '{"not":{"field":"status","in":["x"]}}');
  assert.equal(new SinkJob(sinkConfig(base)).settings['where'], undefined);
});
