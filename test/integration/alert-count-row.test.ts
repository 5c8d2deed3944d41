// A count row of `alert_window_counts` that Cassandra answers without one of its cells: read again while
// that may be a recovery's torn answer, then a coded stop (EO_PERMANENT_ERROR naming the row and the way
// out) rather than a partition retrying for good. Against the real Cassandra, the row changed by hand.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_ALERT_RULE } from '../../src/jobs/events/alert-rule.js';
import { AlertWriter, ruleName } from '../../src/jobs/events/alerts.js';
import { INCOMPLETE_ROW_STOP_MS } from '../../src/engine/incomplete-rows.js';
import type { Event } from '../../src/jobs/events/event.js';
import type { DecodedRecord } from '../../src/engine/job.js';
import { isExactlyOnceError } from '../../src/errors.js';
import { connectedProducer, freshKeyspace, freshTopic, testConfig } from '../helpers.js';

const WINDOW_END = 1_700_000_005_000;
function events(from: number, n: number): DecodedRecord<Event>[] {
  return Array.from({ length: n }, (_, i) => ({
    record: { topic: 't', partition: 0, offset: BigInt(from + i), key: null, value: null, timestampMs: 0 },
    value: { id: BigInt(from + i), ts: WINDOW_END - 4000 + i, source: 'router', client: 'c', health: 2 as const },
  }));
}

/** Runs `fn` with the clock `ms` ahead (the writer times how long a row has been incomplete with Date.now). */
async function later<T>(ms: number, fn: () => Promise<T>): Promise<T> {
  const now = Date.now;
  Date.now = () => now() + ms;
  try {
    return await fn();
  } finally {
    Date.now = now;
  }
}

const code = (c: string, ...mentions: RegExp[]) => (e: unknown) => {
  assert.ok(isExactlyOnceError(e), String(e));
  assert.equal(e.code, c, e.message);
  for (const m of mentions) assert.match(e.message, m);
  return true;
};

test('a count row without its through_offset: read again for a while, then the partition stops, coded; once whole again it counts on', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 1);
  const producer = await connectedProducer(t, config);
  const ks = config.keyspace;
  const key = `source = 'router' AND window_end = ? AND rule = ? AND partition = 0`;
  const rule = ruleName(DEFAULT_ALERT_RULE);
  const read = async () => {
    const r = await session.execute(`SELECT event_count, through_offset FROM ${ks}.alert_window_counts WHERE ${key}`, [new Date(WINDOW_END), rule], { prepare: true });
    const row = r.first();
    return row === null ? null : { count: row['event_count'] as number | null, through: row['through_offset'] === null ? null : Number(row['through_offset']) };
  };
  // The row as a hand-made change leaves it: a count, no through_offset (at write timestamp 0, so the
  // workers' own writes, at their offsets, win over it once it is made whole).
  await session.execute(`INSERT INTO ${ks}.alert_window_counts (source, window_end, rule, partition, event_count) VALUES ('router', ?, ?, 0, 0) USING TIMESTAMP 0`, [new Date(WINDOW_END), rule], { prepare: true });
  assert.deepEqual(await read(), { count: 0, through: null });

  const w = new AlertWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
  w.open({ session, keyspace: ks, publish: (topic, records) => producer.send(topic, records) });
  // Read again (retriable, as a node that does not answer), while it may still heal …
  await assert.rejects(w.index(0, events(0, 5)), code('EO_CASSANDRA_UNAVAILABLE', /without its through_offset; reading it again/));
  await assert.rejects(later(INCOMPLETE_ROW_STOP_MS - 5_000, () => w.index(0, events(0, 5))), code('EO_CASSANDRA_UNAVAILABLE'));
  // … and once it has been incomplete for INCOMPLETE_ROW_STOP_MS, a stop no retry undoes, naming the row and the way out.
  await assert.rejects(
    later(INCOMPLETE_ROW_STOP_MS, () => w.index(0, events(0, 5))),
    code('EO_PERMANENT_ERROR', /alert_window_counts row \(router, 2023-11-14T22:13:25\.000Z, partition 0\) has had no through_offset for 6\d s/, /exactlyonce alerts rule/),
  );
  assert.deepEqual(await read(), { count: 0, through: null }, 'nothing was written over the row meanwhile');

  // Made whole (count 0 through -1), the same writer counts the batch on top of it.
  await session.execute(`UPDATE ${ks}.alert_window_counts USING TIMESTAMP 0 SET through_offset = -1 WHERE ${key}`, [new Date(WINDOW_END), rule], { prepare: true });
  const touched = await w.index(0, events(0, 5));
  assert.deepEqual([...touched.values()], [{ source: 'router', end: WINDOW_END, added: 5 }]);
  assert.deepEqual(await read(), { count: 5, through: 4 });

  // Incomplete again later: the time it has been incomplete counts from then, not from the first time.
  await session.execute(`UPDATE ${ks}.alert_window_counts USING TIMESTAMP 5 SET through_offset = null WHERE ${key}`, [new Date(WINDOW_END), rule], { prepare: true });
  await assert.rejects(w.index(0, events(100, 3)), code('EO_CASSANDRA_UNAVAILABLE'));
  await assert.rejects(later(INCOMPLETE_ROW_STOP_MS - 5_000, () => w.index(0, events(100, 3))), code('EO_CASSANDRA_UNAVAILABLE'));
});
