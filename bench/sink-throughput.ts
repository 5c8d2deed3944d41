/**
 * The declarative sink's throughput against the events job's, in one run on the same machine (ratios,
 * not absolute figures: bench/README.md). For each case: a fresh topic (6 partitions) and keyspace, N
 * records produced first, then one worker started; the rate is measured from its first checkpoint to the
 * drain (records checkpointed per second, start-up excluded).
 *
 * The Avro cases read the same records as Avro through the local stack's Schema Registry (`stack up
 * --schema-registry`): what decoding Avro costs against JSON.
 *
 * The versioned case is the orders sink ordered by a `version:` field (its samples draw one per record,
 * and have no tombstones): what ordering by a version costs against the offset.
 *
 *   node --import tsx bench/sink-throughput.ts [N] [json]   (the local stack must be up; its ports from
 *   EXACTLYONCE_KAFKA_PORT / _CASSANDRA_PORT / _REGISTRY_PORT, as the tests read them; `json`: without
 *   the Avro cases, which need `stack up --schema-registry`)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { generate } from '../src/jobs/events/generator.js';
import { applyJobMigrations, applySchema } from '../src/cassandra/migrate.js';
import { connect } from '../src/cassandra/session.js';
import { loadConnectionConfig, type ConnectionConfig } from '../src/config.js';
import { CheckpointStore } from '../src/engine/checkpoint-store.js';
import { cliPath, connectionArgs, connectionEnv } from '../src/harness/cli-process.js';
import { sleep } from '../src/harness/sleep.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { Producer } from '../src/kafka/producer.js';
import { loadResolvedSinkConfig, loadSinkConfig } from '../src/jobs/sink/sink-config.js';
import { SinkJob } from '../src/jobs/sink/sink-job.js';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const N = Number(process.argv[2] ?? 100_000);
const env = process.env;
const KAFKA = `127.0.0.1:${env['EXACTLYONCE_KAFKA_PORT'] || 9092}`;
const CASSANDRA = `127.0.0.1:${env['EXACTLYONCE_CASSANDRA_PORT'] || 9042}`;
const REGISTRY = `http://127.0.0.1:${env['EXACTLYONCE_REGISTRY_PORT'] || 8081}/apis/ccompat/v7`;

/** `format`: read the sink's records as this format instead of its config's (the same samples, as Avro). */
async function bench(name: string, sinkFile: string | undefined, format?: 'avro'): Promise<number> {
  const s = randomBytes(4).toString('hex');
  const config: ConnectionConfig = loadConnectionConfig({ brokers: KAFKA, cassandra: CASSANDRA, keyspace: `eo_bench_${s}`, topic: `eo-bench-${s}`, alertsTopic: `eo-bench-${s}.alerts`, group: `eo-bench-${s}`, schemaRegistryUrl: REGISTRY }, {});
  const session = await connect(config);
  const admin = new KafkaAdmin(config);
  const producer = new Producer(config);
  try {
    await applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
    await admin.ensureTopic({ topic: config.topic, partitions: 6, replicationFactor: 1 });
    await admin.ensureTopic({ topic: config.alertsTopic, partitions: 1, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } });
    let args = connectionArgs(config);
    let job: SinkJob | undefined;
    let records: Iterable<{ key: string | Buffer | null; value: string | Buffer | null }>;
    if (sinkFile !== undefined) {
      const c = loadSinkConfig(sinkFile);
      const file = path.join(os.tmpdir(), `eo-bench-${s}.json`);
      writeFileSync(file, JSON.stringify({ ...(JSON.parse(c.source) as object), topic: config.topic, ...(format === undefined ? {} : { format }) }));
      job = new SinkJob(await loadResolvedSinkConfig(file, config.schemaRegistry), config.schemaRegistry);
      await applyJobMigrations(session, config.keyspace, job.name, job.migrations);
      await job.audit.prepareSample?.();
      records = job.audit.sample!({ seed: 1, count: N, badRatio: 0 });
      args = ['--job', file, ...args];
    } else {
      records = generate({ eventsPerKey: 0, count: N, clients: 12, sources: 3, healthMix: [50, 20, 30], badRatio: 0, seed: 1 });
    }
    let batch: Array<{ key: string | Buffer | null; value: string | Buffer | null }> = [];
    for (const r of records) {
      batch.push(r);
      if (batch.length === 5000) await producer.send(config.topic, batch.splice(0));
    }
    if (batch.length > 0) await producer.send(config.topic, batch);
    batch = [];
    const store = new CheckpointStore(session, config.keyspace, config.topic, job?.name);
    const worker = spawn(cliPath, ['run', ...args], { stdio: 'ignore', env: { ...process.env, ...connectionEnv(config), EXACTLYONCE_LOG_FORMAT: 'json' } });
    const sum = async () => [...(await store.readAll()).values()].reduce((a, b) => a + b, 0n);
    let first: { at: number; done: bigint } | undefined;
    for (;;) {
      const done = await sum();
      if (first === undefined && done > 0n) first = { at: performance.now(), done };
      if (done >= BigInt(N)) break;
      await sleep(100);
    }
    const rate = Number(BigInt(N) - first!.done) / ((performance.now() - first!.at) / 1000);
    worker.kill('SIGTERM');
    await new Promise((r) => worker.once('exit', r));
    process.stdout.write(`${name.padEnd(28)} ${Math.round(rate).toLocaleString('en-US').padStart(9)} records/s\n`);
    return rate;
  } finally {
    await producer.close();
    await session.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
    await admin.deleteTopic(config.topic).catch(() => undefined);
    await admin.deleteTopic(config.alertsTopic).catch(() => undefined);
    await admin.close();
    await session.shutdown();
  }
}

process.stdout.write(`${N.toLocaleString('en-US')} records each, 6 partitions, 1 worker, backlog drained\n`);
const events = await bench('events job (run)', undefined);
const log = await bench('sink, log mode (clicks)', 'examples/sinks/clicks.json');
const upsert = await bench('sink, upsert mode (orders)', 'examples/sinks/orders.yaml');
const versionedFile = path.join(os.tmpdir(), `eo-bench-orders-versioned-${process.pid}.yaml`);
writeFileSync(versionedFile, `${readFileSync('examples/sinks/orders.yaml', 'utf8')}version: rev\n`);
const versioned = await bench('sink, upsert by version', versionedFile);
process.stdout.write(`ratios to the events job: log ${(log / events).toFixed(2)}, upsert ${(upsert / events).toFixed(2)}; upsert by version against by offset ${(versioned / upsert).toFixed(2)}\n`);
if (process.argv[3] !== 'json') {
  const logAvro = await bench('sink, log mode, Avro', 'examples/sinks/clicks.json', 'avro');
  const upsertAvro = await bench('sink, upsert mode, Avro', 'examples/sinks/orders-avro.yaml');
  process.stdout.write(`Avro against JSON: log ${(logAvro / log).toFixed(2)}, upsert ${(upsertAvro / upsert).toFixed(2)}\n`);
}
process.exit(0);
