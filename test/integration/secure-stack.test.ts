/**
 * The pipeline against `stack up --secure`: a secured stack of its own (own dir, Kafka 127.0.0.1:19092,
 * Cassandra 127.0.0.1:19042: the shared stack's ports + 10000), started once for this file and stopped at its end. The admin sets up the
 * schema and topics; the worker role (least privilege) runs and verifies; a short chaos run; each
 * misconfiguration gives one coded line; no secret appears in anything we print.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { rootCertificates } from 'node:tls';
import { after, before, test } from 'node:test';
import { connect, type Client } from '../../src/cassandra/session.js';
import { loadConnectionConfig, type ConnectionConfig } from '../../src/config.js';
import { defaultStackOptions, secureFiles, stackDown, stackUp, type StackOptions } from '../../src/stack/index.js';
import { freePort, waitDrained, assertExactlyOnce } from '../pipeline.js';
import { CASSANDRA_PORT, KAFKA_PORT, runCli, startCli, suffix, waitFor } from '../helpers.js';

const SECURE_KAFKA_PORT = KAFKA_PORT + 10_000;
const SECURE_CASSANDRA_PORT = CASSANDRA_PORT + 10_000;

const o: StackOptions = defaultStackOptions({
  dir: await mkdtemp(path.join(os.tmpdir(), 'eo-secure-stack-')),
  kafkaPort: SECURE_KAFKA_PORT,
  cassandraPort: SECURE_CASSANDRA_PORT,
  kafkaHeapMb: 512,
  cassandraHeapMb: 768,
  startTimeoutMs: 900_000,
  secure: true,
  onProgress: (line) => process.stderr.write(`  [secure stack] ${line}\n`),
});
const files = secureFiles(o);
/** Everything our commands printed in this file: searched for the secrets at the end. */
const printed: string[] = [];

/** The EXACTLYONCE_* settings of a `secure/<role>.env` file. */
function envFile(file: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^(EXACTLYONCE_[A-Z_]+)=(.*)$/.exec(line);
    if (m !== null) env[m[1]!] = m[2]!;
  }
  return env;
}

let admin: Record<string, string>;
let worker: Record<string, string>;

before(async () => {
  // The jars of the shared stack, when it has them: no second copy from ~/.m2.
  const shared = path.join(process.env['EXACTLYONCE_STACK_DIR'] ?? defaultStackOptions().dir, 'lib');
  if (existsSync(shared)) symlinkSync(shared, path.join(o.dir, 'lib'));
  const t0 = Date.now();
  await stackUp(o);
  process.stderr.write(`  [secure stack] up in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
  admin = envFile(files.adminEnv);
  worker = envFile(files.workerEnv);
});

after(async () => {
  await stackDown(o);
  await rm(o.dir, { recursive: true, force: true });
});

/** A connection for `env`'s role with names of this test's own (the worker's ACLs cover names starting with 'exactlyonce'). */
function names(): Record<string, string> {
  const s = suffix();
  return { EXACTLYONCE_KEYSPACE: `eo_sec_${s}`, EXACTLYONCE_TOPIC: `exactlyonce.sec-${s}`, EXACTLYONCE_ALERTS_TOPIC: `exactlyonce.sec-${s}.alerts`, EXACTLYONCE_GROUP: `exactlyonce-sec-${s}` };
}

function configOf(env: Record<string, string>): ConnectionConfig {
  return loadConnectionConfig({}, env);
}

async function cli(args: string[], env: Record<string, string>, timeoutMs = 300_000) {
  const r = await runCli(args, { EXACTLYONCE_LOG_FORMAT: 'json', ...env }, timeoutMs);
  printed.push(r.stdout, r.stderr);
  return r;
}

test('stack up --secure: keys and secrets are 0600, the client settings name the CA and password files', () => {
  for (const f of [files.keystore, files.truststore, files.storePassword, files.cassandraAdminPassword, files.cassandraWorkerPassword, files.kafkaAdminPassword, files.kafkaWorkerPassword, files.kafkaAdminProperties, files.kafkaWorkerProperties, files.adminEnv, files.workerEnv]) {
    assert.equal(statSync(f).mode & 0o777, 0o600, f);
  }
  assert.equal(statSync(files.dir).mode & 0o777, 0o700);
  assert.deepEqual(worker, {
    EXACTLYONCE_BROKERS: `127.0.0.1:${SECURE_KAFKA_PORT}`,
    EXACTLYONCE_CASSANDRA: `127.0.0.1:${SECURE_CASSANDRA_PORT}`,
    EXACTLYONCE_CASSANDRA_CA: files.ca,
    EXACTLYONCE_CASSANDRA_USERNAME: 'exactlyonce_worker',
    EXACTLYONCE_CASSANDRA_PASSWORD_FILE: files.cassandraWorkerPassword,
    EXACTLYONCE_KAFKA_CONFIG_FILE: files.kafkaWorkerProperties,
  });
});

test('secured pipeline: the admin applies the schema and makes the topics, the worker role runs and verifies', async (t) => {
  const n = names();
  const asAdmin = { ...admin, ...n };
  const asWorker = { ...worker, ...n };
  assert.equal((await cli(['schema', 'apply'], asAdmin)).code, 0);
  assert.equal((await cli(['topic', 'create', '--partitions', '3'], asAdmin)).code, 0);
  const gen = await cli(['generate', '--events-per-key', '40', '--seed', '7'], asAdmin);
  assert.equal(gen.code, 0, gen.stderr);
  assert.match(gen.stdout, /^sent 120 events \(0 malformed\)/m);

  const port = await freePort();
  const w = startCli(t, ['run', '--metrics-port', String(port), '--session-timeout-ms', '6000'], asWorker);
  const session: Client = await connect(configOf(asAdmin));
  t.after(async () => {
    await session.execute(`DROP KEYSPACE IF EXISTS ${n['EXACTLYONCE_KEYSPACE']}`).catch(() => undefined);
    await session.shutdown();
  });
  const drained = await waitDrained(session, configOf(asAdmin));
  assert.equal([...drained.values()].reduce((a, b) => a + b, 0n), 120n);
  const ledger = await assertExactlyOnce(session, configOf(asAdmin));
  assert.deepEqual({ records: ledger.records, stored: ledger.stored, quarantined: ledger.quarantined }, { records: 120, stored: 120, quarantined: 0 });

  // The worker's own endpoints (loopback: no token), kept for the secret search.
  const metrics = await fetch(`http://127.0.0.1:${port}/metrics`).then((r) => r.text());
  assert.match(metrics, /exactlyonce_records_stored_total/);
  printed.push(metrics);

  const v = await cli(['verify', '--json'], asWorker);
  assert.equal(v.code, 0, v.stderr);
  const report = JSON.parse(v.stdout) as { violationTotal: number; totals: { records: number; stored: number } };
  assert.equal(report.violationTotal, 0);
  assert.deepEqual([report.totals.records, report.totals.stored], [120, 120]);

  w.kill('SIGTERM');
  await waitFor(() => w.exitCode !== null, { timeoutMs: 60_000, message: 'worker stops' });
  assert.equal(w.exitCode, 0);
  printed.push(w.output());
});

test('secured chaos: kills and a restart of the secured broker, then verify', async () => {
  const r = await cli(
    ['chaos', '--events', '3000', '--duration', '20', '--workers', '2', '--partitions', '3', '--kills', '2', '--zombies', '0', '--cassandra-restarts', '0', '--kafka-restarts', '1', '--add-remove', '0', '--injections', '1', '--seed', '16', '--stack-dir', o.dir, '--json'],
    { ...admin, EXACTLYONCE_KAFKA_PORT: String(SECURE_KAFKA_PORT), EXACTLYONCE_CASSANDRA_PORT: String(SECURE_CASSANDRA_PORT) },
    15 * 60_000,
  );
  assert.equal(r.code, 0, `${r.stdout.slice(-4000)}\n${r.stderr.slice(-2000)}`);
  const figures = JSON.parse(r.stdout.trim().split('\n').filter((l) => l.startsWith('{"seed"')).pop()!) as { violations: number; problems: string[]; records: number; injected: number; faults: Record<string, number> };
  assert.equal(figures.violations, 0);
  assert.deepEqual(figures.problems, []);
  assert.equal(figures.records, 3000 + figures.injected);
  assert.equal(figures.faults['kafkaRestarts'], 1);
});

/** One coded line on stderr, the code's exit status, no stack trace, well before any retry deadline. */
async function refused(args: string[], env: Record<string, string>, code: string, exit: number, message: RegExp): Promise<void> {
  const t0 = Date.now();
  const r = await cli(args, env, 180_000);
  const errors = r.stderr.split('\n').filter((l) => l.startsWith('error '));
  assert.equal(errors.length, 1, r.stderr);
  assert.ok(errors[0]!.startsWith(`error ${code}: `), errors[0]);
  assert.match(errors[0]!, message);
  assert.equal(r.code, exit, `exit ${r.code} (signal ${r.signal}): ${r.stderr}`);
  assert.doesNotMatch(r.stderr + r.stdout, /^\s+at /m, 'no stack trace');
  // The worker's start-up deadline for retried errors is 60 s: a refusal must not wait for it.
  assert.ok(Date.now() - t0 < 55_000, `took ${Date.now() - t0} ms`);
}

test('misconfigurations: each gives one coded line naming what to fix', async (t) => {
  const n = names();
  const asAdmin = { ...admin, ...n };
  const asWorker = { ...worker, ...n };
  assert.equal((await cli(['schema', 'apply'], asAdmin)).code, 0);
  assert.equal((await cli(['topic', 'create', '--partitions', '1'], asAdmin)).code, 0);
  const session = await connect(configOf(asAdmin));
  t.after(async () => {
    await session.execute(`DROP KEYSPACE IF EXISTS ${n['EXACTLYONCE_KEYSPACE']}`).catch(() => undefined);
    await session.shutdown();
  });
  const wrong = path.join(o.dir, 'wrong.password');
  writeFileSync(wrong, 'not-the-password\n', { mode: 0o600 });
  const otherCas = path.join(o.dir, 'other-cas.pem');
  writeFileSync(otherCas, rootCertificates.join('\n'));

  await t.test('wrong Cassandra password', () =>
    refused(['run'], { ...asWorker, EXACTLYONCE_CASSANDRA_PASSWORD_FILE: wrong }, 'EO_CASSANDRA_AUTH_FAILED', 11,
      /refused the login \(Provided username exactlyonce_worker and\/or password are incorrect\); check --cassandra-username 'exactlyonce_worker' and its password/));
  await t.test("Cassandra's certificate not trusted (no --cassandra-ca)", () =>
    refused(['run'], { ...asWorker, EXACTLYONCE_CASSANDRA_CA: '', EXACTLYONCE_CASSANDRA_TLS: 'on' }, 'EO_TLS_UNTRUSTED', 11,
      /the server's TLS certificate is not accepted \(SELF_SIGNED_CERT_IN_CHAIN: .*\); give the CA that signed the server's certificate with --cassandra-ca$/));
  await t.test('a Cassandra permission the worker lacks (CREATE)', () =>
    refused(['schema', 'apply', '--keyspace', `eo_sec_denied_${suffix()}`], asWorker, 'EO_NOT_AUTHORIZED', 12,
      /User exactlyonce_worker has no CREATE permission on <all keyspaces>/));
  await t.test('wrong Kafka password', () =>
    refused(['run'], { ...asWorker, EXACTLYONCE_KAFKA_CONFIG: 'sasl.password=not-the-password' }, 'EO_KAFKA_AUTH_FAILED', 11,
      /refused the login of 'exactlyonce-worker' \(SASL authentication error: Authentication failed .*SCRAM-SHA-512.*\); check sasl.username, sasl.password and sasl.mechanisms/));
  // Eight workers at once: a worker once exited on a SIGSEGV about one time in five here (it exited
  // while a client it had given up on was still connecting, src/kafka/client.ts kafkaClientsClosed).
  await t.test("Kafka's certificate not trusted (other CAs), eight workers at once: each exits 11, none on a signal", () =>
    Promise.all(Array.from({ length: 8 }, () =>
      refused(['run'], { ...asWorker, EXACTLYONCE_KAFKA_CONFIG: `ssl.ca.location=${otherCas}` }, 'EO_TLS_UNTRUSTED', 11,
        /the TLS handshake failed \(SSL handshake failed: .*certificate verify failed.*\); give the CA that signed the broker's certificate as ssl.ca.location/))).then(() => undefined));
  await t.test('a missing Kafka ACL (the group)', () =>
    refused(['run'], { ...asWorker, EXACTLYONCE_GROUP: `unlisted-${suffix()}` }, 'EO_NOT_AUTHORIZED', 12,
      /refused 'exactlyonce-worker' access to the group unlisted-[0-9a-f]+ \(Broker: Group authorization failed\); add an ACL for it/));
});

test('no secret appears in anything our commands printed (output, logs, metrics)', () => {
  const secrets = [files.storePassword, files.cassandraAdminPassword, files.cassandraWorkerPassword, files.kafkaAdminPassword, files.kafkaWorkerPassword].map((f) => readFileSync(f, 'utf8').trim());
  const text = printed.join('\n');
  assert.ok(text.length > 10_000, `searched ${text.length} characters`);
  for (const [i, s] of secrets.entries()) assert.equal(text.includes(s), false, `secret #${i} printed`);
  // Nor in the servers' own logs.
  for (const log of ['kafka', 'cassandra'].map((n) => readFileSync(path.join(o.dir, 'logs', `${n}.log`), 'utf8'))) {
    for (const [i, s] of secrets.entries()) assert.equal(log.includes(s), false, `secret #${i} in a server log`);
  }
});
