// Issue 37 item 4: onNull per column: unset (no cell), null (a null cell), default (the default).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/kafka/record.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { UNSET } from '../../src/jobs/sink/column-values.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { configProblem } from './sink-fakes.js';

const problem = (raw: unknown) => configProblem(raw);
const rec = (value: string, key: string | null = null): SourceRecord => ({ topic: 't', partition: 0, offset: 9n, key: key === null ? null : Buffer.from(key), value: Buffer.from(value), timestampMs: 0 });

test('onNull: the default follows the column (default with a default, else null); contradictions are refused naming the key', () => {
  const c = sinkConfig({ topic: 't', table: 'tb', mode: 'log', columns: { a: 'int', b: { type: 'text', default: 'x' }, u: { type: 'text', onNull: 'unset' } } });
  assert.deepEqual(c.columns.map((x) => x.onNull), ['null', 'default', 'unset']);
  const base = { topic: 't', table: 'tb', mode: 'log' };
  assert.equal(problem({ ...base, columns: { a: { type: 'int', onNull: 'skip' } } }), 's.yaml: columns.a.onNull: expected one of unset, null, default');
  assert.equal(problem({ ...base, columns: { a: { type: 'int', onNul: 'unset' } } }), 's.yaml: columns.a.onNul: unknown key (did you mean onNull?)');
  assert.equal(problem({ ...base, columns: { a: { type: 'int', onNull: 'default' } } }), "s.yaml: columns.a.onNull: default needs the column's default (default: …)");
  assert.equal(problem({ ...base, columns: { a: { type: 'int', onNull: 'unset', default: 1 } } }), 's.yaml: columns.a.default: a default is written only with onNull: default (this column has onNull: unset)');
  assert.match(problem({ ...base, columns: { a: { type: 'int', onNull: 'null', required: true } } }), /^s\.yaml: columns\.a\.onNull: a required column quarantines/);
  const up = { topic: 't', table: 'tb', mode: 'upsert', key: ['id'] };
  assert.equal(problem({ ...up, columns: { id: { type: 'bigint', onNull: 'unset' }, a: 'int' } }), 's.yaml: columns.id.onNull: a key column is always written (a record without its key is quarantined)');
  assert.match(problem({ ...up, ttl: '1d', columns: { id: 'bigint', a: { type: 'int', onNull: 'unset' } } }), /^s\.yaml: columns\.a\.onNull: unset with a TTL in upsert mode is not supported/);
});

test('log mode: a missing or null field writes no cell (unset), a null, or the default; the expected row reads null for unset', () => {
  const c = sinkConfig({ topic: 't', table: 'tb', mode: 'log', columns: { u: { type: 'text', onNull: 'unset' }, n: { type: 'text', onNull: 'null' }, d: { type: 'text', default: 'x', onNull: 'default' } } });
  const codec = new SinkCodec(c);
  const d = codec.decode(rec('{"n": null}'));
  assert.ok(d.ok && d.value.kind === 'row');
  assert.equal(d.value.values[0], UNSET, 'bound as the driver unset: no cell, no tombstone');
  assert.deepEqual(d.value.values.slice(1), [null, 'x']);
  assert.deepEqual(canonical((codec.expect(rec('{"u": null}')) as { row: unknown }).row), { u: null, n: null, d: 'x' });
  assert.deepEqual(canonical((codec.expect(rec('{"u": "a", "n": "b", "d": "c"}')) as { row: unknown }).row), { u: 'a', n: 'b', d: 'c' });
});

test('upsert mode: the expectation names the columns a record leaves unset (the key keeps their earlier value)', () => {
  const c = sinkConfig({ topic: 't', table: 'tb', mode: 'upsert', key: ['id'], columns: { id: 'bigint', a: { type: 'int', onNull: 'unset' }, b: { type: 'text', onNull: 'unset' }, n: 'text' } });
  const e = new SinkCodec(c).expect(rec('{"id": 1, "a": 5}', '1'));
  assert.deepEqual(canonical(e), { kind: 'row', key: { id: '1' }, row: { a: 5, b: null, n: null }, unset: ['b'] });
  const full = new SinkCodec(c).expect(rec('{"id": 1, "a": 5, "b": "x"}', '1'));
  assert.equal('unset' in full, false);
});

test('settings: onNull unset changes a column\'s stored settings; null and default leave them as they were', () => {
  const cols = (spec: Record<string, unknown>) => JSON.parse(new SinkJob(sinkConfig({ topic: 't', table: 'tb', mode: 'log', columns: { c: spec } })).settings['columns']!) as unknown[][];
  assert.deepEqual(cols({ type: 'text' })[0], ['c', 'text', 'c', false, null]);
  assert.deepEqual(cols({ type: 'text', onNull: 'null' })[0], ['c', 'text', 'c', false, null]);
  assert.deepEqual(cols({ type: 'text', onNull: 'unset' })[0], ['c', 'text', 'c', false, null, 'unset']);
});
