/**
 * A user of the npm package, not of this clone: `npm pack`, then a new project outside the repository
 * installs the tarball offline from the npm cache (`make deps` fills it), builds the Kafka client
 * (`npx exactlyonce setup`, from the build cached in ~/.cache), writes a job that imports 'exactlyonce'
 * and a sink config, and runs the commands a user runs from there against the test stack (the bench too,
 * on a tiny scale). Nothing may be written inside node_modules/exactlyonce.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { test, type TestContext } from 'node:test';
import { isDrained } from '../../src/harness/drain.js';
import { Producer } from '../../src/kafka/producer.js';
import { BROKERS, CASSANDRA, CASSANDRA_PORT, cassandraSession, type CliResult, freshTopic, KAFKA_PORT, localStack, repoRoot, runProcess, testConfig, topicsAdmin, waitFor } from '../helpers.js';
import { freePort } from '../pipeline.js';

/** Runs a command to completion (npm, npx, tsc) in `cwd`, and how long it took. */
async function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv = process.env): Promise<CliResult & { ms: number }> {
  const started = Date.now();
  const r = await runProcess(cmd, args, { cwd, env, timeoutMs: 600_000 });
  return { ...r, ms: Date.now() - started };
}

/**
 * A long-running command of the installed package (`run`, `sink`, `dashboard`), started as npx starts
 * it (node_modules/.bin/exactlyonce) but without npx in between, so that SIGTERM reaches it.
 */
function background(t: TestContext, project: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess & { output: () => string } {
  const child = spawn(join(project, 'node_modules', '.bin', 'exactlyonce'), args, { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr!.on('data', (d) => (output += d));
  t.after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return Object.assign(child, { output: () => output });
}

async function stop(child: ChildProcess & { output: () => string }, what: string): Promise<void> {
  child.kill('SIGTERM');
  await waitFor(() => child.exitCode !== null || child.signalCode !== null, { timeoutMs: 60_000, message: `${what} stops on SIGTERM` });
  assert.equal(child.exitCode, 0, `${what}: ${child.output().slice(-2000)}`);
}

/** Every file under `dir` with its size and modification time, to tell whether anything was written there. */
function snapshot(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      const s = lstatSync(p);
      out.set(relative(dir, p), `${s.size} ${s.mtimeMs}`);
    }
  };
  walk(dir);
  return out;
}

/** What the package ships (package.json "files"), and nothing else: the build with its types, the launcher, the stack's files… */
const SHIPPED = [/^package\.json$/, /^README\.md$/, /^LICENSE$/, /^bin\/exactlyonce$/, /^dist\/(src|bench)\/.+\.(js|d\.ts|cql|html|css)$/, /^stack\/[^/]+$/, /^scripts\/kafka-client\.sh$/, /^monitoring\/[^/]+\.(json|yml)$/, /^examples\/.+$/, /^docs\/[^/]+\.md$/];
const REQUIRED = [
  'LICENSE',
  'README.md',
  'bin/exactlyonce',
  'dist/src/index.js',
  'dist/src/index.d.ts',
  'dist/src/cli/main.js',
  'dist/src/cassandra/migrations/001_original_tables.cql',
  'dist/src/dashboard/static/index.html',
  'dist/src/dashboard/static/app.js',
  'stack/pom.xml',
  'stack/KafkaSecureSetup.java',
  'scripts/kafka-client.sh',
  'monitoring/grafana-dashboard.json',
  'monitoring/prometheus-rules.yml',
  'examples/page-views/job.ts',
];

/** The user's job: greetings `{"name": "Ada", "count": 3}` into a table of its own, one row per record. */
const JOB = `import type { Client, Decoded, DecodedRecord, Expectation, Job, JobFactoryContext, SourceRecord } from 'exactlyonce';
import { consistencies, toLong } from 'exactlyonce';

interface Greeting { name: string; count: number }

function decode(record: SourceRecord): Decoded<Greeting> {
  try {
    const v = JSON.parse(record.value?.toString('utf8') ?? '') as Partial<Greeting>;
    if (typeof v.name === 'string' && Number.isInteger(v.count)) return { ok: true, value: { name: v.name, count: v.count! } };
  } catch {
    // not JSON
  }
  return { ok: false, reason: 'not_a_greeting', detail: 'expected {"name": string, "count": int}' };
}

export default function createJob(context: JobFactoryContext): Job<Greeting> {
  const keyspace = context.config.keyspace;
  let session: Client | undefined;
  return {
    name: 'greetings',
    migrations: [{ version: 1, name: 'greetings', cql: 'CREATE TABLE IF NOT EXISTS {{keyspace}}.greetings (partition int, offset bigint, name text, count int, PRIMARY KEY (partition, offset))' }],
    decode,
    async open(ctx) {
      session = ctx.session;
    },
    async write(partition: number, records: readonly DecodedRecord<Greeting>[]) {
      // Rows keyed by (partition, offset) with the record's values: a replay writes the same rows.
      await session!.batch(
        records.map(({ record, value }) => ({
          query: \`INSERT INTO \${keyspace}.greetings (partition, offset, name, count) VALUES (?, ?, ?, ?)\`,
          params: [partition, toLong(record.offset), value.name, value.count],
        })),
        { prepare: true, logged: false, consistency: consistencies.localQuorum },
      );
    },
    audit: {
      table: 'greetings',
      mode: 'log',
      keyColumns: ['partition', 'offset'],
      columns: ['name', 'count'],
      expect(record: SourceRecord): Expectation {
        const d = decode(record);
        return d.ok ? { kind: 'row', key: { partition: record.partition, offset: record.offset }, row: { name: d.value.name, count: d.value.count } } : { kind: 'quarantine', reason: d.reason };
      },
    },
  };
}
`;

test('a user installs the packed package into a new project offline, runs a job of their own, a sink, verify and the dashboard from there; nothing is written inside node_modules/exactlyonce', async (t) => {
  const project = mkdtempSync(join(tmpdir(), 'exactlyonce-user-'));
  t.after(() => rmSync(project, { recursive: true, force: true }));
  assert.ok(relative(repoRoot, project).startsWith('..'), `${project} is outside the repository`);
  const say = (line: string) => t.diagnostic(line);

  // npm pack: prepack builds; the tarball holds what a user needs and nothing else.
  const packDir = join(project, 'pack');
  mkdirSync(packDir);
  const pack = await run('npm', ['pack', '--json', '--pack-destination', packDir], repoRoot);
  assert.equal(pack.code, 0, pack.stderr);
  const packed = (JSON.parse(pack.stdout.slice(pack.stdout.indexOf('['))) as Array<{ filename: string; size: number; unpackedSize: number; entryCount: number; files: Array<{ path: string }> }>)[0]!;
  const files = packed.files.map((f) => f.path);
  assert.deepEqual(files.filter((f) => !SHIPPED.some((re) => re.test(f))), [], 'nothing outside "files"');
  assert.deepEqual(REQUIRED.filter((f) => !files.includes(f)), [], 'everything a user needs');
  say(`npm pack: ${packed.filename}, ${(packed.size / 1024).toFixed(0)} KiB packed, ${(packed.unpackedSize / 1024).toFixed(0)} KiB unpacked, ${packed.entryCount} files (${(pack.ms / 1000).toFixed(1)} s with the build)`);

  // The user's project: a new folder, the tarball installed offline, the Kafka client built (copied from ~/.cache).
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'my-pipeline', private: true, type: 'module' }, null, 2));
  const install = await run('npm', ['install', '--offline', '--ignore-scripts', '--no-audit', '--no-fund', join(packDir, packed.filename)], project);
  assert.equal(install.code, 0, `npm install --offline (the npm cache is filled by make deps): ${install.stderr}`);
  const pkg = join(project, 'node_modules', 'exactlyonce');
  assert.ok(lstatSync(pkg).isDirectory(), 'installed as a folder, not a link');
  assert.ok(!existsSync(join(pkg, 'node_modules')), 'its dependencies are hoisted into the project, where Node finds them');
  const before = snapshot(pkg);
  // Before `setup`, a command that needs the Kafka client says what to run (not `make deps`: there is no clone here).
  const noClient = await run('npx', ['--no', 'exactlyonce', 'topic', 'create', '--brokers', '127.0.0.1:1'], project);
  assert.equal(noClient.code, 3, noClient.stderr);
  assert.match(noClient.stderr, /^error EO_KAFKA_CLIENT_MISSING: the Kafka client @confluentinc\/kafka-javascript does not load \(.+\): its native part is not built; run `npx exactlyonce setup`\n$/);
  const setup = await run('npx', ['--no', 'exactlyonce', 'setup'], project);
  assert.equal(setup.code, 0, setup.stdout + setup.stderr);
  assert.match(setup.stdout, /^Kafka client [\d.]+: ready \(.*\/node_modules\/@confluentinc\/kafka-javascript\) with: .*\bzstd\b.*$/m);
  say(`first install: npm install --offline ${(install.ms / 1000).toFixed(1)} s, npx exactlyonce setup ${(setup.ms / 1000).toFixed(1)} s (${/using the build cached/.test(setup.stdout) ? 'copied from ~/.cache' : 'built'})`);

  // The job and its types, as the user's editor sees them.
  writeFileSync(join(project, 'job.ts'), JOB);
  writeFileSync(
    join(project, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, noEmit: true, skipLibCheck: true, types: ['node'], typeRoots: [join(repoRoot, 'node_modules', '@types')] }, include: ['job.ts'] }),
  );
  const types = await run(join(repoRoot, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], project);
  assert.equal(types.code, 0, `the job type-checks against the package's types: ${types.stdout}${types.stderr}`);

  const config = testConfig();
  const session = await cassandraSession(t, config);
  await freshTopic(t, config, 3);
  const ordersTopic = `${config.topic}-orders`;
  const admin = topicsAdmin(t, config, [ordersTopic]);
  await admin.ensureTopic({ topic: ordersTopic, partitions: 2, replicationFactor: 1 });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    EXACTLYONCE_BROKERS: BROKERS,
    EXACTLYONCE_CASSANDRA: CASSANDRA,
    EXACTLYONCE_KEYSPACE: config.keyspace,
    EXACTLYONCE_TOPIC: config.topic,
    EXACTLYONCE_KAFKA_PORT: String(KAFKA_PORT),
    EXACTLYONCE_CASSANDRA_PORT: String(CASSANDRA_PORT),
    EXACTLYONCE_LOG_FORMAT: 'json',
  };
  delete env['EXACTLYONCE_STACK_DIR'];
  const eo = (args: string[], e = env) => run('npx', ['--no', 'exactlyonce', ...args], project, e);

  // The stack's folder is the project's own (./.stack), never the package's; none runs there, so status
  // names the one serving the ports (the test stack, used through EXACTLYONCE_STACK_DIR below).
  const stackDir = (await localStack()).dir;
  const status = await eo(['stack', 'status']);
  assert.deepEqual(
    status.stdout.split('\n').slice(0, 2),
    [
      `no stack runs from ${join(project, '.stack')} (./.stack of the working directory; --stack-dir or EXACTLYONCE_STACK_DIR point elsewhere); ` +
        `the one serving 127.0.0.1:${KAFKA_PORT} is in ${resolve(stackDir)} (commands here use it; for \`stack\` commands: --stack-dir ${resolve(stackDir)})`,
      `stack in ${resolve(stackDir)}`,
    ],
    status.stderr,
  );
  const up = await eo(['stack', 'up'], { ...env, EXACTLYONCE_STACK_DIR: stackDir });
  assert.equal(up.code, 0, up.stderr);
  assert.match(up.stdout, /^stack already up/);
  assert.ok(up.stdout.includes(`jars, data and logs in ${stackDir} `), up.stdout);

  // The user's job: its tables, a worker, the proof, the dashboard.
  const apply = await eo(['schema', 'apply', '--job', 'job.ts']);
  assert.equal(apply.code, 0, apply.stderr);
  assert.match(apply.stdout, /applied greetings\/1_greetings/);
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const greetings = Array.from({ length: 60 }, (_, i) => ({ key: `k${i}`, partition: i % 3, value: i % 10 === 7 ? 'hello?' : JSON.stringify({ name: `user-${i}`, count: i }) }));
  await producer.send(config.topic, greetings);
  const metricsPort = await freePort();
  const worker = background(t, project, ['run', '--job', 'job.ts', '--group', `${config.group}-greetings`, '--metrics-port', String(metricsPort)], env);
  const marks = await admin.watermarks(config.topic);
  const jobCheckpoints = async (job: string, topic: string) =>
    new Map((await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ?`, [job, topic])).rows.map((r) => [r['partition'] as number, BigInt(String(r['next_offset']))]));
  await waitFor(async () => isDrained(marks, await jobCheckpoints('greetings', config.topic)), { timeoutMs: 180_000, intervalMs: 500, message: 'the job reaches the log ends' }).catch((e: Error) =>
    assert.fail(`${e.message}\n${worker.output().slice(-3000)}`),
  );
  const rows = await session.execute(`SELECT partition, offset, name, count FROM ${config.keyspace}.greetings`);
  assert.deepEqual(
    rows.rows.map((r) => `${r['partition']}/${r['offset']} ${r['name']} ${r['count']}`).sort(),
    greetings.flatMap((g, i) => (i % 10 === 7 ? [] : [`${i % 3}/${Math.floor(i / 3)} user-${i} ${i}`])).sort(),
  );
  const verify = await eo(['verify', '--job', 'job.ts', '--json']);
  assert.equal(verify.code, 0, verify.stdout.slice(-2000) + verify.stderr);
  const report = JSON.parse(verify.stdout) as { ok: boolean; job: string; violationTotal: number; totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.ok, report.job, report.violationTotal, report.totals.records, report.totals.stored, report.totals.quarantined], [true, 'greetings', 0, 60, 54, 6]);

  const dashboard = background(t, project, ['dashboard', '--port', '0'], env);
  const url = await waitFor(() => /^dashboard: (http:\/\/\S+)/m.exec(dashboard.output())?.[1], { timeoutMs: 60_000, message: 'the dashboard prints its address' }).catch((e: Error) =>
    assert.fail(`${e.message}\n${dashboard.output()}`),
  );
  const page = await fetch(url);
  assert.equal(page.status, 200);
  assert.match(await page.text(), /<script src="\/app\.js"><\/script>/);
  for (const asset of ['app.js', 'style.css', 'vendor/uplot.js']) assert.equal((await fetch(`${url}${asset}`)).status, 200, asset);
  await waitFor(
    async () => {
      const { snapshot: s } = (await (await fetch(`${url}api/snapshot`)).json()) as { snapshot: { totals: { workers: number; stored: number; quarantined: number } } | null };
      return s !== null && s.totals.workers === 1 && s.totals.stored === 54 && s.totals.quarantined === 6;
    },
    { timeoutMs: 60_000, intervalMs: 500, message: "the dashboard shows the job's worker: 54 stored, 6 quarantined" },
  );
  await stop(dashboard, 'dashboard');
  await stop(worker, 'the job worker');

  // A sink from a config file, upsert mode: the table equals the last record per key.
  writeFileSync(
    join(project, 'orders.yaml'),
    [`name: orders`, `topic: ${ordersTopic}`, `table: orders`, `mode: upsert`, `key: [order_id]`, `columns:`, `  order_id: { type: bigint, field: id }`, `  status: { type: text, required: true }`, ''].join('\n'),
  );
  const sinkApply = await eo(['schema', 'apply', '--job', 'orders.yaml']);
  assert.equal(sinkApply.code, 0, sinkApply.stderr);
  const orders = Array.from({ length: 40 }, (_, i) => ({ key: String(i % 10), value: JSON.stringify({ id: i % 10, status: `step-${Math.floor(i / 10)}` }) }));
  await producer.send(ordersTopic, orders);
  const sink = background(t, project, ['sink', '--config', 'orders.yaml', '--group', `${config.group}-orders`], env);
  const orderMarks = await admin.watermarks(ordersTopic);
  await waitFor(async () => isDrained(orderMarks, await jobCheckpoints('orders', ordersTopic)), { timeoutMs: 180_000, intervalMs: 500, message: 'the sink reaches the log ends' }).catch((e: Error) =>
    assert.fail(`${e.message}\n${sink.output().slice(-3000)}`),
  );
  const stored = await session.execute(`SELECT order_id, status FROM ${config.keyspace}.orders`);
  assert.deepEqual(stored.rows.map((r) => `${r['order_id']} ${r['status']}`).sort(), Array.from({ length: 10 }, (_, id) => `${id} step-3`).sort());
  const sinkVerify = await eo(['verify', '--job', 'orders.yaml']);
  assert.equal(sinkVerify.code, 0, sinkVerify.stdout.slice(-2000) + sinkVerify.stderr);
  await stop(sink, 'the sink');

  // The bench's child processes run from the package's build; its results land in the project.
  const bench = await eo(['bench', '--cases', 'ceiling', '--events', '1000', '--partitions', '2', '--ceiling-concurrency', '8', '--ceiling-sweep-events', '500']);
  assert.equal(bench.code, 0, bench.stderr.slice(-3000));
  assert.match(bench.stdout, /^ ceiling +\| 1,000 +\|/m);
  const results = readdirSync(join(project, 'bench', 'results')).sort();
  assert.equal(results.length, 2, results.join(' '));
  assert.match(results.join(' '), /^bench-\S+\.json bench-\S+\.svg$/);

  // Nothing was written inside the package: no stack folder, no results, no build.
  const after = snapshot(pkg);
  assert.deepEqual(
    [...new Set([...before.keys(), ...after.keys()])].filter((f) => before.get(f) !== after.get(f)),
    [],
    'files added, changed or removed inside node_modules/exactlyonce',
  );
});
