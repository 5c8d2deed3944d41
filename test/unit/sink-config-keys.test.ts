import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { sinkConfigKeysHelp } from '../../src/jobs/sink/sink-config-keys.js';
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
  assert.equal(problem({ ...base, partitions: 3 }), 'orders.yaml: partitions: unknown key; the keys are name, topic, table, format, keyFormat, mode, key, groupBy, window, aggregates, closeAfter, closedTopic, ttl, ttlField, version, consistency, where, onUnknown, envelope, columns');
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

test('the sink writes its rows at the configured consistency (log batches, upsert batches)', async (t) => {
  const { SinkJob } = await import('../../src/jobs/sink/sink-job.js');
  const { consistencies } = await import('../../src/cassandra/session.js');
  const { PreparedBatch } = await import('../../src/cassandra/prepared-batch.js');
  // No server: each statement is "prepared" with a writer per parameter, and what is sent is recorded.
  const seen: Array<{ query: string; consistency: number; rows: number }> = [];
  t.mock.method(PreparedBatch.prototype, 'bound', async function (this: InstanceType<typeof PreparedBatch>) {
    const n = this.query.split('?').length - 1;
    return { queryId: Buffer.from(this.query.slice(0, 6)), meta: { columns: [] }, writers: Array.from({ length: n }, () => (rows: { null(): void }) => rows.null()) };
  });
  t.mock.method(PreparedBatch.prototype, 'replicaSet', async () => '');
  t.mock.method(PreparedBatch.prototype, 'send', async function (this: InstanceType<typeof PreparedBatch>, _info: unknown, rows: { count: number }) {
    seen.push({ query: this.query, consistency: this.consistency, rows: rows.count });
  });
  const record = (value: string | null, key: string | null, offset: bigint) => ({ topic: 't', partition: 0, offset, key: key === null ? null : Buffer.from(key), value: value === null ? null : Buffer.from(value), timestampMs: 0 });
  for (const [mode, extra, level] of [
    ['log', {}, consistencies.quorum],
    ['upsert', { key: ['id'], columns: { id: 'bigint', total: 'decimal' } }, consistencies.eachQuorum],
  ] as const) {
    seen.length = 0;
    const job = new SinkJob(sinkConfig({ ...base, mode, ...extra, consistency: level === consistencies.quorum ? 'QUORUM' : 'EACH_QUORUM' }));
    Object.assign(job, { statements: (job as unknown as { rowStatements(s: unknown, k: string): unknown }).rowStatements({}, 'ks') });
    const records = mode === 'log' ? [record('{"id": 1, "total": 2}', null, 1n)] : [record('{"id": 1, "total": 2}', '1', 1n), record(null, '2', 2n)];
    const decoded = records.map((r) => {
      const d = job.decode(r);
      assert.ok(d.ok);
      return { record: r, value: d.value };
    });
    await job.write(0, decoded, new AbortController().signal);
    // One batch: log mode's one row; upsert's insert of key 1 and delete of key 2, two partitions of one replica set.
    assert.deepEqual(seen.map((s) => [s.consistency, s.rows]), [[level, records.length]], mode);
  }
});
