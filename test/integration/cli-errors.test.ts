import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { BROKERS, cliPath, freshKeyspace, repoRoot, runCli, startCli, testConfig, topicsAdmin, waitFor } from '../helpers.js';
import { connectionArgs } from '../pipeline.js';

test('a bad flag value gets one line naming the flag, and exit code 2', async () => {
  const r = await runCli(['topic', 'create', '--brokers', 'nohost', '--partitions', '3']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, "error EO_CONFIG_INVALID: --brokers: expected host:port[,host:port…] (got 'nohost')\n");
  const p = await runCli(['topic', 'create', '--partitions', 'zero']);
  assert.equal(p.code, 2);
  assert.equal(p.stderr, "error EO_CONFIG_INVALID: --partitions: expected a whole number from 1 to 10000 (got 'zero')\n");
});

test("the dashboard's worker addresses are --worker-metrics; its old name --workers says so", async () => {
  const bad = await runCli(['dashboard', '--worker-metrics', 'nohost']);
  assert.equal(bad.code, 2);
  assert.equal(bad.stderr, "error EO_CONFIG_INVALID: --worker-metrics: expected host:port[,host:port…] (got 'nohost')\n");
  const old = await runCli(['dashboard', '--workers', '127.0.0.1:9100']);
  assert.equal(old.code, 2);
  assert.equal(old.stderr, "error EO_USAGE: --workers is now --worker-metrics (workers' metrics addresses): run `dashboard --worker-metrics 127.0.0.1:9100`\n");
});

test('an unknown flag is a one-line usage error', async () => {
  const r = await runCli(['schema', 'apply', '--nope']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr.split('\n')[0], "error: unknown option '--nope'");
});

test('an unreachable Cassandra names the address and what to run', async () => {
  const r = await runCli(['schema', 'apply', '--cassandra', '127.0.0.1:1']);
  assert.equal(r.code, 4);
  assert.match(r.stderr, /^error EO_CASSANDRA_UNAVAILABLE: Cassandra at 127\.0\.0\.1:1 is not reachable \(.*\); check --cassandra \(or EXACTLYONCE_CASSANDRA\), or for the local stack run `exactlyonce stack up`\n$/);
});

test('an unreachable Kafka names the address, the flag and variable that set it, and the local stack', async () => {
  const hint = '; check --brokers (or EXACTLYONCE_BROKERS), or for the local stack run `exactlyonce stack up`\n';
  const r = await runCli(['topic', 'create', '--brokers', '127.0.0.1:1']);
  assert.equal(r.code, 4);
  assert.match(r.stderr, /^error EO_KAFKA_UNAVAILABLE: Kafka at 127\.0\.0\.1:1 did not answer \(.*\)/);
  assert.ok(r.stderr.endsWith(hint), r.stderr);
  assert.equal(r.stderr.split('\n').length, 2, 'one line');
  // The same through the variable.
  const env = await runCli(['topic', 'create'], { EXACTLYONCE_BROKERS: '127.0.0.1:1' });
  assert.equal(env.code, 4);
  assert.ok(env.stderr.startsWith('error EO_KAFKA_UNAVAILABLE: Kafka at 127.0.0.1:1 did not answer (') && env.stderr.endsWith(hint), env.stderr);
});

test('a keyspace that does not exist: the hint names --keyspace and --job', async () => {
  const r = await runCli(['quarantine', 'list', '--cassandra', '127.0.0.1', '--keyspace', 'eo_no_such_keyspace']);
  assert.equal(r.code, 4);
  assert.equal(
    r.stderr,
    "error EO_CASSANDRA_QUERY: keyspace 'eo_no_such_keyspace' does not exist at 127.0.0.1; run `exactlyonce schema apply --keyspace eo_no_such_keyspace` " +
      "(with `--job <module or sink config>` for a job of your own: it also creates the job's tables)\n",
  );
});

test('verify --job on a table that does not exist: one coded line naming the command that creates it, no stack trace', async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  const admin = topicsAdmin(t, config, [config.topic]);
  await admin.ensureTopic({ topic: config.topic, partitions: 1, replicationFactor: 1 });
  const dir = mkdtempSync(join(tmpdir(), 'eo-verify-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'orders.yaml');
  writeFileSync(file, `name: orders\ntopic: ${config.topic}\ntable: orders\nmode: log\ncolumns:\n  id: bigint\n`);
  const r = await runCli(['verify', ...connectionArgs(config), '--job', file, '--no-record']);
  assert.equal(
    r.stderr,
    `error EO_SINK_TABLE_INVALID: table ${config.keyspace}.orders does not exist: nothing to verify; run \`exactlyonce schema apply --job ${file} --keyspace ${config.keyspace}\` (and the job's workers) first\n`,
  );
  assert.equal(r.code, 5);
});

test('--version and -V print the package version on one line', async () => {
  const { version } = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { version: string };
  for (const flag of ['--version', '-V']) {
    const r = await runCli([flag]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `exactlyonce ${version}\n`);
    assert.equal(r.stderr, '');
  }
});

test('without its dependencies, bin/exactlyonce names what is missing: `make deps` in a clone, a reinstall in a project', (t) => {
  // A clone of bin/exactlyonce and a source file: first no node_modules at all, then the npm packages without the client's build.
  const root = mkdtempSync(join(tmpdir(), 'eo-nodeps-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  mkdirSync(join(root, 'bin'));
  copyFileSync(cliPath, join(root, 'bin', 'exactlyonce'));
  const run = () => spawnSync(join(root, 'bin', 'exactlyonce'), ['--version'], { encoding: 'utf8' });
  // An installed package ships its build and no sources: without the build it says to reinstall.
  const noBuild = run();
  assert.equal(noBuild.status, 3);
  assert.equal(noBuild.stdout, '');
  assert.equal(noBuild.stderr, `error EO_DEPS_MISSING: the package's build is missing (${root}/dist/src/cli/main.js); reinstall it: npm install exactlyonce\n`);
  mkdirSync(join(root, 'src', 'cli'), { recursive: true });
  writeFileSync(join(root, 'src', 'cli', 'main.ts'), '');
  const noPackages = run();
  assert.equal(noPackages.status, 3);
  assert.equal(noPackages.stdout, '');
  assert.equal(noPackages.stderr, `error EO_DEPS_MISSING: the npm packages are not installed (no node_modules/tsx); run \`make deps\` (scripts/install-deps.sh) in ${root}\n`);
  mkdirSync(join(root, 'node_modules', 'tsx'), { recursive: true });
  const noClient = run();
  assert.equal(noClient.status, 3);
  assert.equal(
    noClient.stderr,
    `error EO_KAFKA_CLIENT_MISSING: the Kafka client's native build is missing (node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node); run \`make deps\` (scripts/install-deps.sh) in ${root}\n`,
  );
});

test('--help lists every command', async () => {
  const r = await runCli(['--help']);
  assert.equal(r.code, 0);
  for (const c of ['stack', 'schema', 'topic', 'generate', 'run', 'quarantine', 'cql']) assert.match(r.stdout, new RegExp(`\\n  ${c}\\b`));
});

test('a worker whose topic or alerts topic does not exist exits with one line saying what to run', async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  const noTopic = await runCli(['run', ...connectionArgs(config)]);
  assert.equal(noTopic.code, 5);
  assert.equal(
    noTopic.stderr.split('\n').filter((l) => l.startsWith('error')).join('\n'),
    `error EO_TOPIC_MISMATCH: topic ${config.topic} does not exist at ${BROKERS}; run \`exactlyonce topic create --topic ${config.topic} --alerts-topic ${config.alertsTopic}\``,
  );
  const admin = topicsAdmin(t, config, [config.topic]);
  await admin.ensureTopic({ topic: config.topic, partitions: 1, replicationFactor: 1 });
  const noAlertsTopic = await runCli(['run', ...connectionArgs(config)]);
  assert.equal(noAlertsTopic.code, 5);
  assert.equal(
    noAlertsTopic.stderr.split('\n').filter((l) => l.startsWith('error')).join('\n'),
    `error EO_TOPIC_MISMATCH: output topic ${config.alertsTopic} does not exist at ${BROKERS}; run \`exactlyonce topic create --topic ${config.topic} --alerts-topic ${config.alertsTopic}\``,
  );
});

test("a sink whose topic does not exist: the hint creates that topic", async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  const dir = mkdtempSync(join(tmpdir(), 'eo-sink-topic-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'orders.yaml');
  writeFileSync(file, `name: orders\ntopic: ${config.topic}\ntable: orders\nmode: log\ncolumns:\n  id: bigint\n`);
  const r = await runCli(['sink', '--config', file, ...connectionArgs(config)]);
  assert.equal(r.stderr.split('\n').filter((l) => l.startsWith('error')).join('\n'), `error EO_TOPIC_MISMATCH: topic ${config.topic} does not exist at ${BROKERS}; run \`exactlyonce topic create --topic ${config.topic} --no-alerts\``);
  assert.equal(r.code, 5);
});

test('a topic created a moment after the worker starts (metadata still spreading) is waited for, not refused', async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  const admin = topicsAdmin(t, config, [config.topic, config.alertsTopic]);
  assert.equal((await runCli(['schema', 'apply', ...connectionArgs(config)])).code, 0);
  await admin.ensureTopic({ topic: config.topic, partitions: 1, replicationFactor: 1 });
  const worker = startCli(t, ['run', ...connectionArgs(config)]);
  // The alerts topic appears 3 s later: within the worker's 10 s of asking again.
  await new Promise((r) => setTimeout(r, 3000));
  await admin.ensureTopic({ topic: config.alertsTopic, partitions: 1, replicationFactor: 1 });
  await waitFor(() => worker.output().includes('"msg":"worker started"') || worker.exitCode !== null, { timeoutMs: 60_000, message: 'the worker starts or exits' });
  assert.equal(worker.exitCode, null, worker.output().slice(-1500));
  assert.doesNotMatch(worker.output(), /EO_TOPIC_MISMATCH/);
});

test('a keyspace an older version made (a column this version writes is missing) refuses a worker with one line: run schema apply; its schema_migrations rows lost in a crash do not', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = topicsAdmin(t, config, [config.topic, config.alertsTopic]);
  await admin.ensureTopic({ topic: config.topic, partitions: 1, replicationFactor: 1 });
  await admin.ensureTopic({ topic: config.alertsTopic, partitions: 1, replicationFactor: 1 });
  // What a periodic commit log's crash can take back: the rows recording the migrations (not the tables).
  await session.execute(`TRUNCATE ${config.keyspace}.schema_migrations`);
  const started = startCli(t, ['run', ...connectionArgs(config)]);
  await waitFor(() => /"msg":"worker started"/.test(started.output()) || undefined, { timeoutMs: 60_000, message: 'the worker starts' });
  started.kill('SIGTERM');
  await session.execute(`ALTER TABLE ${config.keyspace}.checkpoints DROP replay`);
  const old = await runCli(['run', ...connectionArgs(config)]);
  assert.equal(old.code, 4);
  assert.equal(
    old.stderr.split('\n').filter((l) => l.startsWith('error')).join('\n'),
    `error EO_CASSANDRA_QUERY: keyspace ${config.keyspace} lacks checkpoints.replay (schema migration 060_checkpoint_replay), which this version writes; run \`exactlyonce schema apply --keyspace ${config.keyspace}\` (it changes nothing already there)`,
  );
});

test('chaos --job with a sink config that has a typo: one line naming the key, before any keyspace or topic is made', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-typo-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'orders.yaml');
  writeFileSync(file, 'name: o\ntopic: t\ntable: o\nmode: upsert\nkey: [id]\nwher: { field: a, exists: true }\ncolumns:\n  id: bigint\n  a: text\n');
  const r = await runCli(['chaos', '--job', file, '--events', '100', '--seed', '2', '--cassandra-restarts', '0', '--kafka-restarts', '0']);
  assert.equal(r.code, 2);
  assert.equal(r.stderr, `error EO_CONFIG_INVALID: ${file}: wher: unknown key (did you mean where?)\n`);
  // (Before, the run's keyspace and topics were made first, and kept as a failed run's are.)
  assert.doesNotMatch(r.stdout, /created keyspace/);
});
