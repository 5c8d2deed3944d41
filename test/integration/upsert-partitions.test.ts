// An upsert sink whose topic gains partitions while two workers run. Producers then place keys by the
// new count, so a key's next record may land on another partition at a lower offset, where
// `USING TIMESTAMP <offset>` would lose to the older row. Every partition must stop coded
// (EO_PARTITIONS_ADDED) before any record produced after the change is written: each key's row stays
// exactly its last record from before the change, checked key by key, with the librdkafka default
// partitioner (consistent_random: CRC32) and the Java client's (murmur2_random).
//
// With `version:` the sink orders a key's records by the version and keeps going: the topic grows while
// a producer writes, a worker is SIGKILLed, stale records (lower versions, higher offsets) come last,
// and every key's row is its record of the highest version, written at it, proved by verify --job.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { Producer } from '../../src/kafka/producer.js';
import type { ConnectionConfig } from '../../src/config.js';
import { applySinkSchema, freshKeyspace, freshTopic, growTopic, runCli, startCli, suffix, testConfig, verifyPasses, waitFor, waitSinkDrained } from '../helpers.js';
import { connectionArgs, freePort } from '../pipeline.js';

const KEYS = 400;

/** Every key once, keyed by its id (the Kafka key names the value's key, as an upsert sink requires). */
async function produceRound(config: ConnectionConfig, partitioner: string, round: number): Promise<void> {
  const producer = new Producer(config, { partitioner });
  try {
    const records = Array.from({ length: KEYS }, (_, i) => ({ key: String(i + 1), value: JSON.stringify({ id: i + 1, v: round }) }));
    for (let i = 0; i < records.length; i += 100) await producer.send(config.topic, records.slice(i, i + 100));
  } finally {
    await producer.close();
  }
}

async function scenario(t: TestContext, partitioner: string, from: number, to: number): Promise<void> {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, from);
  const name = `kv_${suffix()}`;
  const file = path.join(os.tmpdir(), `${name}.yaml`);
  writeFileSync(file, `name: ${name}\ntopic: ${config.topic}\ntable: kv\nmode: upsert\nkey: [id]\ncolumns:\n  id: { type: bigint, required: true }\n  v: { type: bigint, required: true }\n`);
  const applied = await runCli(['schema', 'apply', '--job', file, ...connectionArgs(config)]);
  assert.equal(applied.code, 0, applied.stderr);
  const workers = await Promise.all([0, 1].map(async () => {
    const port = await freePort();
    return Object.assign(startCli(t, ['sink', '--config', file, ...connectionArgs(config), '--metrics-port', String(port), '--session-timeout-ms', '6000']), { port });
  }));
  const store = new CheckpointStore(session, config.keyspace, config.topic, name);
  await produceRound(config, partitioner, 1);
  const before = new Map((await admin.watermarks(config.topic)).map((w) => [w.partition, w.high]));
  await waitFor(async () => {
    const c = await store.readAll();
    return [...before].every(([p, high]) => c.get(p) === high);
  }, { timeoutMs: 180_000, message: 'the workers store round 1' });

  await growTopic(config, config.topic, to);
  // The broker's metadata may lag the controller: the next producer must see the new count.
  await waitFor(async () => ((await admin.partitionCount(config.topic)) === to ? true : undefined), { timeoutMs: 60_000, message: `the topic has ${to} partitions` });
  // A producer started after the change places every key by the new count.
  await produceRound(config, partitioner, 2);
  const after = await admin.watermarks(config.topic);
  assert.equal(after.length, to);
  assert.ok(after.some((w) => w.partition >= from && w.high > 0n), 'keys moved to the new partitions');

  // Every partition, old and new, stops with the coded error, at error level, with its metric.
  const stopped = () => {
    const ps = new Set<number>();
    for (const w of workers) {
      for (const line of w.output().split('\n')) {
        if (!line.includes('"code":"EO_PARTITIONS_ADDED"')) continue;
        const j = JSON.parse(line) as { partition?: number; level: number | string };
        assert.ok(j.level === 50 || j.level === 'error', line);
        if (j.partition !== undefined) ps.add(j.partition);
      }
    }
    return ps;
  };
  await waitFor(() => stopped().size === to, { timeoutMs: 180_000, message: `every partition 0..${to - 1} stops with EO_PARTITIONS_ADDED` }).catch((e: Error) => {
    throw new Error(`${e.message}; stopped: ${[...stopped()].sort().join(',')}`);
  });
  let stops = 0;
  for (const w of workers) {
    const text = await (await fetch(`http://127.0.0.1:${w.port}/metrics`)).text();
    for (const m of text.matchAll(/^exactlyonce_partition_stops_total\{code="EO_PARTITIONS_ADDED"\} (\d+)$/gm)) stops += Number(m[1]);
  }
  assert.equal(stops, to, 'exactlyonce_partition_stops_total{code="EO_PARTITIONS_ADDED"} counts each partition once');
  assert.match(workers.map((w) => w.output()).join('\n'), new RegExp(`topic ${config.topic} has ${to} partitions, the job was bound to ${from}`));

  // Nothing after the change was written: the checkpoints stand at round 1's log ends (new
  // partitions: none), and each key's row is its round-1 record, written at its round-1 offset.
  const c = await store.readAll();
  for (const [p, high] of before) assert.equal(c.get(p), high, `partition ${p}'s checkpoint`);
  for (let p = from; p < to; p++) assert.equal(c.get(p), undefined, `new partition ${p} has no checkpoint`);
  const rows = (await session.execute(`SELECT id, v, WRITETIME(v) AS wt FROM ${config.keyspace}.kv`)).rows;
  assert.equal(rows.length, KEYS);
  // (Written by the sink: at an offset, far below any wall-clock time.)
  const wrong = rows.filter((r) => Number(r['v']) !== 1 || BigInt(String(r['wt'])) >= 1n << 44n);
  assert.deepEqual(wrong.map((r) => `${r['id']}: v ${r['v']}`), [], 'keys whose row is not their record from before the change');
  const ids = rows.map((r) => Number(r['id'])).sort((a, b) => a - b);
  assert.deepEqual(ids, Array.from({ length: KEYS }, (_, i) => i + 1));
  t.diagnostic(`${partitioner}: ${from} -> ${to} partitions; new partitions got ${after.filter((w) => w.partition >= from).reduce((n, w) => n + Number(w.high), 0)} of ${KEYS} round-2 records; ${to} partitions stopped`);
}

test('upsert sink, topic grows 4 -> 8 partitions under two workers, librdkafka default partitioner: every partition stops coded before a moved key is written', (t) =>
  scenario(t, 'consistent_random', 4, 8));

test("upsert sink, topic grows 4 -> 6 partitions under two workers, the Java client's murmur2: every partition stops coded before a moved key is written", (t) =>
  scenario(t, 'murmur2_random', 4, 6));

test('upsert sink with version: the topic grows 4 -> 8 partitions while a producer writes and a worker is SIGKILLed; every key keeps its record of the highest version, on whichever partition, proved by verify --job', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 4);
  const name = `kvv_${suffix()}`;
  const file = path.join(os.tmpdir(), `${name}.yaml`);
  writeFileSync(file, `name: ${name}\ntopic: ${config.topic}\ntable: kv\nmode: upsert\nkey: [id]\nversion: n\ncolumns:\n  id: { type: bigint, required: true }\n  v: { type: text, required: true }\n  n: { type: bigint, required: true }\n`);
  const args = await applySinkSchema(config, file);
  const worker = async () => {
    const port = await freePort();
    return startCli(t, ['sink', '--config', file, ...connectionArgs(config), '--metrics-port', String(port), '--session-timeout-ms', '6000']);
  };
  const workers = [await worker(), await worker()];
  const ROUNDS = 6;
  // One producer throughout: it learns the new partition count while it writes, so keys move mid-stream.
  const producer = new Producer(config, { partitioner: 'murmur2_random', 'topic.metadata.refresh.interval.ms': 1000 });
  t.after(() => producer.close());
  const round = async (n: number, v: string) => {
    const records = Array.from({ length: KEYS }, (_, i) => ({ key: String(i + 1), value: JSON.stringify({ id: i + 1, v, n }) }));
    for (let i = 0; i < records.length; i += 50) await producer.send(config.topic, records.slice(i, i + 50));
  };
  await round(1, 'r1');
  await growTopic(config, config.topic, 8);
  for (let r = 2; r <= ROUNDS; r++) {
    await round(r, `r${r}`);
    if (r === 3) {
      workers[0]!.kill('SIGKILL');
      workers.push(await worker());
    }
    await new Promise((res) => setTimeout(res, 1500));
  }
  await waitFor(async () => ((await admin.partitionCount(config.topic)) === 8 ? true : undefined), { timeoutMs: 60_000, message: 'the topic has 8 partitions' });
  // Stale records last: lower versions at higher offsets, placed by the new count. An offset order would keep them.
  await round(2, 'stale');
  const marks = await admin.watermarks(config.topic);
  assert.equal(marks.length, 8);
  assert.ok(marks.some((w) => w.partition >= 4 && w.high > 0n), 'keys moved to the new partitions');
  await waitSinkDrained(session, config, admin, { timeoutMs: 240_000, message: 'the workers store every partition, old and new' });

  const rows = (await session.execute(`SELECT id, v, n, WRITETIME(v) AS wt FROM ${config.keyspace}.kv`)).rows;
  assert.deepEqual(rows.map((r) => Number(r['id'])).sort((a, b) => a - b), Array.from({ length: KEYS }, (_, i) => i + 1));
  const wrong = rows.filter((r) => r['v'] !== `r${ROUNDS}` || Number(r['n']) !== ROUNDS || String(r['wt']) !== String(ROUNDS));
  assert.deepEqual(wrong.map((r) => `${r['id']}: ${r['v']} n ${r['n']} at ${r['wt']}`), [], 'keys whose row is not their record of the highest version, written at it');
  const out = workers.map((w) => w.output()).join('\n');
  assert.doesNotMatch(out, /EO_PARTITIONS_ADDED/);
  // Some keys have records on two partitions (placed by 4, then by 8): the proof judges them by version.
  const report = await verifyPasses(args);
  assert.deepEqual(
    { records: report.totals['records'], quarantined: report.totals['quarantined'], missing: report.totals['missing'], extra: report.totals['extra'], mismatched: report.totals['mismatched'] },
    { records: KEYS * (ROUNDS + 1), quarantined: 0, missing: 0, extra: 0, mismatched: 0 },
  );
  // A row that is an older record's (written above it, as a foreign writer would) is found.
  await session.execute(`INSERT INTO ${config.keyspace}.kv (id, v, n) VALUES (7, 'r3', 3) USING TIMESTAMP ${ROUNDS + 1}`);
  const forged = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.equal(forged.code, 9, forged.stderr);
  assert.match(forged.stderr, /EO_VERIFY_FAILED: 1 violation\(s\) of exactly-once \(mismatch 1\); first: kv key \{"id":"7"\}: v is "r3", its last record \(partition \d offset \d+\) says "r6"/);
  assert.equal((JSON.parse(forged.stdout) as { totals: Record<string, number> }).totals['mismatched'], 1);
  t.diagnostic(`new partitions got ${marks.filter((w) => w.partition >= 4).reduce((n, w) => n + Number(w.high), 0)} of ${KEYS * (ROUNDS + 1)} records`);
});
