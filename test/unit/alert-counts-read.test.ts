// A count row read back without its cells (an answer put together from replicas in the middle of a
// recovery, met once by make cluster-test) is read again, never taken as a count nor left to a TypeError
// that stops the partition for good.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_ALERT_RULE } from '../../src/jobs/events/alert-rule.js';
import { AlertWriter } from '../../src/jobs/events/alerts.js';
import type { Event } from '../../src/jobs/events/event.js';
import { isRetriable } from '../../src/engine/retry.js';
import { Long } from '../../src/cassandra/session.js';
import type { JobContext } from '../../src/engine/job.js';

function writer(answers: Array<Record<string, unknown> | null>) {
  const inserts: unknown[][] = [];
  const session = {
    execute: async (query: string, params: unknown[]) => {
      if (query.startsWith('INSERT')) {
        inserts.push(params);
        return { rows: [], first: () => null };
      }
      const row = answers.shift() ?? null;
      return { rows: row === null ? [] : [row], first: () => row };
    },
  };
  const w = new AlertWriter(DEFAULT_ALERT_RULE, 'alerts');
  w.open({ session, keyspace: 'ks', publish: async () => undefined } as unknown as JobContext);
  return { w, inserts };
}

const event = (offset: bigint) => ({
  record: { topic: 't', partition: 0, offset, key: null, value: null, timestampMs: 0 },
  value: { id: 1n, ts: 1_000, source: 's', client: 'c', health: DEFAULT_ALERT_RULE.health } as Event,
});

test('a count row without its through_offset or its event_count is read again (a retriable error), nothing is written', async () => {
  for (const row of [{ event_count: 3, through_offset: null }, { event_count: null, through_offset: Long.fromNumber(4) }, { event_count: null, through_offset: null }]) {
    const { w, inserts } = writer([row]);
    await assert.rejects(w.index(0, [event(5n)]), (e: Error & { code?: string }) => {
      assert.equal(e.code, 'EO_CASSANDRA_UNAVAILABLE');
      assert.match(e.message, /^ks\.alert_window_counts answered the row \(s, .*, partition 0\) without its (through_offset|event_count); reading it again$/);
      assert.equal(isRetriable(e), true);
      return true;
    });
    assert.deepEqual(inserts, []);
  }
});

test('a whole count row is counted on: the batch adds to it', async () => {
  const { w, inserts } = writer([{ event_count: 3, through_offset: Long.fromNumber(4) }]);
  await w.index(0, [event(5n)]);
  // The offset and the write timestamp are bound as Longs (exact beyond 2^53).
  assert.deepEqual(inserts.map((p) => [p[4], String(p[5]), String(p[6])]), [[4, '5', '5']]);
});
