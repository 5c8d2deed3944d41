// The image and deploy/kubernetes as real pods (issue 41): `podman kube play --network host` runs the
// sink's Deployment, its ConfigMaps and its Secret against the test stack, while records flow one pod is
// SIGKILLed, the sink scales 3 -> 1 -> 3 and every pod is replaced in turn; then `verify --job` passes
// and every offset is stored exactly once.
//
// What podman changes, and why the manifests are rendered rather than played as they are:
// - With the host's network every pod shares one port space, so each replica gets a metrics port of its
//   own: the Deployment is played once per replica ("slot", replicas 1, name -0, -1, -2), scaling is
//   playing or removing slots, and a rolling replace is one slot at a time (SIGTERM, then play again).
//   On Kubernetes each pod has its own address and the one Deployment serves (replicas: N). podman
//   also refuses `ports:` (a port mapping) on the host's network, so the rendered copy has none.
// - podman 4.3.1 writes a Secret volume's values still base64-encoded (and ignores stringData), so the
//   Secret is created with `podman secret create` from a copy whose `data` holds the plain values;
//   the test reads the mounted token back to prove the files are what the worker needs.
// - podman runs no probes without systemd: the test asks /readyz itself (with the token, as Prometheus
//   would) and runs the image's exactlyonce-probe once in a pod, the command the manifests' probes run.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test, type TestContext } from 'node:test';
import { parseAllDocuments, stringify } from 'yaml';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { isDrained } from '../../src/harness/drain.js';
import { sleep } from '../../src/harness/sleep.js';
import { Producer } from '../../src/kafka/producer.js';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { connect } from '../../src/cassandra/session.js';
import { loadConnectionConfig } from '../../src/config.js';
import { BROKERS, CASSANDRA, cassandraSession, freshKeyspace, freshTopic, repoRoot, runCli, runProcess, testConfig, waitFor } from '../helpers.js';

const PARTITIONS = 6;
const VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const IMAGE = `localhost/exactlyonce:${VERSION}`;
const kube = path.join(repoRoot, 'deploy/kubernetes');

/** Why the test cannot run here, or undefined: podman is installed by scripts/image.sh where apt-get and root allow. */
function skipReason(): string | undefined {
  const has = (cmd: string) => {
    try {
      execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };
  if (has('podman') && process.getuid?.() === 0) return undefined;
  if (process.getuid?.() !== 0) return 'podman runs as root on our machines (rootless is not tried) and this is not root';
  if (!has('apt-get')) return 'podman is missing and cannot be installed (no apt-get)';
  return undefined;
}

async function podman(args: string[], timeoutMs = 120_000): Promise<string> {
  const r = await runProcess('podman', args, { timeoutMs });
  if (r.code !== 0) throw new Error(`podman ${args.join(' ')} exited ${r.code}: ${r.stderr.trim().slice(-600)}`);
  return r.stdout;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Doc = any;
const load = (file: string): Doc[] => parseAllDocuments(readFileSync(path.join(kube, file), 'utf8')).map((d) => d.toJS());

/** A Deployment of the manifests as podman runs it on the host's network: one replica, its own port and names, the local image. */
function forPodman(deployment: Doc, o: { name: string; port: number; connection: string; configMap?: string; secret: string }): Doc {
  const d = structuredClone(deployment);
  d.metadata.name = o.name;
  d.spec.replicas = 1;
  const pod = d.spec.template.spec;
  const c = pod.containers[0];
  c.image = IMAGE;
  c.args = c.args.map((a: string) => a.replace(/^--metrics-port=9464$/, `--metrics-port=${o.port}`));
  for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) c[probe].exec.command = c[probe].exec.command.map((x: string) => (x === '9464' ? String(o.port) : x));
  // podman refuses port mappings on the host's network (the port is the host's already).
  delete c.ports;
  c.envFrom[0].configMapRef.name = o.connection;
  for (const v of pod.volumes) {
    if (v.configMap) v.configMap.name = o.configMap;
    // podman 4.3.1 dereferences `optional` without checking it is set.
    if (v.secret) v.secret = { ...v.secret, secretName: o.secret, optional: false };
    // podman 4.3.1 makes an emptyDir a named volume, named after it, shared by every pod that names it
    // (and pods played at once race to create it: "volume already exists"): one of its own per pod, as
    // Kubernetes gives each pod.
    if (v.emptyDir) {
      for (const m of c.volumeMounts) if (m.name === v.name) m.name = `${o.name}-${v.name}`;
      v.name = `${o.name}-${v.name}`;
    }
  }
  return d;
}

/** The manifests' Secret for the test stack, as a podman secret named `${name}-credentials`, removed when the test ends. */
async function createSecret(t: TestContext, dir: string, name: string, token: string, files: Record<string, string> = {}): Promise<string> {
  const [secret] = load('secret.example.yaml');
  const secretName = `${name}-credentials`;
  const plain = { 'http-token': `${token}\n`, 'kafka.properties': 'security.protocol=PLAINTEXT\n', 'cassandra.password': 'unused-on-the-test-stack\n', ...files };
  assert.deepEqual(Object.keys(secret.stringData).sort(), [...new Set([...Object.keys(plain), 'ca.pem'])].sort(), 'the example Secret holds the files the Deployment names');
  const secretFile = path.join(dir, `${secretName}.yaml`);
  // podman 4.3.1 writes `data` values to the volume as they are in the YAML (not base64-decoded).
  writeFileSync(secretFile, stringify({ ...secret, metadata: { ...secret.metadata, name: secretName }, stringData: undefined, data: plain }), { mode: 0o600 });
  await podman(['secret', 'create', secretName, secretFile]);
  t.after(() => podman(['secret', 'rm', secretName]).catch(() => undefined));
  // podman keeps a pod's Secret, ConfigMap and emptyDir volumes (named after them: forPodman) when the pod goes.
  t.after(async () => {
    const emptyDirs = (await podman(['volume', 'ls', '--format', '{{.Name}}']).catch(() => '')).split('\n').filter((v) => v.startsWith(`${name}`) && v.endsWith('-tmp'));
    await podman(['volume', 'rm', '-f', secretName, `${name}-sink`]).catch(() => undefined);
    if (emptyDirs.length > 0) await podman(['volume', 'rm', '-f', ...emptyDirs]).catch(() => undefined);
  });
  return secretName;
}

/** The connection ConfigMap pointed at the test stack (plaintext: no CA). */
function testConnection(name: string, config: ReturnType<typeof testConfig>, extra: Record<string, string> = {}): Doc {
  const [connection] = load('connection.yaml');
  const conn = { ...connection, metadata: { ...connection.metadata, name: `${name}-connection` } };
  conn.data = { ...conn.data, EXACTLYONCE_BROKERS: BROKERS, EXACTLYONCE_CASSANDRA: CASSANDRA, EXACTLYONCE_DATACENTER: config.datacenter, EXACTLYONCE_KEYSPACE: config.keyspace, ...extra };
  delete conn.data.EXACTLYONCE_CASSANDRA_CA;
  return conn;
}

test('the image runs the sink from deploy/kubernetes as pods through a SIGKILL, 3 -> 1 -> 3 and a rolling replace: verify --job passes, every offset stored once', { skip: skipReason() }, async (t) => {
  // The image: built, or reused when its inputs did not change (scripts/image.sh; the first build on a
  // machine makes the base and compiles the Kafka client, several minutes on 2 cores).
  let t0 = Date.now();
  const built = await runProcess(path.join(repoRoot, 'scripts/image.sh'), [], { timeoutMs: 1_500_000 });
  assert.equal(built.code, 0, built.stdout.slice(-2000) + built.stderr.slice(-2000));
  const imageMs = Date.now() - t0;
  const sizeMiB = Math.round(Number((await podman(['image', 'inspect', '--format', '{{.Size}}', IMAGE])).trim()) / 2 ** 20);

  const config = testConfig();
  const s = config.keyspace.replace(/^eo_test_/, '');
  const name = `eo-pods-${s}`;
  await cassandraSession(t, config); // drops the keyspace when the test ends
  await freshTopic(t, config, PARTITIONS);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-pods-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const logs = path.join(repoRoot, 'test-artifacts', 'pods');
  mkdirSync(logs, { recursive: true });

  // The sink (log mode: one row per partition and offset), as the manifests' ConfigMap holds one.
  const sinkYaml = stringify({ name: `pods_${s}`, topic: config.topic, table: 'pods', mode: 'log', columns: { n: { type: 'int', required: true } } });
  const sinkFile = path.join(dir, 'sink.yaml');
  writeFileSync(sinkFile, sinkYaml);
  chmodSync(sinkFile, 0o644);

  // The image's own `schema apply --job` makes the keyspace and the sink's table (IMAGE <command> works).
  const apply = await podman(['run', '--rm', '--network', 'host', '--read-only', '--tmpfs', '/tmp', '-v', `${sinkFile}:/etc/exactlyonce/sink.yaml:ro`, IMAGE, 'schema', 'apply', '--job', '/etc/exactlyonce/sink.yaml', ...connectionArgs(config)], 300_000);
  assert.match(apply, /pods/);

  // The Secret: the token, the Kafka properties and the Cassandra password as files.
  const token = randomBytes(24).toString('hex');
  const secretName = await createSecret(t, dir, name, token);

  // The manifests, for slot i: the connection to the test stack, the sink's config, the image, a port.
  const [sinkConfig] = load('sink-config.yaml');
  const [deployment] = load('sink-deployment.yaml');
  assert.equal(deployment.spec.replicas, 3);
  assert.ok(!String(deployment.spec.template.spec.containers[0].image).endsWith(':latest'));
  const conn = testConnection(name, config);
  const sinkMap = { ...sinkConfig, metadata: { ...sinkConfig.metadata, name: `${name}-sink` }, data: { 'sink.yaml': sinkYaml } };
  const basePort = 19460 + (parseInt(s.slice(0, 4), 16) % 400) * 10;
  const slotFile = (i: number) => path.join(dir, `slot-${i}.yaml`);
  for (let i = 0; i < 3; i++) {
    const d = forPodman(deployment, { name: `${name}-${i}`, port: basePort + i, connection: conn.metadata.name, configMap: sinkMap.metadata.name, secret: secretName });
    writeFileSync(slotFile(i), [conn, sinkMap, d].map((x) => stringify(x)).join('---\n'));
  }
  const podName = (i: number) => `${name}-${i}-pod-0`;
  const container = (i: number) => `${podName(i)}-sink`;
  const running = new Set<number>();
  const readyMs: number[] = [];
  const keepLogs = async (i: number) => {
    const r = await runProcess('podman', ['logs', container(i)], { timeoutMs: 30_000 });
    writeFileSync(path.join(logs, `${container(i)}-${Date.now()}.log`), r.stdout + r.stderr);
  };
  const ready = async (i: number) => {
    const r = await fetch(`http://127.0.0.1:${basePort + i}/readyz`, { headers: { authorization: `Bearer ${token}` } }).catch(() => undefined);
    return r?.status === 200;
  };
  /** Plays slot i and waits until its worker is ready; returns the time from play to ready. */
  const start = async (i: number) => {
    const began = Date.now();
    await podman(['kube', 'play', '--network', 'host', slotFile(i)], 180_000);
    running.add(i);
    await waitFor(
      async () => {
        const state = (await podman(['inspect', '--format', '{{.State.Status}}', container(i)])).trim();
        if (state !== 'running') throw new Error(`${container(i)} is ${state}`);
        return ready(i);
      },
      { timeoutMs: 180_000, intervalMs: 250, message: `${podName(i)} ready` },
    );
    readyMs.push(Date.now() - began);
  };
  /** Removes slot i: SIGTERM and the drain (`podman pod stop`, the grace period), or SIGKILL of its worker. */
  const remove = async (i: number, how: 'SIGTERM' | 'SIGKILL') => {
    if (how === 'SIGKILL') await podman(['kill', '--signal', 'KILL', container(i)]);
    else await podman(['pod', 'stop', '-t', String(deployment.spec.template.spec.terminationGracePeriodSeconds), podName(i)], 120_000);
    const code = (await podman(['inspect', '--format', '{{.State.ExitCode}}', container(i)])).trim();
    await keepLogs(i);
    await podman(['pod', 'rm', '-f', podName(i)]);
    running.delete(i);
    return code;
  };
  t.after(async () => {
    for (const i of [...running]) await remove(i, 'SIGKILL').catch(() => undefined);
  });

  // Three replicas.
  t0 = Date.now();
  await Promise.all([0, 1, 2].map((i) => start(i)));
  const firstReadyMs = Date.now() - t0;
  // The Secret's files are what the worker reads, and the manifests' probe command passes in the pod.
  assert.equal(await podman(['exec', container(0), 'cat', '/etc/exactlyonce/secret/http-token']), `${token}\n`);
  await podman(['exec', container(0), 'exactlyonce-probe', '/healthz', String(basePort)]);
  await podman(['exec', container(0), 'exactlyonce-probe', '/readyz', String(basePort)]);
  const refused = await runProcess('podman', ['exec', container(0), 'bash', '-c', `echo not-the-token-not-the-token > /tmp/t && EXACTLYONCE_HTTP_TOKEN_FILE=/tmp/t exactlyonce-probe /readyz ${basePort}`]);
  assert.equal(refused.code, 1, 'with another token the probe fails');
  assert.match(refused.stdout, /401/);
  const user = (await podman(['exec', container(0), 'id', '-u'])).trim();
  assert.equal(user, '10001');

  // Records flow from here until the last step is done: 100 every ~200 ms, n = 0, 1, 2, … on partition n % 6.
  const producer = new Producer(config);
  t.after(() => producer.close());
  let produced = 0;
  let stopProducing = false;
  const producing = (async () => {
    while (!stopProducing || produced < 3000) {
      await producer.send(config.topic, Array.from({ length: 100 }, (_, k) => ({ key: null, value: JSON.stringify({ n: produced + k }), partition: (produced + k) % PARTITIONS })));
      produced += 100;
      await sleep(200);
    }
  })();
  const session = await connect(config);
  t.after(() => session.shutdown());
  const progress = async () => Number((await session.execute(`SELECT count(*) AS c FROM ${config.keyspace}.pods`)).rows[0]!['c']);
  /** Rows keep arriving: the workers left standing carry on. */
  const flowing = async (what: string) => {
    const before = await progress();
    await waitFor(async () => (await progress()) >= before + 300, { timeoutMs: 120_000, intervalMs: 500, message: `records stored after ${what}` });
  };
  await flowing('the start');

  // 1. A pod dies: SIGKILL of its worker, the pod deleted and started again (what the Deployment's controller does).
  const killed = await remove(1, 'SIGKILL');
  assert.equal(killed, '137');
  await flowing('the SIGKILL');
  await start(1);

  // 2. Scale 3 -> 1 -> 3: two pods stop cleanly (SIGTERM: drain, leave the group), the last owns all six partitions.
  assert.deepEqual(await Promise.all([remove(1, 'SIGTERM'), remove(2, 'SIGTERM')]), ['0', '0']);
  await flowing('scaling to 1');
  await Promise.all([start(1), start(2)]);
  await flowing('scaling to 3');

  // 3. A rolling replace (maxSurge 0, maxUnavailable 1): each pod in turn, SIGTERM, then its successor ready.
  for (const i of [0, 1, 2]) {
    assert.equal(await remove(i, 'SIGTERM'), '0');
    await start(i);
  }
  stopProducing = true;
  await producing;

  // Drained: every partition's checkpoint at the log end.
  const admin = new KafkaAdmin(config);
  t.after(() => admin.close());
  const marks = await admin.watermarks(config.topic);
  assert.equal(marks.reduce((a, w) => a + Number(w.stable - w.low), 0), produced);
  await waitFor(
    async () => {
      const r = await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.job_checkpoints`);
      return isDrained(marks, new Map(r.rows.map((row) => [row['partition'] as number, BigInt(String(row['next_offset']))])));
    },
    { timeoutMs: 180_000, intervalMs: 500, message: 'the sink reaches the log end' },
  );
  for (const i of [...running]) assert.equal(await remove(i, 'SIGTERM'), '0');

  // Every offset once: row (partition, offset) holds record n = 6 * offset + partition, for all n < produced.
  const rows = await session.execute(`SELECT partition, offset, n FROM ${config.keyspace}.pods`, [], { fetchSize: 100_000 });
  const stored = rows.rows.map((r) => ({ p: r['partition'] as number, o: Number(r['offset']), n: r['n'] as number }));
  assert.equal(stored.length, produced);
  for (const r of stored) assert.equal(r.n, r.o * PARTITIONS + r.p, `partition ${r.p} offset ${r.o}`);
  assert.deepEqual(stored.map((r) => r.n).sort((a, b) => a - b), Array.from({ length: produced }, (_, n) => n));
  const quarantined = await session.execute(`SELECT offset FROM ${config.keyspace}.job_quarantine`);
  assert.equal(quarantined.rowLength, 0);

  const verify = await runCli(['verify', ...connectionArgs(config), '--job', sinkFile, '--full', '--no-record', '--json']);
  assert.equal(verify.code, 0, verify.stdout.slice(-2000) + verify.stderr);
  const report = JSON.parse(verify.stdout) as { totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.totals.records, report.totals.stored, report.totals.quarantined], [produced, produced, 0]);

  const sorted = [...readyMs].sort((a, b) => a - b);
  t.diagnostic(
    `image ${IMAGE} ${sizeMiB} MiB (scripts/image.sh ${Math.round(imageMs / 1000)} s); 3 pods ready ${(firstReadyMs / 1000).toFixed(1)} s after play; ` +
      `pod start to ready: median ${(sorted[Math.floor(sorted.length / 2)]! / 1000).toFixed(1)} s, max ${(sorted.at(-1)! / 1000).toFixed(1)} s over ${sorted.length} starts; ` +
      `${produced} records, 1 SIGKILL, scale 3 -> 1 -> 3, 3 pods replaced, verify ok`,
  );
});

test('deploy/kubernetes holds what a platform expects, and its events job (run) runs as a pod: ready, probed, stopped cleanly', { skip: skipReason() }, async (t) => {
  // What kubectl apply -k would apply: every resource parses; explicit tags; each Deployment bounded, probed, disrupted one pod at a time.
  const [kustomization] = load('kustomization.yaml');
  const docs: Doc[] = kustomization.resources.flatMap((f: string) => load(f));
  assert.deepEqual(docs.map((d) => `${d.kind}/${d.metadata.name}`).sort(), [
    'ConfigMap/exactlyonce-connection',
    'ConfigMap/exactlyonce-sink-orders',
    'Deployment/exactlyonce-events',
    'Deployment/exactlyonce-sink-orders',
    'PodDisruptionBudget/exactlyonce-events',
    'PodDisruptionBudget/exactlyonce-sink-orders',
  ]);
  assert.deepEqual(kustomization.images, [{ name: 'exactlyonce', newName: 'exactlyonce', newTag: VERSION }]);
  for (const d of docs.filter((x) => x.kind === 'Deployment')) {
    const pod = d.spec.template.spec;
    const c = pod.containers[0];
    assert.equal(c.image, `exactlyonce:${VERSION}`, d.metadata.name);
    assert.deepEqual(d.spec.selector.matchLabels, Object.fromEntries(Object.entries(d.spec.template.metadata.labels).filter(([k]) => k !== 'app.kubernetes.io/version')));
    const pdb = docs.find((x) => x.kind === 'PodDisruptionBudget' && x.metadata.name === d.metadata.name);
    assert.deepEqual(pdb.spec.selector.matchLabels, d.spec.selector.matchLabels);
    assert.equal(d.spec.template.metadata.annotations['prometheus.io/scrape'], 'true');
    assert.ok(pod.terminationGracePeriodSeconds >= 30);
    assert.deepEqual(c.livenessProbe.exec.command, ['exactlyonce-probe', '/healthz', '9464']);
    assert.deepEqual(c.readinessProbe.exec.command, ['exactlyonce-probe', '/readyz', '9464']);
    assert.ok(c.args.includes('--metrics-port=9464') && c.args.includes('--max-heap-mb=160') && c.args.includes('--max-buffer-mb=2'));
    assert.equal(c.resources.limits.memory, '384Mi');
    assert.equal(c.securityContext.readOnlyRootFilesystem, true);
    // Credentials only as files: no env value that looks like one.
    assert.deepEqual(c.env.filter((e: Doc) => !e.name.endsWith('_FILE')), []);
  }

  const built = await runProcess(path.join(repoRoot, 'scripts/image.sh'), [], { timeoutMs: 1_500_000 });
  assert.equal(built.code, 0, built.stdout.slice(-2000) + built.stderr.slice(-2000));
  const config = testConfig();
  await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const s = config.keyspace.replace(/^eo_test_/, '');
  const name = `eo-pods-events-${s}`;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-pods-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const token = randomBytes(24).toString('hex');
  const secret = await createSecret(t, dir, name, token);
  const conn = testConnection(name, config, { EXACTLYONCE_GROUP: config.group });
  const events = docs.find((x) => x.kind === 'Deployment' && x.metadata.name === 'exactlyonce-events');
  const port = 19460 + (parseInt(s.slice(0, 4), 16) % 400) * 10 + 5;
  const d = forPodman(events, { name, port, connection: conn.metadata.name, secret });
  const c = d.spec.template.spec.containers[0];
  c.args = c.args.map((a: string) => a.replace(/^--topic=.*/, `--topic=${config.topic}`).replace(/^--alerts-topic=.*/, `--alerts-topic=${config.alertsTopic}`));
  const file = path.join(dir, 'events.yaml');
  writeFileSync(file, [conn, d].map((x) => stringify(x)).join('---\n'));
  const pod = `${name}-pod-0`;
  const ctr = `${pod}-worker`;
  const began = Date.now();
  await podman(['kube', 'play', '--network', 'host', file], 180_000);
  t.after(() => podman(['pod', 'rm', '-f', pod]).catch(() => undefined));
  await waitFor(
    async () => {
      const state = (await podman(['inspect', '--format', '{{.State.Status}}', ctr])).trim();
      if (state !== 'running') throw new Error(`${ctr} is ${state}: ${(await runProcess('podman', ['logs', ctr])).stderr.slice(-600)}`);
      return (await runProcess('podman', ['exec', ctr, 'exactlyonce-probe', '/readyz', String(port)])).code === 0;
    },
    { timeoutMs: 180_000, intervalMs: 500, message: `${pod} ready` },
  );
  const readyS = (Date.now() - began) / 1000;
  await podman(['pod', 'stop', '-t', String(d.spec.template.spec.terminationGracePeriodSeconds), pod], 120_000);
  const logs = await runProcess('podman', ['logs', ctr]);
  mkdirSync(path.join(repoRoot, 'test-artifacts', 'pods'), { recursive: true });
  writeFileSync(path.join(repoRoot, 'test-artifacts', 'pods', `${ctr}.log`), logs.stdout + logs.stderr);
  assert.equal((await podman(['inspect', '--format', '{{.State.ExitCode}}', ctr])).trim(), '0');
  assert.match(logs.stdout + logs.stderr, /assigned partitions/);
  t.diagnostic(`events job pod ready ${readyS.toFixed(1)} s after play; stopped cleanly`);
});

/** Whether 127.0.0.1:port can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** A Kafka port (with port + 1, its controller) and a Cassandra port (with port - 2042, its storage port) that are free. */
async function stackPorts(): Promise<[number, number]> {
  for (let attempt = 0; attempt < 50; attempt++) {
    // Below the ephemeral range (32768-60999), where outgoing connections take ports at any moment.
    const kafka = 20_000 + Math.floor(Math.random() * 2_000) * 2;
    const cassandra = 25_000 + Math.floor(Math.random() * 7_000);
    const all = await Promise.all([kafka, kafka + 1, cassandra, cassandra - 2042].map(portFree));
    if (all.every(Boolean)) return [kafka, cassandra];
  }
  throw new Error('no free ports for a secured stack');
}

// The secured path (README "Secured clusters"): a `stack up --secure` of this test's own (TLS and
// logins on both servers, ACLs), and the sink's pod with nothing but the mounted files: the worker
// role's librdkafka properties (SASL_SSL, SCRAM-SHA-512), its Cassandra password and the CA.
test('the image on a secured stack: the sink pod reads TLS and SASL settings from the mounted Secret, stores every record once, verify --job passes', { skip: skipReason() }, async (t) => {
  const { defaultStackOptions, secureFiles, stackDown, stackUp } = await import('../../src/stack/index.js');
  const built = await runProcess(path.join(repoRoot, 'scripts/image.sh'), [], { timeoutMs: 1_500_000 });
  assert.equal(built.code, 0, built.stdout.slice(-2000) + built.stderr.slice(-2000));
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-pods-secure-'));
  // Ports of its own: other checkouts' stacks take the usual ones (+10000, +20000) on this machine.
  const [kafkaPort, cassandraPort] = await stackPorts();
  const o = defaultStackOptions({ dir, kafkaPort, cassandraPort, kafkaHeapMb: 512, cassandraHeapMb: 768, startTimeoutMs: 900_000, secure: true });
  t.after(async () => {
    await stackDown(o).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  // The jars of the shared stack, when it has them: no second copy from ~/.m2.
  const shared = path.join(process.env['EXACTLYONCE_STACK_DIR'] ?? defaultStackOptions().dir, 'lib');
  if (existsSync(shared)) symlinkSync(shared, path.join(dir, 'lib'));
  let t0 = Date.now();
  await stackUp(o);
  const stackS = (Date.now() - t0) / 1000;
  const files = secureFiles(o);
  const envOf = (file: string) => {
    const env: Record<string, string> = {};
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^(EXACTLYONCE_[A-Z_]+)=(.*)$/.exec(line);
      if (m !== null) env[m[1]!] = m[2]!;
    }
    return env;
  };
  const s = randomBytes(4).toString('hex');
  // The worker role's ACLs cover topics and groups whose names start with 'exactlyonce'.
  const n = { EXACTLYONCE_KEYSPACE: `eo_sec_${s}`, EXACTLYONCE_TOPIC: `exactlyonce.pods-${s}`, EXACTLYONCE_ALERTS_TOPIC: `exactlyonce.pods-${s}.alerts` };
  const asAdmin: Record<string, string> = { ...envOf(files.adminEnv), ...n };
  const asWorker: Record<string, string> = { ...envOf(files.workerEnv), ...n };
  const sinkFile = path.join(dir, 'sink.yaml');
  const sinkYaml = stringify({ name: `pods_sec_${s}`, topic: n.EXACTLYONCE_TOPIC, table: 'pods', mode: 'log', columns: { n: { type: 'int', required: true } } });
  writeFileSync(sinkFile, sinkYaml);
  const apply = await runCli(['schema', 'apply', '--job', sinkFile], asAdmin);
  assert.equal(apply.code, 0, apply.stderr);
  const topic = await runCli(['topic', 'create', '--partitions', '3'], asAdmin);
  assert.equal(topic.code, 0, topic.stderr);
  const admin = loadConnectionConfig({}, asAdmin);
  const session = await connect(admin);
  t.after(async () => {
    await session.execute(`DROP KEYSPACE IF EXISTS ${n.EXACTLYONCE_KEYSPACE}`).catch(() => undefined);
    await session.shutdown();
  });
  const N = 3000;
  const producer = new Producer(admin);
  t.after(() => producer.close());
  for (let i = 0; i < N; i += 500) await producer.send(n.EXACTLYONCE_TOPIC, Array.from({ length: 500 }, (_, k) => ({ key: null, value: JSON.stringify({ n: i + k }), partition: (i + k) % 3 })));

  // The pod: the Secret holds the worker's files, the CA named where the Secret is mounted.
  const mounted = '/etc/exactlyonce/secret/ca.pem';
  const properties = readFileSync(files.kafkaWorkerProperties, 'utf8').replace(/^ssl\.ca\.location=.*$/m, `ssl.ca.location=${mounted}`);
  assert.match(properties, /^security\.protocol=SASL_SSL$/m);
  const token = randomBytes(24).toString('hex');
  const name = `eo-pods-sec-${s}`;
  const secret = await createSecret(t, dir, name, token, { 'kafka.properties': properties, 'cassandra.password': readFileSync(files.cassandraWorkerPassword, 'utf8'), 'ca.pem': readFileSync(files.ca, 'utf8') });
  const [connection] = load('connection.yaml');
  assert.equal(connection.data.EXACTLYONCE_CASSANDRA_CA, mounted);
  const conn = { ...connection, metadata: { ...connection.metadata, name: `${name}-connection` } };
  conn.data = { ...conn.data, EXACTLYONCE_BROKERS: asWorker['EXACTLYONCE_BROKERS'], EXACTLYONCE_CASSANDRA: asWorker['EXACTLYONCE_CASSANDRA'], EXACTLYONCE_DATACENTER: admin.datacenter, EXACTLYONCE_KEYSPACE: n.EXACTLYONCE_KEYSPACE, EXACTLYONCE_CASSANDRA_USERNAME: asWorker['EXACTLYONCE_CASSANDRA_USERNAME'] };
  const [sinkConfig] = load('sink-config.yaml');
  const sinkMap = { ...sinkConfig, metadata: { ...sinkConfig.metadata, name: `${name}-sink` }, data: { 'sink.yaml': sinkYaml } };
  const [deployment] = load('sink-deployment.yaml');
  const port = 19460 + (parseInt(s.slice(0, 4), 16) % 400) * 10 + 7;
  const d = forPodman(deployment, { name, port, connection: conn.metadata.name, configMap: sinkMap.metadata.name, secret });
  const file = path.join(dir, 'sink-pod.yaml');
  writeFileSync(file, [conn, sinkMap, d].map((x) => stringify(x)).join('---\n'));
  const pod = `${name}-pod-0`;
  const ctr = `${pod}-sink`;
  t0 = Date.now();
  await podman(['kube', 'play', '--network', 'host', file], 180_000);
  t.after(() => podman(['pod', 'rm', '-f', pod]).catch(() => undefined));
  const marks = await (async () => {
    const a = new KafkaAdmin(admin);
    try {
      return await a.watermarks(n.EXACTLYONCE_TOPIC);
    } finally {
      await a.close();
    }
  })();
  await waitFor(
    async () => {
      const state = (await podman(['inspect', '--format', '{{.State.Status}}', ctr])).trim();
      if (state !== 'running') throw new Error(`${ctr} is ${state}: ${(await runProcess('podman', ['logs', ctr])).stderr.slice(-600)}`);
      const r = await session.execute(`SELECT partition, next_offset FROM ${n.EXACTLYONCE_KEYSPACE}.job_checkpoints`);
      return isDrained(marks, new Map(r.rows.map((row) => [row['partition'] as number, BigInt(String(row['next_offset']))])));
    },
    { timeoutMs: 240_000, intervalMs: 500, message: 'the secured sink pod reaches the log end' },
  );
  const drainedS = (Date.now() - t0) / 1000;
  await podman(['exec', ctr, 'exactlyonce-probe', '/readyz', String(port)]);
  await podman(['pod', 'stop', '-t', String(d.spec.template.spec.terminationGracePeriodSeconds), pod], 120_000);
  const logs = await runProcess('podman', ['logs', ctr]);
  mkdirSync(path.join(repoRoot, 'test-artifacts', 'pods'), { recursive: true });
  writeFileSync(path.join(repoRoot, 'test-artifacts', 'pods', `${ctr}.log`), logs.stdout + logs.stderr);
  assert.equal((await podman(['inspect', '--format', '{{.State.ExitCode}}', ctr])).trim(), '0');
  for (const secretValue of [readFileSync(files.cassandraWorkerPassword, 'utf8').trim(), readFileSync(files.kafkaWorkerPassword, 'utf8').trim(), token]) {
    assert.ok(!(logs.stdout + logs.stderr).includes(secretValue), 'no secret in the pod log');
  }

  const rows = await session.execute(`SELECT partition, offset, n FROM ${n.EXACTLYONCE_KEYSPACE}.pods`, [], { fetchSize: 100_000 });
  assert.deepEqual(rows.rows.map((r) => r['n'] as number).sort((a, b) => a - b), Array.from({ length: N }, (_, i) => i));
  for (const r of rows.rows) assert.equal(r['n'], Number(r['offset']) * 3 + (r['partition'] as number));
  const verify = await runCli(['verify', '--job', sinkFile, '--full', '--no-record', '--json'], asWorker);
  assert.equal(verify.code, 0, verify.stdout.slice(-2000) + verify.stderr);
  const report = JSON.parse(verify.stdout) as { totals: { records: number; stored: number; quarantined: number } };
  assert.deepEqual([report.totals.records, report.totals.stored, report.totals.quarantined], [N, N, 0]);
  t.diagnostic(`secured stack up in ${stackS.toFixed(0)} s; the pod stored ${N} records over SASL_SSL and Cassandra TLS with a login, ${drainedS.toFixed(1)} s from play to drained; verify ok`);
});
