// Issue 37 item 5 against the stack: where: leaves records out. The checkpoint passes them,
// exactlyonce_sink_filtered_total counts them, and verify --job proves each filtered offset was the
// rule's: a row (or a quarantine row) for a filtered offset is a violation.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, sinkYamlHead, startSinkJob, verifyPasses, waitFor, waitSinkDrained } from '../helpers.js';
import { freePort } from '../pipeline.js';

test('a log sink with where: stores only the records it holds for; filtered ones are counted, checkpointed past and proved by verify --job', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const file = sinkConfigFile(t, 'orders.yaml', [
    ...sinkYamlHead(config, 'paid_orders', 'log'),
    'where:',
    '  all:',
    '    - { field: value.status, in: [paid, shipped] }',
    '    - { not: { field: header.test, equals: "true" } }',
    'columns:',
    '  n: { type: int, required: true }',
    '  status: text',
  ]);
  const N = 40;
  const producer = await connectedProducer(t, config);
  const status = (i: number) => ['paid', 'new', 'shipped', 'cancelled'][i % 4]!;
  const test_ = (i: number) => i % 5 === 0;
  const kept = Array.from({ length: N }, (_, i) => i).filter((i) => ['paid', 'shipped'].includes(status(i)) && !test_(i));
  await producer.send(
    config.topic,
    Array.from({ length: N }, (_, i) => ({
      key: null,
      // One malformed record among the filtered ones' neighbours: quarantined, not filtered.
      value: i === 13 ? '{"n": 13, "status":' : JSON.stringify({ n: i, status: status(i) }),
      partition: i % 2,
      ...(test_(i) ? { headers: { test: 'true' } } : {}),
    })),
  );
  const port = await freePort();
  const { args } = await startSinkJob(t, config, file, ['--metrics-port', String(port)]);
  await waitSinkDrained(session, config, admin, { message: 'the checkpoints pass every record, the filtered ones too' });
  const rows = await session.execute(`SELECT n, status FROM ${config.keyspace}.paid_orders`);
  assert.deepEqual(rows.rows.map((r) => r['n'] as number).sort((a, b) => a - b), kept);
  const q = await session.execute(`SELECT reason FROM ${config.keyspace}.job_quarantine`);
  assert.deepEqual(q.rows.map((r) => r['reason']), ['bad_json']);
  const filtered = N - kept.length - 1;
  const counted = await waitFor(
    async () => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const m = /^exactlyonce_sink_filtered_total (\S+)$/m.exec(text);
      return m !== null && Number(m[1]) >= filtered ? Number(m[1]) : undefined;
    },
    { timeoutMs: 30_000, message: 'filtered records counted' },
  );
  assert.equal(counted, filtered);

  const report = await verifyPasses(args);
  assert.deepEqual(
    { ...report.totals, filtered: report.partitions.reduce((n, p) => n + (p.skipped?.['filtered'] ?? 0), 0) },
    { ...report.totals, records: N, stored: kept.length, quarantined: 1, missing: 0, extra: 0, mismatched: 0, filtered },
  );
  // A row for a filtered offset is not the rule's: verify says so.
  const first = Array.from({ length: N }, (_, i) => i).find((i) => i % 2 === 0 && !kept.includes(i) && i !== 13)!;
  await session.execute(`INSERT INTO ${config.keyspace}.paid_orders (partition, offset, n, status) VALUES (0, ?, ?, ?)`, [first / 2, first, status(first)], { prepare: true });
  const forged = await runCli(['verify', ...args, '--no-record']);
  assert.equal(forged.code, 9, forged.stdout);
  assert.match(forged.stdout, new RegExp(`partition 0 offset ${first / 2}: a paid_orders row, though the job's rule leaves the record none \\(filtered\\)`));
});
