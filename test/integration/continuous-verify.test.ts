// `verify --every` audits while the pipeline runs: each round continues the last proof, its result is
// on /metrics, and a corruption planted under the running pipeline is found — logged once at error
// level with EO_VERIFY_FAILED, however many rounds find it again.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, startCli, testConfig, waitFor } from '../helpers.js';
import { connectionArgs, freePort, generate, startWorker, waitDrained, waitStarted } from '../pipeline.js';

/** The value of each sample of `name` on a /metrics page, by its label set. */
function samples(text: string, name: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (m !== null) out.set(m[1] ?? '', Number(m[2]));
  }
  return out;
}

test('verify --every: the proof follows the checkpoints, and a corruption planted under the running pipeline is reported once', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  let worker = startWorker(t, config);
  await generate(config, ['--count', '1500', '--no-delay', '--clients', '9', '--seed', '31']);
  await waitStarted(worker);
  await waitDrained(session, config);

  const port = await freePort();
  const audit = startCli(t, ['verify', ...connectionArgs(config), '--every', '2s', '--metrics-port', String(port)]);
  const metrics = async () => fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  const store = new CheckpointStore(session, config.keyspace, config.topic);
  const proofAtCheckpoints = async () => {
    const [m, cps] = await Promise.all([metrics(), store.readAll()]);
    const proved = samples(m, 'exactlyonce_verify_last_verified_offset');
    return [0, 1, 2].every((p) => proved.get(`{partition="${p}"}`) === Number(cps.get(p) ?? 0n)) && m;
  };
  // More records while it runs: the proof follows the checkpoints.
  await generate(config, ['--count', '900', '--no-delay', '--clients', '9', '--seed', '32']);
  const drained = await waitDrained(session, config);
  assert.equal([...drained.values()].reduce((a, b) => a + b, 0n), 2400n);
  const caughtUp = await waitFor(proofAtCheckpoints, { timeoutMs: 120_000, message: 'last_verified_offset reaches every checkpoint' });
  assert.deepEqual([...samples(caughtUp, 'exactlyonce_verify_proof_lag').values()], [0, 0, 0]);
  assert.equal(samples(caughtUp, 'exactlyonce_verify_runs_total').get('{result="failed"}') ?? 0, 0);
  assert.equal(samples(caughtUp, 'exactlyonce_verify_records_checked_total').get(''), 2400, 'each record checked once over the rounds');

  // The plant: a malformed record that the worker will quarantine, and beside it an events row for
  // its offset (as a buggy writer would leave). Written while no worker runs, so the audit sees the
  // row ahead of the checkpoint (in flight, not judged) until the worker has passed the offset.
  worker.kill('SIGTERM');
  assert.equal((await once(worker, 'exit'))[0], 0, worker.output());
  const admin = new KafkaAdmin(config);
  const offset = (await admin.watermarks(config.topic).finally(() => admin.close())).find((w) => w.partition === 0)!.high;
  const producer = new Producer(config);
  await producer.connect();
  await producer.send(config.topic, [{ key: 'planted', value: 'not json at all', partition: 0 }]);
  await producer.close();
  await session.execute(`INSERT INTO ${config.keyspace}.events (partition, offset, id, ts, source, client, health) VALUES (0, ?, 1, 0, 'planted', 'planted', 0)`, [String(offset)], { prepare: true });
  worker = startWorker(t, config);
  await waitDrained(session, config);

  const found = await waitFor(
    async () => {
      const m = await metrics();
      return (samples(m, 'exactlyonce_verify_runs_total').get('{result="failed"}') ?? 0) >= 3 && m;
    },
    { timeoutMs: 120_000, message: 'three rounds find the planted row' },
  );
  assert.equal(samples(found, 'exactlyonce_verify_violations').get('{kind="stored_malformed"}'), 1);
  assert.equal(samples(found, 'exactlyonce_verify_last_verified_offset').get('{partition="0"}'), Number(offset), "partition 0's proof stops at the planted row");
  const reported = audit
    .output()
    .split('\n')
    .filter((l) => l.includes('"code":"EO_VERIFY_FAILED"'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; violation?: { kind: string; partition: number; offset: string } });
  assert.deepEqual(
    reported.map((r) => [r.level, r.violation]),
    [[50, { kind: 'stored_malformed', partition: 0, offset: String(offset), message: `partition 0 offset ${offset}: a malformed record (invalid_json) is stored in events` }]],
    'logged once, at error level, though every round since found it',
  );
  assert.match(audit.output(), new RegExp(`round \\d+ \\([^)]+, incremental\\): checked \\d+ new records, \\d+ alert window\\(s\\) judged in [\\d.]+ s: VIOLATIONS 1 \\(stored_malformed 1\\)`));

  audit.kill('SIGTERM');
  assert.equal((await once(audit, 'exit'))[0], 0, audit.output());
  worker.kill('SIGTERM');
  assert.equal((await once(worker, 'exit'))[0], 0, worker.output());
});
