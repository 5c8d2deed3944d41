import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sinkConfig, sinkConfigKeysHelp } from '../../src/sink/sink-config.js';
import { didYouMean, editDistance } from '../../src/suggest.js';
import { configProblem } from './sink-fakes.js';

const problem = (raw: unknown) => configProblem(raw, 'orders.yaml');
const base = { topic: 'shop.orders', table: 'orders', mode: 'log', columns: { total: 'decimal' } };

test('an unknown key names the key meant: tabel, requried, tpye', () => {
  const { table: _, ...noTable } = base;
  assert.equal(problem({ ...noTable, tabel: 'orders' }), 'orders.yaml: table: missing (a required key); tabel: unknown key (did you mean table?)');
  assert.equal(problem({ ...base, columns: { total: { type: 'decimal', requried: true } } }), 'orders.yaml: columns.total.requried: unknown key (did you mean required?)');
  assert.equal(problem({ ...base, columns: { total: { tpye: 'decimal' } } }), 'orders.yaml: columns.total.type: missing (a required key); columns.total.tpye: unknown key (did you mean type?)');
  assert.equal(problem({ ...base, keyformat: 'json' }), 'orders.yaml: keyformat: unknown key (did you mean keyFormat?)');
});

test('an unknown key nothing resembles lists the keys', () => {
  assert.equal(problem({ ...base, partitions: 3 }), 'orders.yaml: partitions: unknown key; the keys are name, topic, table, format, keyFormat, mode, key, ttl, ttlField, consistency, where, onUnknown, columns');
  assert.equal(problem({ ...base, columns: { total: { type: 'decimal', nullable: true } } }), 'orders.yaml: columns.total.nullable: unknown key; the keys are type, field, required, default, onNull');
});

test("a column written as a type keeps the type's message", () => {
  assert.match(problem({ ...base, columns: { total: 'money' } }), /^orders\.yaml: columns\.total: expected a CQL type: text, int, /);
  assert.match(problem({ ...base, columns: { total: { type: 'varchr' } } }), /^orders\.yaml: columns\.total\.type: expected a CQL type \(did you mean varchar\?\): text, int, /);
  assert.match(problem({ ...base, columns: { total: 'bigitn' } }), /^orders\.yaml: columns\.total: expected a CQL type \(did you mean bigint\?\): /);
});

test('sink --help lists every key of the schema and of a column', () => {
  const help = sinkConfigKeysHelp();
  for (const k of ['name', 'topic', 'table', 'format', 'keyFormat', 'mode', 'key', 'columns', 'type', 'field', 'required', 'default']) assert.match(help, new RegExp(`^ +${k} +\\S`, 'm'), k);
});

test('edit distance counts a swap of neighbours as one edit; far names get no suggestion', () => {
  assert.equal(editDistance('tabel', 'table'), 1);
  assert.equal(editDistance('requried', 'required'), 1);
  assert.equal(editDistance('colums', 'columns'), 1);
  assert.equal(didYouMean('zzz', ['table', 'topic']), '');
  assert.equal(didYouMean('mdoe', ['mode', 'name']), ' (did you mean mode?)');
});

test('consistency: LOCAL_QUORUM by default, QUORUM and EACH_QUORUM taken; levels below a quorum refused naming the key and why', () => {
  assert.equal(sinkConfig(base).consistency, 'LOCAL_QUORUM');
  assert.equal(sinkConfig({ ...base, consistency: 'QUORUM' }).consistency, 'QUORUM');
  assert.equal(sinkConfig({ ...base, consistency: 'each_quorum' }).consistency, 'EACH_QUORUM');
  for (const level of ['ONE', 'ANY', 'LOCAL_ONE', 'TWO', 'THREE']) {
    assert.match(problem({ ...base, consistency: level }), new RegExp(`^orders\\.yaml: consistency: ${level} is refused: .*a checkpoint read at a quorum after it may not see the rows it covers.*; use LOCAL_QUORUM, QUORUM, EACH_QUORUM$`), level);
  }
  assert.equal(problem({ ...base, consistency: 'LOCAL_QOURUM' }), 'orders.yaml: consistency: expected one of LOCAL_QUORUM, QUORUM, EACH_QUORUM (did you mean LOCAL_QUORUM?)');
  assert.equal(problem({ ...base, consistensy: 'QUORUM' }), 'orders.yaml: consistensy: unknown key (did you mean consistency?)');
});

test('the sink writes its rows at the configured consistency (log batches and upsert statements)', async () => {
  const { SinkJob } = await import('../../src/sink/sink-job.js');
  const { consistencies } = await import('../../src/cassandra/session.js');
  const seen: unknown[] = [];
  const session = { batch: async (_q: unknown, o: { consistency: unknown }) => void seen.push(o.consistency), execute: async (_q: unknown, _p: unknown, o: { consistency: unknown }) => void seen.push(o.consistency) };
  const record = (value: string, key: string | null) => ({ record: { topic: 't', partition: 0, offset: 1n, key: key === null ? null : Buffer.from(key), value: Buffer.from(value), timestampMs: 0 }, value: undefined as never });
  for (const [mode, extra, level] of [
    ['log', {}, consistencies.quorum],
    ['upsert', { key: ['id'], columns: { id: 'bigint', total: 'decimal' } }, consistencies.eachQuorum],
  ] as const) {
    seen.length = 0;
    const job = new SinkJob(sinkConfig({ ...base, mode, ...extra, consistency: level === consistencies.quorum ? 'QUORUM' : 'EACH_QUORUM' }));
    Object.assign(job, { session, keyspace: 'ks' });
    const r = record('{"id": 1, "total": 2}', mode === 'upsert' ? '1' : null);
    const d = job.decode(r.record);
    assert.ok(d.ok);
    await job.write(0, [{ record: r.record, value: d.value }], new AbortController().signal);
    assert.deepEqual(seen, [level], mode);
  }
});
