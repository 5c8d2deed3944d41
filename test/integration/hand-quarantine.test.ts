// Issue 42: one record the store refuses for good stops its partition, and the stop names that record
// (not its batch) and the command that goes on without it; `quarantine add` does, the records after it
// flow, and verify --job accounts for it. The refusal is Cassandra's own: a user indexed a column of the
// sink's table, and an index refuses a value past 65,535 bytes (the sink's own limits cannot know it).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { applySinkSchema, connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, startCli, totalsLike, verifyPasses, waitFor } from '../helpers.js';

test('a record the store refuses stops its partition naming it; quarantine add goes on without it, exactly, and verify --job agrees', async (t) => {
  const { config, session } = await freshKeyspaceAndTopic(t, 1);
  const sinkFile = sinkConfigFile(t, 'notes.yaml', [`name: notes`, `topic: ${config.topic}`, 'table: notes', 'mode: log', 'columns:', '  n: int', '  note: text']);
  const args = await applySinkSchema(config, sinkFile);
  await session.execute(`CREATE INDEX notes_note ON ${config.keyspace}.notes (note)`);
  const REFUSED = 2;
  const N = 6;
  const producer = await connectedProducer(t, config);
  const values = Array.from({ length: N }, (_, i) => JSON.stringify({ n: i, note: i === REFUSED ? 'x'.repeat(70_000) : `note ${i}` }));
  await producer.send(config.topic, values.map((value) => ({ key: null, value })));
  const refusedBytes = Buffer.byteLength(values[REFUSED]!);

  const worker = startCli(t, ['run', ...args, '--max-record-bytes', '200000']);
  const stopped = await waitFor(
    async () => (await session.execute(`SELECT stopped_code FROM ${config.keyspace}.job_partition_state WHERE job = 'notes' AND topic = ? AND partition = 0`, [config.topic])).first()?.['stopped_code'] as string | undefined,
    { timeoutMs: 120_000, message: 'partition 0 stops' },
  );
  assert.equal(stopped, 'EO_PERMANENT_ERROR');
  const stop = worker.output().split('\n').find((l) => l.includes('"code":"EO_PERMANENT_ERROR"'));
  assert.match(stop ?? '', /partition 0: a write of the record at offset 2 failed for good \(ResponseError: Cannot index value of size 70000 for index notes_note/);
  assert.match(stop ?? '', /quarantine it by hand: `exactlyonce quarantine add --job notes --partition 0 --offset 2`/);

  const beyond = await runCli(['quarantine', 'add', ...args, '--partition', '0', '--offset', '9']);
  assert.equal(beyond.code, 2);
  assert.match(beyond.stderr, /^error EO_CONFIG_INVALID: --offset: partition 0 of \S+ holds offsets 0\.\.5 \(got 9\)/);
  const add = await runCli(['quarantine', 'add', ...args, '--partition', '0', '--offset', String(REFUSED), '--detail', 'note too long for its index']);
  assert.equal(add.code, 0, add.stderr);
  assert.equal(add.stdout, `quarantined partition 0 offset 2 (${refusedBytes} bytes), reason refused\npartition 0 was stopped: it starts again from its checkpoint 0 (epoch 1); the workers pick it up within seconds\n`);

  await waitFor(
    async () => String((await session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = 'notes' AND topic = ? AND partition = 0`, [config.topic])).first()?.['next_offset']) === String(N) || undefined,
    { timeoutMs: 120_000, message: 'partition 0 reaches its log end' },
  );
  const rows = await session.execute(`SELECT offset, n, note FROM ${config.keyspace}.notes WHERE partition = 0`);
  assert.deepEqual(rows.rows.map((r) => [String(r['offset']), r['n'], r['note']]).sort((a, b) => Number(a[0]) - Number(b[0])), [0, 1, 3, 4, 5].map((i) => [String(i), i, `note ${i}`]));
  const q = await session.execute(`SELECT offset, reason, detail, raw_length FROM ${config.keyspace}.job_quarantine WHERE job = 'notes' AND partition = 0`);
  assert.deepEqual(q.rows.map((r) => [String(r['offset']), r['reason'], r['detail'], r['raw_length']]), [['2', 'refused', 'quarantined by hand: note too long for its index', refusedBytes]]);
  assert.match(worker.output(), /"msg":"partition 0: offset 2, refused by the store, is quarantined by hand: going on without it"/);

  const expected = { records: N, stored: N - 1, quarantined: 1, missing: 0, mismatched: 0 };
  assert.deepEqual(totalsLike((await verifyPasses(args)).totals, expected), expected);
});
