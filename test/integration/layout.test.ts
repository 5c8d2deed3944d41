// `run --layout bucketed`: the events go to events_bucketed, one Cassandra partition per bucket of
// offsets of a Kafka partition; verify reads that layout from the job and judges it as strictly as the
// original (a row deleted is found missing); a worker asking for the other layout refuses.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { freshKeyspace, freshTopic, runCli, testConfig } from '../helpers.js';
import { connectionArgs, generate, startWorker, stopWorkers, waitDrained, waitStarted } from '../pipeline.js';

const verifyArgs = (config: ReturnType<typeof testConfig>) => ['verify', ...connectionArgs(config), '--json', '--no-record', '--skip-alerts'];

test('bucketed layout: rows spread over (partition, bucket), every bucket bounded, verify exact; another layout refuses', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const worker = startWorker(t, config, ['--layout', 'bucketed:50']);
  await waitStarted(worker);
  await generate(config, ['--count', '600', '--bad-ratio', '0.02', '--seed', '5']);
  const ends = await waitDrained(session, config);

  const r = await runCli(verifyArgs(config));
  assert.equal(r.code, 0, r.stdout.slice(-3000) + r.stderr);
  const report = JSON.parse(r.stdout) as { ok: boolean; totals: { records: number; stored: number; quarantined: number; missing: number } };
  assert.equal(report.totals.records, 600);
  assert.equal(report.totals.stored + report.totals.quarantined, 600);

  assert.equal((await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.events`)).first()['n'].toNumber(), 0, 'the original table is left empty');
  const rows = (await session.execute(`SELECT partition, bucket, offset FROM ${config.keyspace}.events_bucketed`, [], { fetchSize: 10_000 })).rows;
  assert.equal(rows.length, report.totals.stored);
  const perBucket = new Map<string, number>();
  for (const row of rows) {
    const offset = BigInt(row['offset'].toString());
    assert.equal(BigInt(row['bucket'].toString()), offset / 50n, `offset ${offset} in its bucket`);
    const k = `${row['partition']}/${row['bucket']}`;
    perBucket.set(k, (perBucket.get(k) ?? 0) + 1);
  }
  // Every offset of the log has a bucket: ⌈log end / 50⌉ per partition, each holding at most 50.
  const expectedBuckets = [...ends.values()].reduce((n, end) => n + Math.ceil(Number(end) / 50), 0);
  assert.equal(perBucket.size, expectedBuckets);
  assert.ok(Math.max(...perBucket.values()) <= 50);

  // Another layout given explicitly: the worker refuses, naming the setting.
  const other = await runCli(['run', ...connectionArgs(config), '--layout', 'original']);
  assert.equal(other.code, 5, other.stderr);
  assert.ok(
    other.stderr.includes(`error EO_JOB_CONFIG_MISMATCH: this worker differs from the job stored in keyspace ${config.keyspace}: layout: the job has "bucketed:50", this worker none.`),
    other.stderr,
  );

  await stopWorkers([worker]);
  // A stored row deleted: verify (reading the layout from the job) finds exactly that offset missing.
  const victim = rows[0]!;
  await session.execute(`DELETE FROM ${config.keyspace}.events_bucketed WHERE partition = ? AND bucket = ? AND offset = ?`, [victim['partition'], victim['bucket'], victim['offset']], { prepare: true });
  const after = await runCli(verifyArgs(config));
  assert.equal(after.code, 9, after.stderr);
  const broken = JSON.parse(after.stdout) as { totals: { missing: number }; violations: Array<{ kind: string; partition: number; offset: string }> };
  assert.equal(broken.totals.missing, 1);
  assert.deepEqual(
    broken.violations.map((v) => [v.kind, v.partition, v.offset]),
    [['missing', victim['partition'], victim['offset'].toString()]],
  );
});
