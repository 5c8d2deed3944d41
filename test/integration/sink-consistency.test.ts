// Issue 37 item 8 against the stack: a sink's consistency: EACH_QUORUM (and QUORUM) runs and verifies
// exactly; a level below a quorum is refused before anything runs, naming the key and why.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { isDrained } from '../../src/harness/drain.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, runCli, sinkConfigFile, startSinkJob, testConfig, waitFor } from '../helpers.js';

test('consistency: EACH_QUORUM (upsert) and QUORUM (log) sinks store and verify exactly; ONE is refused with the key and why', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  const write = (name: string, lines: string[]) => sinkConfigFile(t, `${name}.yaml`, [`name: ${name}`, `topic: ${config.topic}`, `table: ${name}`, ...lines]);
  const upsert = write('latest', ['mode: upsert', 'key: [id]', 'consistency: EACH_QUORUM', 'columns:', '  id: bigint', '  n: int']);
  const log = write('history', ['mode: log', 'consistency: QUORUM', 'columns:', '  id: bigint', '  n: int']);
  const weak = write('weak', ['mode: log', 'consistency: ONE', 'columns:', '  n: int']);

  const refused = await runCli(['run', ...connectionArgs(config), '--job', weak]);
  assert.notEqual(refused.code, 0);
  assert.match(refused.stderr, /EO_CONFIG_INVALID/);
  assert.match(refused.stderr, /consistency: ONE is refused: .*a checkpoint read at a quorum after it may not see the rows it covers/);

  const producer = new Producer(config);
  t.after(() => producer.close());
  const N = 30;
  await producer.send(config.topic, Array.from({ length: N }, (_, i) => ({ key: String(i % 7), value: JSON.stringify({ id: i % 7, n: i }) })));
  const marks = await admin.watermarks(config.topic);
  for (const [i, file] of [upsert, log].entries()) {
    // Two jobs on one topic: a consumer group each.
    await startSinkJob(t, { ...config, group: `${config.group}-${i}` }, file);
  }
  await waitFor(
    async () => {
      const r = await session.execute(`SELECT job, partition, next_offset FROM ${config.keyspace}.job_checkpoints`);
      const done = (job: string) => isDrained(marks, new Map(r.rows.filter((x) => x['job'] === job).map((x) => [x['partition'] as number, BigInt(String(x['next_offset']))])));
      return done('latest') && done('history') ? true : undefined;
    },
    { timeoutMs: 120_000, message: 'both sinks reach the log end' },
  );
  const latest = await session.execute(`SELECT id, n FROM ${config.keyspace}.latest`);
  assert.equal(latest.rowLength, 7);
  for (const r of latest.rows) assert.equal(r['n'], Math.max(...Array.from({ length: N }, (_, i) => i).filter((i) => i % 7 === Number(r['id']))));
  for (const file of [upsert, log]) {
    const verify = await runCli(['verify', ...connectionArgs(config), '--job', file, '--no-record', '--json']);
    assert.equal(verify.code, 0, verify.stdout + verify.stderr);
    const totals = (JSON.parse(verify.stdout) as { totals: { records: number; missing: number; extra: number; mismatched: number } }).totals;
    assert.deepEqual({ records: totals.records, missing: totals.missing, extra: totals.extra, mismatched: totals.mismatched }, { records: N, missing: 0, extra: 0, mismatched: 0 }, file);
  }
});
