/** Shared by the tests: fresh topics and keyspaces with cleanup, waitFor with a deadline, the CLI. */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';
import type { TestContext } from 'node:test';
import { applySchema } from '../src/cassandra/migrate.js';
import { connect, type Client } from '../src/cassandra/session.js';
import { loadConnectionConfig, type ConnectionConfig } from '../src/config.js';
import { cliPath, connectionArgs } from '../src/harness/cli-process.js';
import { isDrained } from '../src/harness/drain.js';
import { sleep } from '../src/harness/sleep.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { Producer, type OutgoingRecord } from '../src/kafka/producer.js';
import { SchemaRegistry } from '../src/registry/schema-registry.js';

export const repoRoot = fileURLToPath(new URL('..', import.meta.url));
export { cliPath };

/**
 * The local stack the tests run against: 127.0.0.1:9092 and 127.0.0.1:9042 (`make test`'s), or another
 * one named by the environment (EXACTLYONCE_KAFKA_PORT / EXACTLYONCE_CASSANDRA_PORT, as `stack up`
 * reads them, with EXACTLYONCE_STACK_DIR), so that two checkouts can each test against a stack of their own.
 */
export const KAFKA_PORT = Number(process.env['EXACTLYONCE_KAFKA_PORT'] || 9092);
export const CASSANDRA_PORT = Number(process.env['EXACTLYONCE_CASSANDRA_PORT'] || 9042);
export const BROKERS = `127.0.0.1:${KAFKA_PORT}`;
export const CASSANDRA = CASSANDRA_PORT === 9042 ? '127.0.0.1' : `127.0.0.1:${CASSANDRA_PORT}`;

/** The local stack's Schema Registry (`stack up --schema-registry`), on EXACTLYONCE_REGISTRY_PORT (default 8081). */
export const REGISTRY_PORT = Number(process.env['EXACTLYONCE_REGISTRY_PORT'] || 8081);
export const REGISTRY_URL = `http://127.0.0.1:${REGISTRY_PORT}/apis/ccompat/v7`;
/** What a CLI child needs to find that registry. */
export const REGISTRY_ENV = { EXACTLYONCE_SCHEMA_REGISTRY_URL: REGISTRY_URL };

/**
 * Starts the local stack's Schema Registry unless it runs (fetching it from Maven Central the first
 * time), so that `make test` needs no flag: the tests that read Avro, Protobuf or JSON Schema call it.
 */
export async function ensureRegistry(): Promise<string> {
  const { startServer } = await import('../src/stack/index.js');
  const o = { ...(await localStack()), schemaRegistry: true, registryPort: REGISTRY_PORT, onProgress: (line: string) => process.stderr.write(`  ${line}\n`) };
  await startServer(o, 'registry');
  return REGISTRY_URL;
}

/**
 * The start of a test through the Schema Registry: the registry up (ensureRegistry), a fresh config and
 * topic of `partitions`, a session (the keyspace dropped when the test ends), the registry's client and
 * the topic's value subject.
 */
export async function registryTopic(t: TestContext, partitions = 1) {
  await ensureRegistry();
  const config = testConfig();
  const admin = await freshTopic(t, config, partitions);
  const session = await cassandraSession(t, config);
  return { config, admin, session, registry: new SchemaRegistry(config.schemaRegistry), subject: `${config.topic}-value` };
}

/** A producer of the test's own, connected; closed when the test ends. */
export async function connectedProducer(t: TestContext, config: ConnectionConfig, extra: Record<string, string | number | boolean> = {}): Promise<Producer> {
  const producer = new Producer(config, extra);
  t.after(() => producer.close());
  await producer.connect();
  return producer;
}

/**
 * Sends records to `topic` (the config's by default) with a producer of its own, closed after: key null
 * and partition 0 unless a record says otherwise, 500 records a send.
 */
export async function produceRecords(config: ConnectionConfig, records: ReadonlyArray<Omit<OutgoingRecord, 'key'> & { key?: OutgoingRecord['key'] }>, topic = config.topic): Promise<void> {
  const p = new Producer(config);
  try {
    await p.connect();
    for (let i = 0; i < records.length; i += 500) await p.send(topic, records.slice(i, i + 500).map((r) => ({ ...r, key: r.key ?? null, partition: r.partition ?? 0 })));
  } finally {
    await p.close();
  }
}

export function suffix(): string {
  return randomBytes(4).toString('hex');
}

/** A connection to the local stack with a keyspace and topic of the test's own. */
export function testConfig(overrides: Record<string, unknown> = {}): ConnectionConfig {
  const s = suffix();
  return loadConnectionConfig(
    { brokers: BROKERS, cassandra: CASSANDRA, keyspace: `eo_test_${s}`, topic: `eo-test-${s}`, alertsTopic: `eo-test-alerts-${s}`, group: `eo-test-${s}`, schemaRegistryUrl: REGISTRY_URL, ...overrides },
    {},
  );
}

/** A test's own config, its keyspace (freshKeyspace: the session, the keyspace dropped when the test ends) and its topic of `partitions`. */
export async function freshKeyspaceAndTopic(t: TestContext, partitions: number): Promise<{ config: ConnectionConfig; session: Client; admin: KafkaAdmin }> {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, partitions);
  return { config, session, admin };
}

/**
 * Connects to Cassandra (no keyspace); when the test ends, drops the config's keyspace (which the test
 * creates itself, e.g. through the CLI) and closes the session.
 */
export async function cassandraSession(t: TestContext, config: ConnectionConfig): Promise<Client> {
  const client = await connect(config);
  t.after(async () => {
    await client.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
    await client.shutdown();
  });
  return client;
}

/** Applies the schema to the config's keyspace and drops the keyspace when the test ends. */
export async function freshKeyspace(t: TestContext, config: ConnectionConfig): Promise<Client> {
  const client = await connect(config);
  // Cleanup is registered before the schema is made, so a half-made one is dropped too.
  t.after(async () => {
    await client.execute(`DROP KEYSPACE IF EXISTS ${config.keyspace}`).catch(() => undefined);
    await client.shutdown();
  });
  await applySchema(client, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
  return client;
}

/** An admin client of the test's own that, when the test ends, deletes `topics` (the test creates them, or has a command create them) and closes. */
export function topicsAdmin(t: TestContext, config: ConnectionConfig, topics: readonly string[]): KafkaAdmin {
  const admin = new KafkaAdmin(config);
  t.after(async () => {
    for (const topic of topics) await admin.deleteTopic(topic).catch(() => undefined);
    await admin.close();
  });
  return admin;
}

/** Creates the config's topic and its compacted alerts topic, and deletes both when the test ends. */
export async function freshTopic(t: TestContext, config: ConnectionConfig, partitions = 3): Promise<KafkaAdmin> {
  const admin = topicsAdmin(t, config, [config.topic, config.alertsTopic]);
  await admin.ensureTopic({ topic: config.topic, partitions, replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.alertsTopic, partitions, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } });
  return admin;
}

/** Polls `condition` until it returns a truthy value or the deadline passes (then throws `message`). */
/**
 * Deletes the config's topic and creates it again with `partitions` (a new topic ID, offsets from 0),
 * waiting for each step; returns the old and the new topic ID.
 */
export async function recreateTopic(admin: KafkaAdmin, config: ConnectionConfig, partitions: number): Promise<{ oldId: string; newId: string }> {
  const oldId = (await admin.topicId(config.topic))!;
  await admin.deleteTopic(config.topic);
  await waitFor(async () => (await admin.topicId(config.topic)) === null, { timeoutMs: 60_000, message: 'the topic is deleted' });
  const newId = await waitFor(
    async () => {
      await admin.ensureTopic({ topic: config.topic, partitions, replicationFactor: 1 });
      const now = await admin.topicId(config.topic);
      return now !== null && now !== oldId ? now : undefined;
    },
    { timeoutMs: 60_000, message: 'the topic is created again' },
  );
  return { oldId, newId };
}

export async function waitFor<T>(
  condition: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  options: { timeoutMs: number; intervalMs?: number; message: string },
): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await condition();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${options.timeoutMs} ms: ${options.message}${last ? ` (last error: ${String(last)})` : ''}`);
    }
    await sleep(options.intervalMs ?? 250);
  }
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `bin/exactlyonce args…` to completion. */
export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 300_000): Promise<CliResult> {
  return runProcess(cliPath, args, { env: { ...process.env, ...env }, timeoutMs });
}

/** Runs a command to completion (killed after `timeoutMs`), in `cwd` with `env` (default: this process's). */
export function runProcess(cmd: string, args: string[], o: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd: o.cwd, env: o.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), o.timeoutMs ?? 300_000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** Where a test keeps what it ran for post-mortems: test-artifacts/<test name>/ (git-ignored). */
export function artifactsDir(t: TestContext): string {
  const dir = `${repoRoot}test-artifacts/${t.name.replace(/[^A-Za-z0-9]+/g, '-').slice(0, 60)}`;
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** Starts `bin/exactlyonce args…` in the background; the test kills it (and it is killed at test end). */
export function startCli(t: TestContext, args: string[], env: Record<string, string> = {}): ChildProcess & { output: () => string } {
  const child = spawn(cliPath, args, { env: { ...process.env, EXACTLYONCE_LOG_FORMAT: 'json', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  // Kept for post-mortems: test-artifacts/<test name>/<command>-<pid>.log.
  const file = `${artifactsDir(t)}/${args[0]}-${child.pid}.log`;
  // Written as it comes: a test run ended by --test-force-exit never sees its children exit.
  const log = createWriteStream(file).on('error', () => undefined);
  child.stdout!.on('data', (d) => log.write(d));
  child.stderr!.on('data', (d) => log.write(d));
  // 'close': the child's output has ended too, so nothing is written after the end.
  child.on('close', (code, signal) => log.end(`\n[exit code ${code} signal ${signal}]\n`));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return Object.assign(child, { output: () => output });
}

/** The options of the running local stack (the one `make test` started), for restart tests. */
export async function localStack() {
  const { defaultStackOptions } = await import('../src/stack/index.js');
  const dir = process.env['EXACTLYONCE_STACK_DIR'];
  return defaultStackOptions({ ...(dir === undefined ? {} : { dir }), kafkaPort: KAFKA_PORT, cassandraPort: CASSANDRA_PORT });
}

/**
 * A sink job's config file, in a temporary folder of the test's own (removed when the test ends):
 * `name` (its extension says YAML or JSON) holding `content`, or `content`'s lines and a final newline.
 */
export function sinkConfigFile(t: TestContext, name: string, content: string | readonly string[]): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-sink-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : [...content, ''].join('\n'));
  return file;
}

/** A YAML sink config's first lines: its name, the config's topic, its table (the name unless given) and its mode. */
export function sinkYamlHead(config: ConnectionConfig, name: string, mode: 'log' | 'upsert', table = name): string[] {
  return [`name: ${name}`, `topic: ${config.topic}`, `table: ${table}`, `mode: ${mode}`];
}

/** `schema apply --job <file>`, which must succeed; returns the job's arguments (the connection and --job). */
export async function applySinkSchema(config: ConnectionConfig, file: string): Promise<string[]> {
  const args = [...connectionArgs(config), '--job', file];
  const apply = await runCli(['schema', 'apply', ...args]);
  assert.equal(apply.code, 0, apply.stderr);
  return args;
}

/**
 * The start of a sink job test: `schema apply --job <file>` (which must succeed), then a worker,
 * `run --job <file> …extra --session-timeout-ms 6000`. Returns the job's arguments (the connection and
 * --job, for verify, checkpoints and another worker) and the worker.
 */
export async function startSinkJob(t: TestContext, config: ConnectionConfig, file: string, extra: readonly string[] = []): Promise<{ args: string[]; worker: ReturnType<typeof startCli> }> {
  const args = await applySinkSchema(config, file);
  const worker = startCli(t, ['run', ...args, ...extra, '--session-timeout-ms', '6000']);
  return { args, worker };
}

/** What `verify --json` reports, as far as the tests read it. */
export interface VerifyJson {
  totals: Record<string, number>;
  partitions: Array<{ reasons?: Record<string, number>; skipped?: Record<string, number> }>;
}

/** `verify …args --no-record --json`, which must pass (exit 0); its report. */
export async function verifyPasses(args: readonly string[], env: Record<string, string> = {}): Promise<VerifyJson> {
  const verify = await runCli(['verify', ...args, '--no-record', '--json'], env);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  return JSON.parse(verify.stdout) as VerifyJson;
}

/** The totals `expected` names, to compare with it (assert.deepEqual(totalsLike(report.totals, expected), expected)): the others are not asserted. */
export function totalsLike(totals: Record<string, number>, expected: Record<string, number>): Record<string, number | undefined> {
  return Object.fromEntries(Object.keys(expected).map((k) => [k, totals[k]]));
}

/**
 * Waits until every partition's job checkpoint (job_checkpoints) is at the log end as of the call
 * (isDrained). With `worker`, a poll finds the worker ended (out of heap, say) and fails, so that the
 * deadline's message says why (its last output) rather than only that the checkpoints fell short.
 */
export async function waitSinkDrained(
  session: Client,
  config: ConnectionConfig,
  admin: KafkaAdmin,
  o: { timeoutMs?: number; intervalMs?: number; message?: string; worker?: ReturnType<typeof startCli> } = {},
): Promise<void> {
  const marks = await admin.watermarks(config.topic);
  const { worker } = o;
  await waitFor(
    async () => {
      if (worker !== undefined && (worker.exitCode !== null || worker.signalCode !== null)) return Promise.reject(new Error(`the worker ended: ${worker.output().slice(-300)}`));
      const r = await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.job_checkpoints`);
      return isDrained(marks, new Map(r.rows.map((row) => [row['partition'] as number, BigInt(String(row['next_offset']))]))) ? true : undefined;
    },
    { timeoutMs: o.timeoutMs ?? 120_000, ...(o.intervalMs === undefined ? {} : { intervalMs: o.intervalMs }), message: o.message ?? 'the sink reaches the log end' },
  );
}

/** Adds partitions with the client's low-level admin (its KafkaJS-style admin has no CreatePartitions). */
export async function growTopic(config: ConnectionConfig, topic: string, total: number): Promise<void> {
  const { AdminClient } = createRequire(import.meta.url)('@confluentinc/kafka-javascript') as {
    AdminClient: { create(c: Record<string, unknown>): { createPartitions(t: string, n: number, ms: number, cb: (e: unknown) => void): void; disconnect(): void } };
  };
  const admin = AdminClient.create({ 'bootstrap.servers': config.brokers.join(',') });
  try {
    await new Promise<void>((resolve, reject) => admin.createPartitions(topic, total, 30_000, (e) => (e ? reject(e as Error) : resolve())));
  } finally {
    admin.disconnect();
  }
}
