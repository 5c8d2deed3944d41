// Two workers recount one window at the same time and the smaller count lands last: the alert must
// not go down, in the table or as the last message on the alerts topic.
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import { DEFAULT_ALERT_RULE, type Alert } from '../../src/jobs/events/alert-rule.js';
import { AlertWriter } from '../../src/jobs/events/alerts.js';
import type { Event } from '../../src/jobs/events/event.js';
import type { DecodedRecord, JobContext } from '../../src/engine/job.js';
import type { Client } from '../../src/cassandra/session.js';
import type { ConnectionConfig } from '../../src/config.js';
import { connectedProducer, freshKeyspace, freshTopic, testConfig, waitFor } from '../helpers.js';
import { sleep } from '../pipeline.js';
import { alertsTable, alertsTopicLatest } from '../alerts-check.js';

/** An AlertWriter whose store waits for a gate: it holds its (stale) count back until released. */
class HeldWriter extends AlertWriter {
  counted: number | undefined;
  release!: () => void;
  private readonly gate = new Promise<void>((r) => (this.release = r));
  protected override async store(a: Alert): Promise<void> {
    this.counted = a.eventCount;
    await this.gate;
    await super.store(a);
  }
}

const WINDOW_END = 1_700_000_005_000;
function events(partition: number, from: number, n: number): DecodedRecord<Event>[] {
  return Array.from({ length: n }, (_, i) => ({
    record: { topic: 't', partition, offset: BigInt(from + i), key: null, value: null, timestampMs: 0 },
    value: { id: BigInt(from + i), ts: WINDOW_END - 4000 + i, source: 'router', client: 'c', health: 2 as const },
  }));
}

/** A fresh keyspace and topic, and the context an alert writer runs in (publishing through a real producer). */
async function jobContext(t: TestContext): Promise<{ config: ConnectionConfig; session: Client; ctx: JobContext }> {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const producer = await connectedProducer(t, config);
  return { config, session, ctx: { session, keyspace: config.keyspace, publish: (topic, records) => producer.send(topic, records) } };
}

test('a stale, smaller recount landing last never lowers the alert, in the table or on the topic', async (t) => {
  const { config, session, ctx } = await jobContext(t);

  // Watch the row: it may appear and grow, never shrink.
  const seen: number[] = [];
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      const r = await session.execute(`SELECT event_count FROM ${config.keyspace}.alerts WHERE source = 'router'`);
      if (r.rowLength > 0) seen.push(r.first()['event_count'] as number);
      await sleep(2);
    }
  })();

  // Worker A (partition 0) indexes 10 events and counts 10, then stalls before storing.
  const a = new HeldWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
  a.open(ctx);
  const aDone = a.update(await a.index(0, events(0, 0, 10)));
  await waitFor(() => a.counted !== undefined, { timeoutMs: 30_000, message: 'A has counted' });
  assert.equal(a.counted, 10);

  // Worker B (partition 1) adds 5 more, counts 15, stores and publishes 15.
  const b = new AlertWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
  b.open(ctx);
  assert.deepEqual(await b.update(await b.index(1, events(1, 0, 5))), { raised: 0, revised: 1 });
  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: WINDOW_END, eventCount: 15 }]);

  // Now A's stale 10 lands last.
  a.release();
  assert.deepEqual(await aDone, { raised: 1, revised: 0 });
  watching = false;
  await watcher;

  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: WINDOW_END, eventCount: 15 }]);
  const topic = await alertsTopicLatest(config);
  assert.deepEqual(topic.alerts, [{ source: 'router', ts: WINDOW_END, eventCount: 15 }], 'the last message is 15 again');
  assert.equal(topic.messages, 3, 'B published 15; A published its stale 10, read back 15 and published 15');
  assert.ok(seen.length > 0);
  assert.deepEqual(seen, [...seen].sort((x, y) => x - y), 'the row never went down');
  assert.ok(seen.every((n) => n === 15), `only 15 was ever stored (${[...new Set(seen)].join(',')})`);
});

test('many concurrent recounts of one window converge on the exact count', async (t) => {
  const { config, session, ctx } = await jobContext(t);
  const writers = Array.from({ length: 8 }, () => {
    const w = new AlertWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
    w.open(ctx);
    return w;
  });
  // 8 "workers" × 5 rounds × 7 events, concurrently, each on its own partition.
  for (let round = 0; round < 5; round++) {
    await Promise.all(writers.map(async (w, p) => w.update(await w.index(p, events(p, round * 7, 7)))));
  }
  const total = 8 * 5 * 7;
  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: WINDOW_END, eventCount: total }]);
  assert.deepEqual((await alertsTopicLatest(config)).alerts, [{ source: 'router', ts: WINDOW_END, eventCount: total }]);
});

test("a partition's count never counts an offset twice nor goes down: replays, a new owner without the cache, a zombie's stale write", async (t) => {
  const { config, session, ctx } = await jobContext(t);
  const row = async () => {
    const r = await session.execute(`SELECT partition, event_count, through_offset FROM ${config.keyspace}.alert_window_counts WHERE source = 'router' AND window_end = ? AND rule = 'h2/5000/5000'`, [new Date(WINDOW_END)]);
    return r.rows.map((x) => [x['partition'] as number, x['event_count'] as number, String(x['through_offset'])]);
  };
  const writer = () => {
    const w = new AlertWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
    w.open(ctx);
    return w;
  };
  // A owns partition 0 and stores offsets 0..9.
  const a = writer();
  assert.deepEqual(await a.update(await a.index(0, events(0, 0, 10))), { raised: 1, revised: 0 });
  assert.deepEqual(await row(), [[0, 10, '9']]);
  // The same batch again (a retry): nothing new, the alert is published again.
  assert.deepEqual(await a.update(await a.index(0, events(0, 0, 10))), { raised: 0, revised: 1 });
  assert.deepEqual(await row(), [[0, 10, '9']]);
  // B takes the partition over from an older checkpoint (5): it reads the row back and adds only 10..14.
  const b = writer();
  const touched = await b.index(0, events(0, 5, 10));
  assert.equal(touched.get(`router@${WINDOW_END}`)!.added, 5);
  await b.update(touched);
  assert.deepEqual(await row(), [[0, 15, '14']]);
  // A, now a zombie, continues from its own cache: 10..12 makes its (correct) 13 through 12, which loses.
  await a.update(await a.index(0, events(0, 10, 3)));
  assert.deepEqual(await row(), [[0, 15, '14']], "the zombie's smaller count does not land");
  // ...and 13..17 makes 18 through 17, which is right and wins.
  await a.update(await a.index(0, events(0, 13, 5)));
  assert.deepEqual(await row(), [[0, 18, '17']]);
  // B's next batch 15..19 continues its cache: 20 through 19.
  await b.update(await b.index(0, events(0, 15, 5)));
  assert.deepEqual(await row(), [[0, 20, '19']]);
  // Another partition adds to the same window: the alert is the sum.
  await b.update(await b.index(1, events(1, 0, 4)));
  assert.deepEqual(await row(), [[0, 20, '19'], [1, 4, '3']]);
  assert.deepEqual(await alertsTable(session, config), [{ source: 'router', ts: WINDOW_END, eventCount: 24 }]);
  assert.deepEqual((await alertsTopicLatest(config)).alerts, [{ source: 'router', ts: WINDOW_END, eventCount: 24 }]);
});

test('concurrent writers whose batches span several windows and sources converge on the exact count of each, in the table and on the topic', async (t) => {
  const { config, session, ctx } = await jobContext(t);
  const sources = ['router', 'switch'];
  // Each batch of partition p: 12 events per source in each of three 5 s windows (ends WINDOW_END + 0, 5000, 10000).
  const batch = (p: number, round: number): DecodedRecord<Event>[] => {
    const out: DecodedRecord<Event>[] = [];
    for (let k = 0; k < 3 * sources.length * 12; k++) {
      const offset = round * 72 + k;
      const window = k % 3;
      out.push({
        record: { topic: 't', partition: p, offset: BigInt(offset), key: null, value: null, timestampMs: 0 },
        value: { id: BigInt(p * 1e6 + offset), ts: WINDOW_END - 4000 + window * 5000 + (k % 1000), source: sources[Math.floor(k / 3) % 2]!, client: 'c', health: 2 as const },
      });
    }
    return out;
  };
  const writers = Array.from({ length: 6 }, () => {
    const w = new AlertWriter(DEFAULT_ALERT_RULE, config.alertsTopic);
    w.open(ctx);
    return w;
  });
  for (let round = 0; round < 4; round++) {
    await Promise.all(writers.map(async (w, p) => w.update(await w.index(p, batch(p, round)))));
  }
  // 6 partitions × 4 rounds × 12 events of each source in each window.
  const expected = [0, 5000, 10000].flatMap((d) => sources.map((source) => ({ source, ts: WINDOW_END + d, eventCount: 6 * 4 * 12 })));
  assert.deepEqual(await alertsTable(session, config), expected);
  assert.deepEqual((await alertsTopicLatest(config)).alerts, expected);
});
