// Issue 37 item 2 against the stack: columns from the record key, its headers and its metadata, stored
// by a sink worker and proved by verify --job, which reads the same headers back from the log; a
// header that does not decode is quarantined (bad_header) and the records after it flow.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, sinkYamlHead, startSinkJob, totalsLike, verifyPasses, waitSinkDrained } from '../helpers.js';

test('a log sink stores columns from the key, headers, $topic, $partition, $offset and $timestamp; verify --job proves them; a bad header is quarantined', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const sinkFile = sinkConfigFile(t, 'events.yaml', [
    ...sinkYamlHead(config, 'events', 'log', 'events_sink'),
    'columns:',
    '  n: { type: int, field: value.n }',
    '  shop: { type: text, field: key.shop }',
    '  trace: { type: text, field: header.trace }',
    '  attempt: { type: int, field: header.attempt }',
    '  src_topic: { type: text, field: $topic }',
    '  src_partition: { type: int, field: $partition }',
    '  src_offset: { type: bigint, field: $offset }',
    '  at: { type: timestamp, field: $timestamp }',
  ]);
  const producer = await connectedProducer(t, config);
  const N = 30;
  const BAD = 7; // its attempt header is not a number
  // Recent, whole seconds: a record stamped older than the topic's retention (7 days by default) is
  // deleted at the broker's next retention check, and the proof would then start past it.
  const base = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
  await producer.send(
    config.topic,
    Array.from({ length: N }, (_, i) => ({
      key: JSON.stringify({ shop: `s${i % 3}` }),
      value: JSON.stringify({ n: i }),
      partition: i % 2,
      timestampMs: base + i * 1000,
      headers: { trace: `t-${i}`, attempt: i === BAD ? 'three' : String(i % 4) },
    })),
  );
  const { args } = await startSinkJob(t, config, sinkFile);
  await waitSinkDrained(session, config, admin);
  const rows = await session.execute(`SELECT partition, offset, n, shop, trace, attempt, src_topic, src_partition, src_offset, at FROM ${config.keyspace}.events_sink`);
  assert.equal(rows.rowLength, N - 1, 'every record but the bad header');
  for (const r of rows.rows) {
    const n = r['n'] as number;
    assert.notEqual(n, BAD);
    assert.equal(r['shop'], `s${n % 3}`);
    assert.equal(r['trace'], `t-${n}`);
    assert.equal(r['attempt'], n % 4);
    assert.equal(r['src_topic'], config.topic);
    assert.equal(r['src_partition'], r['partition']);
    assert.equal(String(r['src_offset']), String(r['offset']));
    assert.equal((r['at'] as Date).getTime(), base + n * 1000);
  }
  const q = await session.execute(`SELECT reason, detail FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(q.rows.map((r) => r['reason']), ['bad_header']);
  assert.match(q.rows[0]!['detail'] as string, /^attempt \(int, field header\.attempt\): /);
  const expected = { records: N, stored: N - 1, quarantined: 1, missing: 0, mismatched: 0 };
  const report = await verifyPasses(args);
  assert.deepEqual(totalsLike(report.totals, expected), expected, JSON.stringify(report));
  // The proof covers the headers and metadata: a row changed behind the sink's back is a violation.
  await session.execute(`UPDATE ${config.keyspace}.events_sink SET trace = 'forged' WHERE partition = 0 AND offset = 0`);
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
  assert.match(forged.stdout, /partition 0 offset 0: trace is "forged", the record says "t-0"/);
});
