// Issue 37 item 4 against the stack: onNull per column. An upsert key's row is the merge of its
// records in offset order when a column is unset (no cell, no tombstone: the earlier value stays),
// across batches; a delete clears it; verify --job models the merge, and a cell changed behind the
// sink's back is still a violation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, sinkYamlHead, startSinkJob, verifyPasses, waitSinkDrained } from '../helpers.js';

test('upsert with onNull unset, null and default: the row merges the key\'s records in offset order (across batches, reset by a delete); verify --job exact, a forged cell caught', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const file = sinkConfigFile(t, 'profiles.yaml', [
    ...sinkYamlHead(config, 'profiles', 'upsert'),
    'key: [id]',
    'columns:',
    '  id: bigint',
    '  email: { type: text, onNull: unset }',
    '  city: { type: text, onNull: unset }',
    '  note: { type: text, onNull: "null" }',
    '  tier: { type: text, default: basic, onNull: default }',
  ]);
  const producer = await connectedProducer(t, config);
  const send = (records: Array<[number, Record<string, unknown> | null]>) =>
    producer.send(config.topic, records.map(([id, v]) => ({ key: String(id), value: v === null ? null : JSON.stringify({ id, ...v }) })));
  // Batch one: key 1 in full, then without email (kept) and with city null (kept: unset); key 2 then deleted; key 3 once.
  await send([
    [1, { email: 'a@x', city: 'Oslo', note: 'n1', tier: 'gold' }],
    [1, { city: null }],
    [2, { email: 'b@x', city: 'Rome' }],
    [2, null],
    [3, { email: 'c@x' }],
  ]);
  const { args } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin);
  // Batch two, after the first is stored: key 1 gets a city only; key 2 comes back with a city only
  // (its email was deleted with it); key 3 gets a note.
  await send([
    [1, { city: 'Bergen' }],
    [2, { city: 'Milan' }],
    [3, { note: 'n3' }],
  ]);
  await waitSinkDrained(session, config, admin);
  const rows = await session.execute(`SELECT id, email, city, note, tier FROM ${config.keyspace}.profiles`);
  const byId = Object.fromEntries(rows.rows.map((r) => [String(r['id']), [r['email'], r['city'], r['note'], r['tier']]]));
  assert.deepEqual(byId, {
    '1': ['a@x', 'Bergen', null, 'basic'], // email kept from the first record; note null and tier default as the last record says
    '2': [null, 'Milan', null, 'basic'],
    '3': ['c@x', null, 'n3', 'basic'],
  });
  const report = await verifyPasses(args);
  assert.deepEqual({ ...report.totals, records: report.totals.records }, { ...report.totals, records: 8, missing: 0, mismatched: 0, extra: 0 });
  // The merged value is proved, not skipped: key 1's email changed behind the sink, at the write time
  // the sink gave it (a tie Cassandra breaks by the larger value, 'forged'), is a mismatch.
  const wt = (await session.execute(`SELECT WRITETIME(email) AS wt FROM ${config.keyspace}.profiles WHERE id = 1`)).rows[0]!['wt'];
  await session.execute(`UPDATE ${config.keyspace}.profiles USING TIMESTAMP ? SET email = 'forged' WHERE id = 1`, [wt], { prepare: true });
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
  assert.match(forged.stdout, /profiles key \{"id":"1"\}: email is "forged", its last record \(partition \d offset \d+\) says "a@x"/);
});
