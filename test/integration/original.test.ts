import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freshKeyspace, freshTopic, testConfig } from '../helpers.js';
import { assertExactlyOnce, generate, startWorker, waitDrained } from '../pipeline.js';

// The original system's integration test: 10 events per key from the generator, then the rows.
// It expected "at least 10 rows"; we expect exactly the 30 events, each once, fields equal.
test('the original test: 10 events per key become exactly 30 rows in events', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const worker = startWorker(t, config);
  const out = await generate(config, ['--events-per-key', '10']);
  assert.match(out, /^sent 30 events \(0 malformed\) to .* seed \d+\n\d+ sent per second\n$/);
  await waitDrained(session, config);
  const ledger = await assertExactlyOnce(session, config);
  assert.deepEqual(ledger, { records: 30, stored: 30, quarantined: 0, reasons: {} });
  const rows = await session.execute(`SELECT client, source, health FROM ${config.keyspace}.events`);
  assert.equal(rows.rowLength, 30);
  const perClient = new Map<string, number>();
  for (const r of rows.rows) {
    assert.equal(r['source'], 'My Router');
    assert.equal(r['health'], 2);
    perClient.set(r['client'], (perClient.get(r['client']) ?? 0) + 1);
  }
  assert.deepEqual(Object.fromEntries(perClient), {
    'Airmiles Rewards Network': 10,
    "Spongebob's Undersea Adventure Network": 10,
    "Dr. Evil's Secret Comms Network": 10,
  });
  worker.kill('SIGTERM');
  const code = await new Promise((r) => worker.on('exit', r));
  assert.equal(code, 0, worker.output());
});
