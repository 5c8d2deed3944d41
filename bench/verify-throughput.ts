/**
 * What `verify` costs beside the pipeline it proves (issue 25): for each size and partition count, a
 * fresh topic and keyspace; N records produced (round-robin over the partitions, 10 % Critical so
 * alert windows are counted too), one worker drains them (the pipeline's records/s, from its first
 * checkpoint to the drain), then `verify --full` (records/s, wall time, peak RSS), then 10,000 more
 * records through the worker and a second, incremental `verify` (only those are checked).
 *
 *   node --import tsx bench/verify-throughput.ts [--records 1000000,5000000] [--partitions 6,120] [--lanes 4] [--more 10000] [--keep]
 *
 * (`make bench-verify` builds first: `verify` then starts from the compiled build, as a user's does.)
 * --keep leaves each case's topic and keyspace (named in the progress lines) for a closer look.
 *
 * The local stack must be up (EXACTLYONCE_BROKERS / EXACTLYONCE_CASSANDRA name it). Prints a table and
 * writes bench/results/verify-<time>.json. Figures from a shared machine are indicative: compare the
 * rows of one run (bench/README.md).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { AuditReport } from '../src/verify/report.js';
import { applySchema } from '../src/cassandra/migrate.js';
import { connect } from '../src/cassandra/session.js';
import { loadConnectionConfig, type ConnectionConfig } from '../src/config.js';
import { CheckpointStore } from '../src/engine/checkpoint-store.js';
import { cliPath, connectionArgs } from '../src/harness/cli-process.js';
import { producePaced } from '../src/harness/paced-producer.js';
import { sleep } from '../src/harness/sleep.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { Producer } from '../src/kafka/producer.js';
import { workloadRecords, type Workload } from './workload.js';

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback;
}
const sizes = flag('records', '1000000,5000000').split(',').map(Number);
const partitionCounts = flag('partitions', '6,120').split(',').map(Number);
const lanes = flag('lanes', '4');
const more = Number(flag('more', '10000'));
const keep = process.argv.includes('--keep');

interface VerifyFigures {
  records: number;
  wallSeconds: number;
  auditSeconds: number;
  recordsPerSecond: number;
  peakRssMb: number;
  ok: boolean;
}

interface CaseResult {
  records: number;
  partitions: number;
  pipelineRecordsPerSecond: number;
  full: VerifyFigures;
  incremental: VerifyFigures;
  /** incremental wall time / full wall time. */
  incrementalShare: number;
  loadAverage: { start: number[]; end: number[] };
}

const log = (s: string) => process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${s}\n`);

async function produce(config: ConnectionConfig, w: Workload, skip = 0): Promise<void> {
  const producer = new Producer(config, { 'linger.ms': 20 });
  await producer.connect();
  try {
    const records = (function* () {
      let i = 0;
      for (const r of workloadRecords({ ...w, events: w.events + skip })) if (i++ >= skip) yield r;
    })();
    await producePaced(producer, records, { topic: config.topic, chunk: 2000, inFlight: 8, onAcked: (n) => n % 200_000 === 0 && log(`  produced ${n}`) });
  } finally {
    await producer.close();
  }
}

/** One worker until the checkpoints sum to `total`; returns records/s from its first checkpoint on. */
async function drain(config: ConnectionConfig, store: CheckpointStore, total: number): Promise<number> {
  const worker = spawn(cliPath, ['run', ...connectionArgs(config)], { stdio: 'ignore', env: { ...process.env, EXACTLYONCE_LOG_FORMAT: 'json' } });
  try {
    const sum = async () => [...(await store.readAll()).values()].reduce((a, b) => a + b, 0n);
    const start = await sum();
    let first: { at: number; done: bigint } | undefined;
    for (;;) {
      const done = await sum();
      if (first === undefined && done > start) first = { at: performance.now(), done };
      if (done >= BigInt(total)) break;
      if (worker.exitCode !== null) throw new Error(`the worker exited (${worker.exitCode})`);
      await sleep(200);
    }
    return first === undefined ? 0 : Number(BigInt(total) - first.done) / Math.max(0.001, (performance.now() - first.at) / 1000);
  } finally {
    worker.kill('SIGTERM');
    await new Promise((r) => (worker.exitCode !== null ? r(undefined) : worker.once('exit', r)));
  }
}

async function verify(config: ConnectionConfig, extra: string[]): Promise<VerifyFigures> {
  const started = performance.now();
  const child = spawn(cliPath, ['verify', ...connectionArgs(config), '--json', '--lanes', lanes, ...extra], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (err += d));
  const code = await new Promise<number | null>((r) => child.once('close', r));
  const wallSeconds = (performance.now() - started) / 1000;
  if (out.trim() === '') throw new Error(`verify printed nothing (exit ${code}): ${err}`);
  const r = JSON.parse(out) as AuditReport;
  return { records: r.totals.records, wallSeconds, auditSeconds: r.durationMs / 1000, recordsPerSecond: r.recordsPerSecond, peakRssMb: r.peakRssMb, ok: r.ok };
}

async function runCase(records: number, partitions: number): Promise<CaseResult> {
  const s = randomBytes(4).toString('hex');
  const base = loadConnectionConfig({});
  const config = loadConnectionConfig({ brokers: base.brokers.join(','), cassandra: base.cassandra.join(','), keyspace: `eo_bench_v${s}`, topic: `eo-bench-v${s}`, alertsTopic: `eo-bench-v${s}.alerts`, group: `eo-bench-v${s}` }, {});
  const session = await connect(config);
  const admin = new KafkaAdmin(config);
  const loadStart = os.loadavg();
  try {
    await applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
    await admin.ensureTopic({ topic: config.topic, partitions, replicationFactor: 1 });
    await admin.ensureTopic({ topic: config.alertsTopic, partitions: 1, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } });
    const w: Workload = { events: records, partitions, seed: 25, baseTs: Date.UTC(2024, 5, 1), eventTimeRate: 10_000, healthMix: [70, 20, 10] };
    const store = new CheckpointStore(session, config.keyspace, config.topic);
    log(`${records} records, ${partitions} partitions: producing`);
    await produce(config, w);
    log('  draining with one worker');
    const pipeline = await drain(config, store, records);
    log(`  pipeline ${Math.round(pipeline)} records/s; verify --full`);
    const full = await verify(config, ['--full']);
    log(`  full: ${full.records} records in ${full.wallSeconds.toFixed(1)} s (${full.recordsPerSecond}/s in the audit), peak RSS ${full.peakRssMb} MiB; ${more} more`);
    await produce(config, { ...w, events: more }, records);
    await drain(config, store, records + more);
    const incremental = await verify(config, []);
    log(`  incremental: ${incremental.records} records in ${incremental.wallSeconds.toFixed(1)} s, peak RSS ${incremental.peakRssMb} MiB`);
    return { records, partitions, pipelineRecordsPerSecond: Math.round(pipeline), full, incremental, incrementalShare: incremental.wallSeconds / full.wallSeconds, loadAverage: { start: loadStart, end: os.loadavg() } };
  } finally {
    if (keep) log(`  kept: --keyspace ${config.keyspace} --topic ${config.topic} --alerts-topic ${config.alertsTopic}`);
    else {
      await session.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
      await admin.deleteTopic(config.topic).catch(() => undefined);
      await admin.deleteTopic(config.alertsTopic).catch(() => undefined);
    }
    await admin.close();
    await session.shutdown();
  }
}

const results: CaseResult[] = [];
for (const n of sizes) for (const p of partitionCounts) results.push(await runCase(n, p));
const f = (x: number) => Math.round(x).toLocaleString('en-US');
process.stdout.write('records    | partitions | pipeline rec/s | verify --full: s, rec/s, peak RSS | incremental (+' + f(more) + '): s, peak RSS | share\n');
for (const r of results) {
  process.stdout.write(
    `${f(r.records).padStart(10)} | ${String(r.partitions).padStart(10)} | ${f(r.pipelineRecordsPerSecond).padStart(14)} | ` +
      `${r.full.wallSeconds.toFixed(1)} s, ${f(r.full.records / r.full.wallSeconds)}/s, ${r.full.peakRssMb} MiB | ${r.incremental.wallSeconds.toFixed(1)} s, ${r.incremental.peakRssMb} MiB | ${(r.incrementalShare * 100).toFixed(1)} %\n`,
  );
}
// Under the working directory, like the bench's own results (in a clone, where `make bench-verify` runs).
const dir = path.resolve('bench', 'results');
mkdirSync(dir, { recursive: true });
const file = path.join(dir, `verify-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ lanes: Number(lanes), more, machine: { cpus: os.cpus().length, memoryGiB: Math.round(os.totalmem() / 2 ** 30) }, results }, null, 2) + '\n');
process.stderr.write(`written ${file}\n`);
process.exit(0);
