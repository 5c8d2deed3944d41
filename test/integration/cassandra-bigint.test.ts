// Offsets as the engine hands them (issue 43, item 2): a job's `write` that passes a record's offset,
// a bigint, to a bigint column stopped every partition (`Not a valid bigint … obtained 0n`). The
// session takes a bigint wherever the driver takes a Long — prepared, unprepared, in a batch, inside a
// collection, as a varint — exactly, and still takes a Long; reads stay Long.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, fromLong, Long, toLong } from '../../src/cassandra/session.js';
import { cassandraSession, testConfig } from '../helpers.js';

const MAX = 2n ** 63n - 1n;
const MIN = -(2n ** 63n);

test('bigints are written exactly wherever a Long is (prepared, unprepared, batch, list, varint, counter), Long still is, and reads stay Long', async (t) => {
  const config = testConfig();
  const admin = await cassandraSession(t, config);
  await admin.execute(`CREATE KEYSPACE ${config.keyspace} WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`);
  await admin.execute(`CREATE TABLE ${config.keyspace}.rows (partition int, offset bigint, big list<bigint>, huge varint, at timestamp, PRIMARY KEY (partition, offset))`);
  await admin.execute(`CREATE TABLE ${config.keyspace}.counts (k int PRIMARY KEY, n counter)`);
  const session = await connect(config, { keyspace: config.keyspace });
  t.after(() => session.shutdown());

  const insert = 'INSERT INTO rows (partition, offset, big, huge, at) VALUES (?, ?, ?, ?, ?)';
  await session.execute(insert, [0, 0n, [MAX, MIN, 1n], 2n ** 100n, 1_700_000_000_123n], { prepare: true });
  await session.execute(insert, [0, toLong(1n), [toLong(2n)], null, null], { prepare: true });
  await session.batch(
    [
      { query: insert, params: [0, MAX, [], -(2n ** 70n), null] },
      { query: insert, params: [0, MIN, null, null, null] },
    ],
    { prepare: true },
  );
  // Unprepared, without type hints: the driver guesses bigint for a bigint, as for a Long.
  await session.execute(`INSERT INTO rows (partition, offset) VALUES (0, ?)`, [5n], { prepare: false });
  await session.execute('UPDATE counts SET n = n + ? WHERE k = 1', [3n], { prepare: true });

  const rows = await session.execute('SELECT offset, big, huge, at FROM rows WHERE partition = 0', [], { prepare: true });
  assert.ok(rows.rows.every((r) => r['offset'] instanceof Long), 'read as Long');
  assert.deepEqual(
    rows.rows.map((r) => [
      fromLong(r['offset'] as Long),
      (r['big'] as Long[] | null)?.map((l) => fromLong(l)) ?? null,
      r['huge'] === null ? null : String(r['huge']),
      (r['at'] as Date | null)?.getTime() ?? null,
    ]),
    [
      [MIN, null, null, null],
      [0n, [MAX, MIN, 1n], String(2n ** 100n), 1_700_000_000_123],
      [1n, [2n], null, null],
      [5n, null, null, null],
      [MAX, null, String(-(2n ** 70n)), null],
    ],
  );
  const count = (await session.execute('SELECT n FROM counts WHERE k = 1', [], { prepare: true })).first()!['n'] as Long;
  assert.equal(fromLong(count), 3n);

  // Outside int64 it is refused, not wrapped around.
  await assert.rejects(session.execute(insert, [0, MAX + 1n, null, null, null], { prepare: true }), (e: Error) => {
    assert.match(e.message, /Not a valid bigint: 9223372036854775808 is outside the 64-bit range/);
    return true;
  });
});
