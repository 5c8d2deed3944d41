// An upsert sink whose topic gains partitions while two workers run. Producers then place keys by the
// new count, so a key's next record may land on another partition at a lower offset, where
// `USING TIMESTAMP <offset>` would lose to the older row. Every partition must stop coded
// (EO_PARTITIONS_ADDED) before any record produced after the change is written: each key's row stays
// exactly its last record from before the change, checked key by key, with the librdkafka default
// partitioner (consistent_random: CRC32) and the Java client's (murmur2_random).
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { Producer } from '../../src/kafka/producer.js';
import type { ConnectionConfig } from '../../src/config.js';
import { freshKeyspace, freshTopic, growTopic, runCli, startCli, suffix, testConfig, waitFor } from '../helpers.js';
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
