// Long records against the real servers, at their defaults: the worker's batches are bounded by bytes
// as well as by records (src/kafka/consumer.ts MAX_BATCH_BYTES: 2,000 records of 30 KB, decoded, did
// not fit its 160 MiB heap, and it died), and a log-mode sink's Cassandra batches by bytes as well as by
// rows (1,000 rows of them would be one mutation of ~30 MiB; one may take half a commit log segment).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { BATCH_BYTES, ROWS_PER_BATCH } from '../../src/cassandra/batches.js';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, startSinkJob, waitSinkDrained } from '../helpers.js';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

test('a log-mode sink stores records of 30 KB each whole: its batches are cut by bytes, not only by rows', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 1);
  const columns = { n: { type: 'int', required: true }, body: { type: 'text', required: true } };
  const sinkFile = sinkConfigFile(t, 'pages.json', JSON.stringify({ name: 'pages', topic: config.topic, table: 'pages', mode: 'log', columns }));
  const N = 1200;
  const BODY = 30_000;
  // Distinct at both ends, so a row written from the wrong record would differ.
  const body = (i: number) => `${i}:`.padEnd(BODY - 8, 'x') + String(i).padStart(8, '0');
  // One partition's records in one batch (--max-batch 2000) hold far more than a mutation may.
  assert.ok(ROWS_PER_BATCH * BODY > 16 * 2 ** 20 && BODY < BATCH_BYTES);
  const producer = await connectedProducer(t, config);
  for (let i = 0; i < N; i += 100) {
    await producer.send(config.topic, Array.from({ length: 100 }, (_, k) => ({ key: null, value: JSON.stringify({ n: i + k, body: body(i + k) }), partition: 0 })));
  }

  const { args, worker } = await startSinkJob(t, config, sinkFile, ['--max-batch', '2000']);
  // A worker that died (out of heap, as one did before batches were bounded by bytes) is named, saying why.
  await waitSinkDrained(session, config, admin, { timeoutMs: 240_000, intervalMs: 500, worker });
  assert.equal(worker.exitCode, null, worker.output().slice(-600));
  assert.doesNotMatch(worker.output(), /EO_[A-Z_]+/, 'no coded error: nothing stopped, nothing refused');

  const all: string[] = [];
  let pageState: string | undefined;
  do {
    const r = await session.execute(`SELECT offset, n, body FROM ${config.keyspace}.pages WHERE partition = 0`, [], { prepare: true, fetchSize: 200, pageState });
    for (const row of r.rows) all.push(`${row['offset']} ${row['n']} ${sha(row['body'] as string)}`);
    pageState = r.pageState ?? undefined;
  } while (pageState !== undefined);
  // The table keeps offsets in descending order (the sink's log layout).
  all.sort((a, b) => Number(a.split(' ')[0]) - Number(b.split(' ')[0]));
  assert.deepEqual(all, Array.from({ length: N }, (_, i) => `${i} ${i} ${sha(body(i))}`));
  const quarantined = await session.execute(`SELECT offset FROM ${config.keyspace}.job_quarantine`);
  assert.equal(quarantined.rowLength, 0);

  const verify = await runCli(['verify', ...args]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
});
