/**
 * The peer benchmark of issue 38: Kafka Connect 4.1.1 with a Cassandra sink built like DataStax's
 * connector (bench/peers/connect-sink: a prepared INSERT bound and executed per record, at least once)
 * against our `exactlyonce` sink, measured the same way. See bench/peers/README.md.
 *
 *   node --import tsx bench/peers/run.ts [--count 1000000] [--partitions 6] …   (--help lists them)
 *
 * One fresh topic is filled once with N seed-format JSON events; one fresh keyspace holds both tables
 * (events_connect, and events_eo made by `exactlyonce schema apply --job`). Each system then runs ALONE,
 * one process, from process start until every record is durable by its own account: for Connect, its
 * consumer group's committed offsets (committed only after the writes completed) summing to N; for
 * exactlyonce, the job's checkpoints (next_offset) summing to N. Measured per system: end-to-end rate,
 * steady rate (first progress → end), the process tree's CPU seconds, its peak RSS, and the Cassandra
 * and Kafka servers' CPU seconds over the same window. Everything made is removed at the end, also on
 * failure and on Ctrl-C.
 *
 * Self-contained on purpose: it talks to Kafka and Cassandra through the clients the project already
 * depends on and to exactlyonce only through bin/exactlyonce, so that it measures the CLI a user runs.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import cassandra from 'cassandra-driver';
import type { KafkaJS as KafkaJSNamespace } from '@confluentinc/kafka-javascript';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const cli = path.join(root, 'bin', 'exactlyonce');
const connectDir = path.join(root, 'bench', 'peers', 'connect-sink');
const JOB = 'peer_events';
const CLOCK_TICKS = 100; // USER_HZ of /proc/<pid>/stat times

/** A string option with its default. */
const text = (value: string) => ({ type: 'string', default: value }) as const;

const { values: opt } = parseArgs({
  options: {
    count: text('1000000'),
    partitions: text('6'),
    brokers: text('127.0.0.1:9092'),
    cassandra: text('127.0.0.1:9042'),
    datacenter: text('datacenter1'),
    'max-in-flight': text('64'),
    'max-poll-records': text('2000'),
    'connect-tasks': text('1'),
    'connect-batch': text('1'),
    'connect-heap': text('-Xms256M -Xmx2G'),
    clients: text('600'),
    only: { type: 'string' },
    'timeout-s': text('1800'),
    'no-verify': { type: 'boolean', default: false },
    rebuild: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

if (opt.help) {
  console.log(`node --import tsx bench/peers/run.ts [options]
  --count N             events in the topic (default 1000000)
  --partitions P        partitions of the topic (default 6)
  --brokers LIST        Kafka (default 127.0.0.1:9092)
  --cassandra HOST:PORT Cassandra (default 127.0.0.1:9042)
  --datacenter NAME     Cassandra local data centre (default datacenter1)
  --max-in-flight N     Connect sink: most INSERTs in flight per task (default 64)
  --max-poll-records N  Connect worker: consumer.max.poll.records (default 2000)
  --connect-tasks N     Connect sink: tasks.max, all in the one worker process (default 1)
  --connect-batch N     Connect sink: 1 = one INSERT per record (default); more = UNLOGGED batches of up
                        to N records of one partition, as DataStax's connector (maxNumberOfRecordsInBatch 32)
  --connect-heap FLAGS  Connect JVM heap flags (default "-Xms256M -Xmx2G", as connect-standalone.sh)
  --clients N           distinct keys of the generated events, spread over the partitions (default 600)
  --only connect|eo     run one system only
  --timeout-s S         give a system up after this long (default 1800)
  --no-verify           skip counting each table's rows afterwards
  --rebuild             run mvn package even if the connector's jar is there`);
  process.exit(0);
}

const N = int('count', 1);
const P = int('partitions', 1);
const maxInFlight = int('max-in-flight', 1);
const maxPollRecords = int('max-poll-records', 1);
const connectTasks = int('connect-tasks', 1);
const connectBatch = int('connect-batch', 1);
const clients = int('clients', 1);
const timeoutMs = int('timeout-s', 1) * 1000;
if (opt.only !== undefined && opt.only !== 'connect' && opt.only !== 'eo') fail('--only is connect or eo');
const systems = (['connect', 'eo'] as const).filter((s) => opt.only === undefined || opt.only === s);

function int(name: keyof typeof opt, min: number): number {
  const v = Number(opt[name]);
  if (!Number.isInteger(v) || v < min) fail(`--${name} must be a whole number ≥ ${min}`);
  return v;
}
function fail(message: string): never {
  console.error(`error: ${message}`);
  process.exit(2);
}
const log = (s: string) => console.log(`[peers ${new Date().toISOString().slice(11, 19)}] ${s}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------
// /proc readings

interface ProcTimes {
  /** utime + stime of the process itself (all its threads), seconds. */
  self: number;
  /** cutime + cstime: the children it has waited for, seconds. */
  children: number;
}
function procTimes(pid: number): ProcTimes | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { self: (Number(f[11]) + Number(f[12])) / CLOCK_TICKS, children: (Number(f[13]) + Number(f[14])) / CLOCK_TICKS };
  } catch {
    return undefined;
  }
}
/** The live descendants of a process (through /proc/<pid>/task/<tid>/children). */
function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let kids = '';
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const k of kids.split(' ').filter((s) => s !== '')) {
        out.push(Number(k));
        walk(Number(k));
      }
    }
  };
  walk(pid);
  return out;
}
/** CPU seconds of a process tree: the root's own and waited-for children's, plus every live descendant's. */
function treeCpu(pid: number): number {
  let total = 0;
  const rootTimes = procTimes(pid);
  if (rootTimes !== undefined) total += rootTimes.self + rootTimes.children;
  for (const d of descendants(pid)) {
    const t = procTimes(d);
    if (t !== undefined) total += t.self + t.children;
  }
  return total;
}
/** Peak RSS (VmHWM) of a process tree, MiB: the largest of its processes (they are not summed: a wrapper's is tiny). */
function treePeakRssMiB(pid: number): { mib: number; byPid: Record<number, number> } {
  const byPid: Record<number, number> = {};
  for (const p of [pid, ...descendants(pid)]) {
    try {
      const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      if (m !== null) byPid[p] = Number(m[1]) / 1024;
    } catch {
      // gone
    }
  }
  return { mib: Math.max(0, ...Object.values(byPid)), byPid };
}
function readCmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '?';
  }
}
function comm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
  } catch {
    return '?';
  }
}
/** The pids whose argv holds `mainClass` as one whole argument (a JVM's main class). */
function jvmPids(mainClass: string): number[] {
  const r = spawnSync('pgrep', ['-f', mainClass.replace(/\./g, '\\.')], { encoding: 'utf8' });
  return (r.stdout ?? '')
    .split('\n')
    .filter((s) => s !== '')
    .map(Number)
    .filter((pid) => pid !== process.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(mainClass);
      } catch {
        return false;
      }
    });
}
/** The local stack's servers, found afresh for each window (a test beside us may restart them). */
function findServers(): { cassandra: number[]; kafka: number[] } {
  return { cassandra: jvmPids('org.apache.cassandra.service.CassandraDaemon'), kafka: jvmPids('kafka.Kafka') };
}
/** CPU seconds of each server process, by pid (a pid gone is left out). */
function serverTimes(pids: number[]): Map<number, number> {
  const m = new Map<number, number>();
  for (const p of pids) {
    const t = procTimes(p);
    if (t !== undefined) m.set(p, t.self);
  }
  return m;
}
/** CPU seconds the servers used between two readings, or null when one of them was restarted in between. */
function serverDelta(before: Map<number, number>, after: Map<number, number>): number | null {
  if (before.size === 0 || [...before.keys()].some((p) => !after.has(p))) return null;
  let d = 0;
  for (const [p, t] of before) d += after.get(p)! - t;
  return d;
}

// ---------------------------------------------------------------------------------------------------
// Clean-up, also on failure and Ctrl-C

const cleanups: Array<{ what: string; run: () => Promise<void> | void }> = [];
/** A clean-up step against a server is tried again for up to a minute (a test beside us may be restarting it). */
async function retried(run: () => Promise<unknown>): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await run();
      return;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(2000);
    }
  }
}
const children = new Set<ChildProcess>();
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of children) await stopChild(c, 20_000);
    for (const c of cleanups.reverse()) {
      try {
        await c.run();
      } catch (e) {
        console.error(`clean-up: ${c.what} failed: ${(e as Error).message}`);
      }
    }
  })();
  return cleaning;
}
let interrupted = false;
let failed = false;
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    log(`${sig}: cleaning up`);
    void cleanup().finally(() => process.exit(130));
  });
}

/** SIGTERM to a child's process group, SIGKILL after graceMs; resolves once it has exited. */
async function stopChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    const kill = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        child.kill(sig);
      }
    };
    kill('SIGTERM');
    const timer = setTimeout(() => kill('SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  }
  children.delete(child);
}

/** A child in its own process group, its output kept (the tail shows in an error) and teed to a log file. */
function start(cmd: string, args: string[], logFile: string, env: NodeJS.ProcessEnv = process.env) {
  const child = spawn(cmd, args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.add(child);
  let tail = '';
  const keep = (d: Buffer) => {
    tail = (tail + d.toString()).slice(-8000);
    writeFileSync(logFile, d, { flag: 'a' });
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, exited, tail: () => tail };
}
async function runToEnd(cmd: string, args: string[], logFile: string): Promise<void> {
  const p = start(cmd, args, logFile);
  const code = await p.exited;
  children.delete(p.child);
  if (code !== 0) throw new Error(`${path.basename(cmd)} ${args.slice(0, 2).join(' ')} exited ${code}:\n${p.tail()}`);
}

/** Best effort, once: a group that never formed (a run stopped early) is not there to delete. */
async function deleteGroup(group: string): Promise<void> {
  await admin.deleteGroups([group]).catch(() => undefined);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

// ---------------------------------------------------------------------------------------------------
// Kafka and Cassandra clients

const require = createRequire(import.meta.url);
const { KafkaJS } = require('@confluentinc/kafka-javascript') as { KafkaJS: typeof KafkaJSNamespace };
const admin = new KafkaJS.Kafka({}).admin({
  'bootstrap.servers': opt.brokers,
  'client.id': 'exactlyonce-peers-bench',
  log_level: 3,
  kafkaJS: { logger: { info() {}, debug() {}, warn() {}, error() {}, namespace() { return this; }, setLogLevel() {} } },
} as never);

const [cHost, cPort] = opt.cassandra.split(':');
const session = new cassandra.Client({
  contactPoints: [cHost!],
  protocolOptions: { port: Number(cPort ?? 9042) },
  localDataCenter: opt.datacenter,
  socketOptions: { readTimeout: 60_000 },
  queryOptions: { consistency: cassandra.types.consistencies.localQuorum, prepare: true },
});

async function logEnds(topic: string): Promise<number[]> {
  const offsets = await admin.fetchTopicOffsets(topic);
  return offsets.sort((a, b) => a.partition - b.partition).map((o) => Number(o.high));
}
/** Sum of a consumer group's committed offsets on the topic (a partition without one counts 0). */
async function groupCommitted(group: string, topic: string): Promise<number> {
  const r = await admin.fetchOffsets({ groupId: group, topics: [topic] } as never);
  let sum = 0;
  for (const t of r as Array<{ partitions: Array<{ offset: string }> }>) for (const p of t.partitions) sum += Math.max(0, Number(p.offset));
  return sum;
}
async function checkpointSum(ks: string, topic: string): Promise<number> {
  const r = await session.execute(`SELECT next_offset FROM ${ks}.job_checkpoints WHERE job = ? AND topic = ?`, [JOB, topic]);
  return r.rows.reduce((s, row) => s + Number(row['next_offset']), 0);
}
/** Rows of a table, counted partition by partition (paged reads of the clustering key alone). */
async function countRows(ks: string, table: string): Promise<number> {
  let n = 0;
  for (let p = 0; p < P; p++) {
    const q = `SELECT offset FROM ${ks}.${table} WHERE partition = ?`;
    for await (const _ of session.stream(q, [p], { prepare: true, fetchSize: 5000, autoPage: true }) as unknown as AsyncIterable<unknown>) n++;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------
// One system's run: start it, poll its durable progress, read /proc, stop it

interface Figures {
  system: 'connect' | 'eo';
  events: number;
  endToEndSeconds: number;
  endToEndPerSecond: number;
  /** From the first poll that saw progress to the end; null when that poll already saw the end (too short a run to tell). */
  steadySeconds: number | null;
  steadyPerSecond: number | null;
  firstProgressSeconds: number;
  cpuSeconds: number;
  peakRssMiB: number;
  /** null: the server was restarted during the window (by something else running beside the benchmark). */
  cassandraCpuSeconds: number | null;
  kafkaCpuSeconds: number | null;
  servers: { cassandra: number[]; kafka: number[] };
  pid: number;
  /** The process and its descendants seen while it ran, by pid: what they were last seen as. */
  processes: Record<number, string>;
  /** The 1-minute load average as the window opened: above ~0.5 here, other work ran beside it. */
  loadavg1Before: number;
  /** The command line of the measured process (after bin/exactlyonce's exec: node's). */
  cmdline: string;
  /** exactlyonce: whether bin/exactlyonce ran the build (dist/) or the sources through tsx. */
  runsFrom?: 'build' | 'sources (tsx)';
  rowsStored?: number;
}

async function measure(system: 'connect' | 'eo', launch: () => ReturnType<typeof start>, progress: () => Promise<number>): Promise<Figures> {
  const servers = findServers();
  if (servers.cassandra.length !== 1 || servers.kafka.length !== 1) {
    log(`warning: found Cassandra pid(s) [${servers.cassandra.join(', ')}], Kafka pid(s) [${servers.kafka.join(', ')}]: their CPU is summed`);
  }
  const cassandraBefore = serverTimes(servers.cassandra);
  const kafkaBefore = serverTimes(servers.kafka);
  const t0 = performance.now();
  const proc = launch();
  const pid = proc.child.pid!;
  let first: { t: number; n: number } | undefined;
  let done = 0;
  let lastLog = t0;
  const processes: Record<number, string> = {};
  const loadBefore = round(os.loadavg()[0]!, 2);
  let cmdline = '';
  let cpu = 0;
  let rss = { mib: 0, byPid: {} as Record<number, number> };
  for (;;) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) throw new Error(`${system} ended before it was done (${done}/${N}):\n${proc.tail()}`);
    const now = performance.now();
    if (now - t0 > timeoutMs) throw new Error(`${system} did not finish within ${timeoutMs / 1000} s (${done}/${N}):\n${proc.tail()}`);
    try {
      done = await progress();
    } catch {
      // not there yet (the group or the checkpoint table answers once the system has started)
    }
    const t = performance.now();
    // Read while it runs: the tree's processes and its CPU (a descendant's times vanish from view when it exits).
    for (const p of [pid, ...descendants(pid)]) processes[p] = comm(p); // (a wrapper's pid shows what it exec'd)
    cpu = Math.max(cpu, treeCpu(pid));
    if (done > 0 && first === undefined) first = { t, n: done };
    if (done >= N) {
      rss = treePeakRssMiB(pid);
      cmdline = readCmdline(pid);
      cpu = Math.max(cpu, treeCpu(pid));
      break;
    }
    if (t - lastLog > 10_000) {
      log(`${system}: ${done}/${N} durable after ${((t - t0) / 1000).toFixed(1)} s`);
      lastLog = t;
    }
    await sleep(150);
  }
  const tEnd = performance.now();
  const cassandraCpu = serverDelta(cassandraBefore, serverTimes(servers.cassandra));
  const kafkaCpu = serverDelta(kafkaBefore, serverTimes(servers.kafka));
  if (cassandraCpu === null || kafkaCpu === null) log(`warning: ${cassandraCpu === null ? 'Cassandra' : 'Kafka'} was restarted during ${system}'s window: its figures are not comparable`);
  await stopChild(proc.child, 30_000);
  const e2e = (tEnd - t0) / 1000;
  const steady = (tEnd - first!.t) / 1000;
  return {
    system,
    events: N,
    endToEndSeconds: round(e2e, 3),
    endToEndPerSecond: Math.round(N / e2e),
    steadySeconds: first!.n < N ? round(steady, 3) : null,
    steadyPerSecond: first!.n < N ? Math.round((N - first!.n) / steady) : null,
    firstProgressSeconds: round((first!.t - t0) / 1000, 3),
    cpuSeconds: round(cpu, 2),
    peakRssMiB: round(rss.mib, 1),
    cassandraCpuSeconds: cassandraCpu === null ? null : round(cassandraCpu, 2),
    kafkaCpuSeconds: kafkaCpu === null ? null : round(kafkaCpu, 2),
    servers,
    pid,
    processes,
    loadavg1Before: loadBefore,
    cmdline,
  };
}
const round = (x: number, d: number) => Math.round(x * 10 ** d) / 10 ** d;

// ---------------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const suffix = `${Date.now().toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`;
  const topic = `peers.events.${suffix}`;
  const ks = `peers_${suffix}`;
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'eo-peers-'));
  // The logs (generate, schema, connect, eo) are kept when the run fails, for the error's context.
  cleanups.push({ what: `remove ${tmp}`, run: () => (failed ? log(`logs kept in ${tmp}`) : rmSync(tmp, { recursive: true, force: true })) });
  log(`topic ${topic}, keyspace ${ks}, ${N} events over ${P} partitions; logs in ${tmp}`);

  // 1. The connector, built once (a fresh clone: Maven fetches everything from Maven Central).
  const jar = path.join(connectDir, 'target', 'connect-sink.jar');
  if (systems.includes('connect') && (opt.rebuild || !existsSync(jar) || !existsSync(path.join(connectDir, 'target', 'lib')))) {
    log('building the Connect sink: mvn -q -f bench/peers/connect-sink/pom.xml package');
    await runToEnd('mvn', ['-q', '-B', '-f', path.join(connectDir, 'pom.xml'), 'package'], path.join(tmp, 'mvn.log'));
  }

  // 2. The topic, filled once.
  await admin.connect();
  cleanups.push({ what: 'disconnect the admin client', run: () => admin.disconnect() });
  await admin.createTopics({ topics: [{ topic, numPartitions: P, replicationFactor: 1 }] });
  cleanups.push({ what: `delete topic ${topic}`, run: () => retried(() => admin.deleteTopics({ topics: [topic] })) });
  log(`filling ${topic}: bin/exactlyonce generate --count ${N} --clients ${clients} --health-mix 0:90,1:10 --no-delay`);
  const tFill = performance.now();
  await runToEnd(cli, ['generate', '--count', String(N), '--clients', String(clients), '--health-mix', '0:90,1:10', '--no-delay', '--seed', '38', '--topic', topic, '--brokers', opt.brokers], path.join(tmp, 'generate.log'));
  const ends = await logEnds(topic);
  const total = ends.reduce((a, b) => a + b, 0);
  log(`filled in ${((performance.now() - tFill) / 1000).toFixed(1)} s; log ends ${ends.join(', ')} (sum ${total})`);
  if (total !== N) throw new Error(`the topic holds ${total} records, not ${N}`);

  // 3. The keyspace and both tables.
  await session.connect();
  cleanups.push({ what: 'close the Cassandra session', run: () => session.shutdown() });
  const conn = ['--brokers', opt.brokers, '--cassandra', opt.cassandra, '--datacenter', opt.datacenter, '--keyspace', ks];
  const jobFile = path.join(tmp, 'peer_events.json');
  writeFileSync(
    jobFile,
    JSON.stringify({
      name: JOB,
      topic,
      table: 'events_eo',
      mode: 'log',
      columns: {
        id: { type: 'bigint', required: true },
        ts: { type: 'timestamp', required: true },
        source: { type: 'text', required: true },
        client: { type: 'text', required: true },
        health: { type: 'int', required: true },
      },
    }, null, 2),
  );
  cleanups.push({ what: `drop keyspace ${ks}`, run: () => retried(() => session.execute(`DROP KEYSPACE IF EXISTS ${ks}`, [], { readTimeout: 120_000 } as never)) });
  await runToEnd(cli, ['schema', 'apply', ...conn], path.join(tmp, 'schema.log'));
  await runToEnd(cli, ['schema', 'apply', '--job', jobFile, ...conn], path.join(tmp, 'schema.log'));
  await session.execute(`CREATE TABLE ${ks}.events_connect (partition int, offset bigint, id bigint, ts timestamp, source text, client text, health int, PRIMARY KEY (partition, offset))`);
  const eoShape = await session.execute(`SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = 'events_eo'`, [ks]);
  log(`events_eo: ${eoShape.rows.map((r) => `${r['column_name']} ${r['type']}`).join(', ')}`);

  // 4. Each system alone.
  const results: Figures[] = [];
  for (const system of systems) {
    log(`${system}: starting`);
    let f: Figures;
    if (system === 'connect') {
      const name = `peer-connect-${suffix}`;
      const group = `connect-${name}`;
      const port = await freePort();
      const worker = path.join(tmp, 'worker.properties');
      const sink = path.join(tmp, 'sink.properties');
      writeFileSync(
        worker,
        [
          `bootstrap.servers=${opt.brokers}`,
          'key.converter=org.apache.kafka.connect.storage.StringConverter',
          'value.converter=org.apache.kafka.connect.json.JsonConverter',
          'value.converter.schemas.enable=false',
          `offset.storage.file.filename=${path.join(tmp, 'connect.offsets')}`,
          'offset.flush.interval.ms=1000',
          `consumer.max.poll.records=${maxPollRecords}`,
          `listeners=http://127.0.0.1:${port}`,
          '',
        ].join('\n'),
      );
      writeFileSync(
        sink,
        [
          `name=${name}`,
          'connector.class=exactlyonce.peers.CassandraSinkConnector',
          `tasks.max=${connectTasks}`,
          `topics=${topic}`,
          `cassandra.contact.points=${opt.cassandra}`,
          `cassandra.local.datacenter=${opt.datacenter}`,
          `cassandra.keyspace=${ks}`,
          'cassandra.table=events_connect',
          `cassandra.max.in.flight=${maxInFlight}`,
          `cassandra.max.batch=${connectBatch}`,
          '',
        ].join('\n'),
      );
      cleanups.push({ what: `delete group ${group}`, run: () => deleteGroup(group) });
      // The JVM flags of Kafka's bin/connect-standalone.sh (KAFKA_HEAP_OPTS) and kafka-run-class.sh (KAFKA_JVM_PERFORMANCE_OPTS).
      const jvm = [
        ...opt['connect-heap'].split(/\s+/).filter((s) => s !== ''),
        '-server', '-XX:+UseG1GC', '-XX:MaxGCPauseMillis=20', '-XX:InitiatingHeapOccupancyPercent=35', '-XX:+ExplicitGCInvokesConcurrent', '-XX:MaxInlineLevel=15', '-Djava.awt.headless=true',
        `-Dlog4j2.configurationFile=${path.join(connectDir, 'connect-log4j2.properties')}`,
      ];
      const classpath = `${path.join(connectDir, 'target', 'lib')}/*:${jar}`;
      f = await measure(
        'connect',
        () => start('java', [...jvm, '-cp', classpath, 'org.apache.kafka.connect.cli.ConnectStandalone', worker, sink], path.join(tmp, 'connect.log')),
        () => groupCommitted(group, topic),
      );
    } else {
      const group = `exactlyonce.${JOB}.${suffix}`;
      cleanups.push({ what: `delete group ${group}`, run: () => deleteGroup(group) });
      f = await measure(
        'eo',
        () => start(cli, ['run', '--job', jobFile, ...conn, '--group', group], path.join(tmp, 'eo.log')),
        () => checkpointSum(ks, topic),
      );
    }
    if (system === 'eo') {
      // bin/exactlyonce runs the build (dist/) only while no file under src/ or bench/ is newer than it,
      // else the sources through tsx (slower to start, and its esbuild child's CPU counts too).
      f.runsFrom = /dist\/src\/cli\/main\.js/.test(f.cmdline) ? 'build' : 'sources (tsx)';
      if (f.runsFrom !== 'build') log('note: exactlyonce ran from its sources through tsx (the build is older than a file under src/ or bench/, e.g. the connector\'s target/): `make build`, then run again, to measure the build, as an installed package runs');
    }
    log(`${system}: ${N} durable in ${f.endToEndSeconds} s (${f.endToEndPerSecond}/s end to end, ${f.steadyPerSecond ?? '?'}/s steady), ${f.cpuSeconds} CPU s, peak RSS ${f.peakRssMiB} MiB`);
    results.push(f);
    await sleep(3000); // let compaction and flushes of this run settle a little before the next
  }

  // 5. Each table holds every record?
  if (!opt['no-verify']) {
    for (const f of results) {
      const table = f.system === 'connect' ? 'events_connect' : 'events_eo';
      f.rowsStored = await countRows(ks, table);
      log(`${table}: ${f.rowsStored} rows${f.rowsStored === N ? '' : ` — expected ${N}`}`);
    }
  }

  report(results, { topic, ks });
}

function report(results: Figures[], names: { topic: string; ks: string }): void {
  const label = { connect: `Kafka Connect 4.1.1 + DataStax-style sink${connectBatch > 1 ? ` (batch ${connectBatch})` : ''}`, eo: 'exactlyonce' } as const;
  const rows = results.map((f) => [label[f.system], f.endToEndPerSecond.toLocaleString('en'), f.steadyPerSecond?.toLocaleString('en') ?? 'too short', f.cpuSeconds.toFixed(1), f.peakRssMiB.toFixed(0), f.cassandraCpuSeconds?.toFixed(1) ?? 'restarted', f.kafkaCpuSeconds?.toFixed(1) ?? 'restarted']);
  const head = ['system', 'end-to-end ev/s', 'steady ev/s', `CPU s for ${N}`, 'peak RSS MiB', 'Cassandra CPU s', 'Kafka CPU s'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ');
  console.log();
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('-|-'));
  for (const r of rows) console.log(line(r));
  const c = results.find((f) => f.system === 'connect');
  const e = results.find((f) => f.system === 'eo');
  let ratios: Record<string, number> | undefined;
  if (c !== undefined && e !== undefined) {
    ratios = {
      endToEndRate: round(e.endToEndPerSecond / c.endToEndPerSecond, 2),
      ...(e.steadyPerSecond !== null && c.steadyPerSecond !== null ? { steadyRate: round(e.steadyPerSecond / c.steadyPerSecond, 2) } : {}),
      cpu: round(e.cpuSeconds / c.cpuSeconds, 2),
      ...(e.cassandraCpuSeconds !== null && c.cassandraCpuSeconds !== null ? { cassandraCpu: round(e.cassandraCpuSeconds / c.cassandraCpuSeconds, 2) } : {}),
      peakRss: round(e.peakRssMiB / c.peakRssMiB, 2),
    };
    console.log();
    console.log(`exactlyonce / Connect: end-to-end rate ×${ratios.endToEndRate}, steady rate ×${ratios['steadyRate'] ?? '?'}, CPU ×${ratios.cpu}, Cassandra CPU ×${ratios['cassandraCpu'] ?? '?'}, peak RSS ×${ratios.peakRss}`);
  }
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim();
  const java = (spawnSync('java', ['-version'], { encoding: 'utf8' }).stderr ?? '').split('\n')[0];
  const out = {
    benchmark: 'peers (issue 38)',
    at: new Date().toISOString(),
    events: N,
    partitions: P,
    topic: names.topic,
    keyspace: names.ks,
    settings: { connectTasks, connectBatch, maxInFlight, maxPollRecords, offsetFlushIntervalMs: 1000, connectHeap: opt['connect-heap'], clients, consistency: 'LOCAL_QUORUM' },
    machine: { cpus: os.cpus().length, memGiB: round(os.totalmem() / 2 ** 30, 1), loadavg: os.loadavg().map((x) => round(x, 2)), node: process.version, java, git },
    results,
    ratios,
  };
  const dir = path.join(root, 'bench', 'results');
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `peers-${out.at.replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(out, null, 2)}\n`);
  console.log(`\nwritten: ${path.relative(root, file)}`);
}

main()
  .then(async () => {
    await cleanup();
    process.exit(0);
  })
  .catch(async (e: unknown) => {
    if (interrupted) return; // the signal's clean-up is under way and exits
    console.error(`error: ${e instanceof Error ? e.message : String(e)}`);
    failed = true;
    await cleanup();
    process.exit(1);
  });
