// Issue 37 item 6 against the stack: ties of a version. Two records of a key with the same version are
// ordered by Cassandra's rule for equal write timestamps, not by the offset, once they are in different
// batches or on different partitions: a delete wins, and between values the greater per cell. verify
// --job accepts any of the tied records' values, and still catches a value none of them has. Within a
// batch the sink settles a tie the same way: a delete wins.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, sinkYamlHead, startSinkJob, totalsLike, verifyPasses, waitSinkDrained } from '../helpers.js';

test('version ties: across partitions the greater value holds and a delete wins; verify --job accepts the tie and catches a forged value', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const file = sinkConfigFile(t, 'kv.yaml', [...sinkYamlHead(config, 'kv', 'upsert'), 'key: [id]', 'version: header.v', 'columns:', '  id: bigint', '  s: text']);
  const producer = await connectedProducer(t, config);
  const send = (partition: number, records: Array<[number, string | null, number]>) =>
    producer.send(config.topic, records.map(([id, s, v]) => ({ key: String(id), value: s === null ? null : JSON.stringify({ id, s }), partition, headers: { v: String(v) } })));
  await send(0, [
    [1, 'b', 5],
    [2, 'x', 5],
    [3, 'old', 4],
    // In one batch: a delete wins a tie whichever comes first, as it does in Cassandra.
    [4, 'y', 7],
    [4, null, 7],
    [5, null, 7],
    [5, 'z', 7],
  ]);
  await send(1, [
    [1, 'a', 5], // ties key 1's 'b' on the other partition: 'b', the greater, holds, though verify sorts 'a' last
    [2, null, 5], // a tombstone at the same version as key 2's row: the delete wins
    [3, 'new', 6],
  ]);
  await send(0, [[3, 'older', 2]]); // below key 3's version, read last
  const { args } = await startSinkJob(t, config, file);
  await waitSinkDrained(session, config, admin);

  const rows = await session.execute(`SELECT id, s, WRITETIME(s) AS wt FROM ${config.keyspace}.kv`);
  assert.deepEqual(Object.fromEntries(rows.rows.map((x) => [String(x['id']), [x['s'], String(x['wt'])]])), { '1': ['b', '5'], '3': ['new', '6'] });
  const expected = { records: 11, quarantined: 0, missing: 0, mismatched: 0, extra: 0 };
  assert.deepEqual(totalsLike((await verifyPasses(args)).totals, expected), expected);
  // 'c' wins the tie in Cassandra too, but no record of key 1 says it: caught.
  await session.execute(`INSERT INTO ${config.keyspace}.kv (id, s) VALUES (1, 'c') USING TIMESTAMP 5`);
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
  assert.match(forged.stderr, /kv key \{"id":"1"\}: s is "c", its last record \(partition \d offset 0\) says "a"/);
});
