import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BAD_KINDS } from '../../src/jobs/events/generator.js';
import { assertAlertsExact } from '../alerts-check.js';
import { CASSANDRA, freshKeyspace, freshTopic, runCli, testConfig } from '../helpers.js';
import { assertExactlyOnce, generate, startWorker, waitDrained } from '../pipeline.js';

test('every malformed kind is quarantined with its reason, every valid record stored, the worker keeps going', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const worker = startWorker(t, config);
  await generate(config, ['--count', '2000', '--no-delay', '--bad-ratio', '0.2', '--seed', '5', '--health-mix', '0:1,1:1,2:1']);
  await waitDrained(session, config);
  assert.equal(worker.exitCode, null, 'the worker is still running');

  const ledger = await assertExactlyOnce(session, config);
  assert.equal(ledger.records, 2000);
  assert.deepEqual(Object.keys(ledger.reasons).sort(), [...BAD_KINDS].sort(), 'every malformed kind was seen and quarantined');
  assert.equal(ledger.quarantined, Object.values(ledger.reasons).reduce((a, b) => a + b, 0));
  // Alerts come from stored events only: none for a quarantined source (a lone surrogate, an empty one).
  const alerts = await assertAlertsExact(session, config);
  assert.ok(alerts.alerts > 0, 'the valid Critical events raised alerts');

  // Cut raw bytes keep their full length and hash; `quarantine list` shows them.
  const big = await session.execute(`SELECT raw, raw_length, raw_sha256 FROM ${config.keyspace}.quarantine WHERE reason = 'too_large' ALLOW FILTERING`);
  assert.ok(big.rowLength > 0);
  for (const r of big.rows) {
    assert.equal((r['raw'] as Buffer).length, 16 * 1024);
    assert.ok((r['raw_length'] as number) > 70 * 1024);
    assert.match(r['raw_sha256'] as string, /^[0-9a-f]{64}$/);
  }
  const list = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--json', '--limit', '100000']);
  assert.equal(list.code, 0, list.stderr);
  const listed = list.stdout.trim().split('\n').map((l) => JSON.parse(l) as { reason: string });
  assert.equal(listed.length, ledger.quarantined);
});
