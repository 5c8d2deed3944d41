// Strict strings (issue 15, item 3). A lone surrogate escape such as "\ud800" is valid JSON, but UTF-8
// cannot encode it: stored, it became U+FFFD, so the row differed from the record and distinct sources
// merged into one alert. An empty source is refused by Cassandra as the partition key of `alerts` once
// its window reaches the threshold, and a source over 65,535 bytes as the partition key of the alert
// index: either batch then failed forever. All of them must land in quarantine with their own reason,
// and only the valid source may alert.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test, type TestContext } from 'node:test';
import { DEFAULT_ALERT_RULE } from '../../src/jobs/events/alert-rule.js';
import { Auditor } from '../../src/verify/auditor.js';
import { MAX_CLIENT_BYTES, MAX_SOURCE_BYTES } from '../../src/jobs/events/event.js';
import { BATCH_BYTES } from '../../src/cassandra/batches.js';
import type { ConnectionConfig } from '../../src/config.js';
import { Producer } from '../../src/kafka/producer.js';
import { alertsTable, alertsTopicLatest } from '../alerts-check.js';
import { freshKeyspace, freshTopic, testConfig } from '../helpers.js';
import { assertExactlyOnce, startWorker, waitDrained, waitStarted, type Worker } from '../pipeline.js';

/** One event-time window of the default rule (5 s, aligned to the epoch): [start, start + 5000). */
const WINDOW_START = 1_700_000_000_000;
const WINDOW_END = WINDOW_START + 5000;
const PER_KIND = 12; // Critical events per kind, all in the window: above the threshold (10)
const VALID_SOURCE = 'Router A';

/** JSON string literals, written as raw text (so "\\ud800" is the six characters \ud800 on the wire). */
type Kind = { literal: string; reason: string | null };

/**
 * Sends PER_KIND Critical events of each kind into the window, interleaved and spread over the three
 * partitions, so every batch mixes good and bad records.
 */
async function produce(t: TestContext, config: ConnectionConfig, kinds: readonly Kind[]): Promise<void> {
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const records = [];
  let n = 0n;
  for (let i = 0; i < PER_KIND; i++) {
    for (const k of kinds) {
      const id = 9_007_199_254_740_993n + n++; // beyond 2^53: exact int64
      const value = `{"id":${id},"ts":${WINDOW_START + 100 + i * 400},"source":${k.literal},"client":"client ${i}","health":2}`;
      records.push({ key: `client ${i}`, value, partition: i % 3 });
    }
  }
  await producer.send(config.topic, records);
}

async function stop(worker: Worker): Promise<void> {
  assert.equal(worker.exitCode, null, `the worker is still running:\n${worker.output()}`);
  await waitStarted(worker);
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
}

/** The alerts table and the last message per key of the alerts topic hold exactly the valid source's alert. */
async function assertOnlyValidAlert(session: Awaited<ReturnType<typeof freshKeyspace>>, config: ConnectionConfig): Promise<void> {
  const only = [{ source: VALID_SOURCE, ts: WINDOW_END, eventCount: PER_KIND }];
  assert.deepEqual(await alertsTable(session, config), only, 'alerts table: the valid source only, count 12');
  assert.deepEqual((await alertsTopicLatest(config)).alerts, only, 'alerts topic: the valid source only, count 12');
}

test('lone surrogates, an empty source and an over-long source are quarantined with their reasons; only the valid source alerts', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  // Over the limit in UTF-8 bytes (1026), not in characters (513).
  const overLong = 'é'.repeat(MAX_SOURCE_BYTES / 2 + 1);
  await produce(t, config, [
    { literal: '"\\ud800"', reason: 'invalid_unicode' },
    { literal: '"\\udfff"', reason: 'invalid_unicode' },
    { literal: '""', reason: 'empty_source' },
    { literal: JSON.stringify(overLong), reason: 'field_too_long' },
    { literal: JSON.stringify(VALID_SOURCE), reason: null },
  ]);

  const worker = startWorker(t, config);
  // Without the protection an empty source's alert fails its batch forever: the worker never drains.
  await waitDrained(session, config, 180_000);
  await stop(worker);

  // Every record at its offset: the valid ones in events with every field equal, each bad one in
  // quarantine with the reason the codec gives it (the auditor decodes every record again).
  const ledger = await assertExactlyOnce(session, config);
  assert.deepEqual(ledger, {
    records: 5 * PER_KIND,
    stored: PER_KIND,
    quarantined: 4 * PER_KIND,
    reasons: { invalid_unicode: 2 * PER_KIND, empty_source: PER_KIND, field_too_long: PER_KIND },
  });
  const events = await session.execute(`SELECT source FROM ${config.keyspace}.events`);
  assert.deepEqual([...new Set(events.rows.map((r) => r['source'] as string))], [VALID_SOURCE]);
  const details = await session.execute(`SELECT reason, detail FROM ${config.keyspace}.quarantine`);
  assert.deepEqual(
    [...new Set(details.rows.map((r) => `${r['reason']}: ${r['detail']}`))].sort(),
    [
      'empty_source: source is empty',
      `field_too_long: source: 1026 bytes in UTF-8, limit ${MAX_SOURCE_BYTES}`,
      'invalid_unicode: source: a lone surrogate (not well-formed Unicode)',
    ],
  );
  await assertOnlyValidAlert(session, config);
});

test('a source beyond Cassandra\'s 65,535-byte key limit is quarantined even when --max-record-bytes lets it through', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const maxRecordBytes = 1024 * 1024;
  const huge = 'é'.repeat(35_000); // 70,000 bytes in UTF-8, 35,000 characters
  await produce(t, config, [
    { literal: JSON.stringify(huge), reason: 'field_too_long' },
    { literal: JSON.stringify(VALID_SOURCE), reason: null },
  ]);

  const worker = startWorker(t, config, ['--max-record-bytes', String(maxRecordBytes)]);
  // Without the protection Cassandra refuses the alert index's partition key, and the batch fails forever.
  await waitDrained(session, config, 180_000);
  await stop(worker);

  const report = await new Auditor(config, session, { rule: DEFAULT_ALERT_RULE, checkAlerts: false, maxRecordBytes }).run();
  assert.deepEqual(report.violations.slice(0, 20).map((v) => v.message), []);
  assert.equal(report.violationTotal, 0);
  assert.deepEqual(
    { records: report.totals.records, stored: report.totals.stored, quarantined: report.totals.quarantined },
    { records: 2 * PER_KIND, stored: PER_KIND, quarantined: PER_KIND },
  );
  const reasons = await session.execute(`SELECT reason, detail FROM ${config.keyspace}.quarantine`);
  assert.deepEqual([...new Set(reasons.rows.map((r) => `${r['reason']}: ${r['detail']}`))], [`field_too_long: source: 70000 bytes in UTF-8, limit ${MAX_SOURCE_BYTES}`]);
  await assertOnlyValidAlert(session, config);
});

test('events at the field limits (1 KiB sources, 4 KiB clients) are stored whole, every field: their batches are cut by bytes, not only by rows', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const PER_PARTITION = 1200;
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  for (let p = 0; p < 3; p++) {
    const records = Array.from({ length: PER_PARTITION }, (_, i) => {
      // Distinct at the end, so a row written from the wrong record would differ.
      const source = `s${String(i).padStart(6, '0')}`.padEnd(MAX_SOURCE_BYTES, 'S');
      const client = `c${p}-${i}-`.padEnd(MAX_CLIENT_BYTES, 'C');
      return { key: null, value: `{"id":${p * 1e6 + i},"ts":${WINDOW_START + i},"source":"${source}","client":"${client}","health":0}`, partition: p };
    });
    for (let i = 0; i < records.length; i += 200) await producer.send(config.topic, records.slice(i, i + 200));
  }
  // One partition's records in one batch (--max-batch 2000 and more) hold far more than a batch's bytes.
  assert.ok(PER_PARTITION * (MAX_SOURCE_BYTES + MAX_CLIENT_BYTES) > 4 * BATCH_BYTES);

  const worker = startWorker(t, config);
  await waitDrained(session, config, 180_000);
  await stop(worker);
  // Every record at its offset, every field equal to the record's (the auditor decodes each again).
  assert.deepEqual(await assertExactlyOnce(session, config), { records: 3 * PER_PARTITION, stored: 3 * PER_PARTITION, quarantined: 0, reasons: {} });
});
