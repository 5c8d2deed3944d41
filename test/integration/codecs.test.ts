// Real producers compress: a partition holding a batch the client cannot decompress stalls forever
// (a client built without zstd did exactly that). Records written with every codec Kafka producers use,
// each codec into its own partition, must all be stored, with the fields of the record.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { connectedProducer, freshKeyspace, freshTopic, testConfig } from '../helpers.js';
import { assertExactlyOnce, startWorker, waitDrained } from '../pipeline.js';

const CODECS = ['none', 'gzip', 'snappy', 'lz4', 'zstd'] as const;
const PER_CODEC = 200;

test('records compressed with none, gzip, snappy, lz4 and zstd are all stored', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, CODECS.length);

  const expected: Array<[number, number, string, string, string, number]> = [];
  for (const [partition, codec] of CODECS.entries()) {
    const producer = await connectedProducer(t, config, { 'compression.type': codec, 'linger.ms': 50 });
    const records = Array.from({ length: PER_CODEC }, (_, i) => {
      const id = `${partition + 1}${String(i).padStart(15, '0')}1`; // beyond 2^53: exact int64 through every codec
      const ts = 1_700_000_000_000 + i;
      expected.push([partition, i, id, String(ts), `${codec}-source`, i % 3]);
      return { key: `k${i}`, value: `{"id":${id},"ts":${ts},"source":"${codec}-source","client":"${codec}-client-${i % 7}","health":${i % 3}}`, partition };
    });
    await producer.send(config.topic, records);
  }

  const worker = startWorker(t, config);
  // Generous, but far below waitDrained's default: a codec the client cannot read stalls its partition.
  await waitDrained(session, config, 180_000);
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());

  const ledger = await assertExactlyOnce(session, config);
  assert.deepEqual(ledger, { records: CODECS.length * PER_CODEC, stored: CODECS.length * PER_CODEC, quarantined: 0, reasons: {} });
  const rows: Array<[number, number, string, string, string, number]> = [];
  for (const partition of CODECS.keys()) {
    const r = await session.execute(`SELECT partition, offset, id, ts, source, health FROM ${config.keyspace}.events WHERE partition = ?`, [partition], { prepare: true, fetchSize: 1000 });
    for (const row of r.rows) rows.push([row['partition'] as number, Number(row['offset']), String(row['id']), String((row['ts'] as Date).getTime()), row['source'] as string, row['health'] as number]);
  }
  rows.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  assert.deepEqual(rows, expected);
});
