/**
 * The stack coordinator: start, stop and inspect the two servers (or, in a cluster, every node and
 * broker: see cluster.ts; the functions taking a server take its id, which alone is its name). A
 * server is "ours" when the pid in run/<id>.pid is alive and its command line carries this stack dir's tag (see stackTags), so a
 * stale pid file, or a pid reused by an unrelated process, is never mistaken for a running server.
 */
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExactlyOnceError } from '../errors.js';
import { cassandraServer } from './cassandra-server.js';
import { checkJava, ensureJars, javaCommand } from './fetch.js';
import { kafkaServer } from './kafka-server.js';
import { registryServer } from './registry-server.js';
import { cassandraNode, kafkaNode, stackNodes, writeLayout } from './cluster.js';
import { displayName, type ServerName, type ServerStatus, type StackOptions } from './options.js';
import { serverPaths } from './paths.js';
import { isSecure, prepareSecure, secureFiles } from './secure.js';
import { metadataBrokerCount } from './ready.js';
import { commandLine, isAlive, isPortFree, kill, readPidFile, removePidFile, spawnDetached, tailFile, terminate, writePidFile } from './process.js';
import type { ServerSpec } from './server.js';

function spec(o: StackOptions, id: string): ServerSpec {
  const n = stackNodes(o).find((x) => x.id === id);
  if (n === undefined) throw new ExactlyOnceError('EO_USAGE', `no server ${id} in the stack at ${o.dir} (${stackNodes(o).map((x) => x.id).join(', ')})`);
  if (n.kind === 'registry') return registryServer(o);
  if (n.kind === 'kafka') return id === 'kafka' ? kafkaServer(o) : kafkaServer(o, kafkaNode(o, n.index));
  return id === 'cassandra' ? cassandraServer(o) : cassandraServer(o, cassandraNode(o, n.index));
}

/** How a server is called in messages: Kafka, Cassandra, or its node id in a cluster. */
function label(s: ServerSpec): string {
  return s.id === s.name ? displayName(s.name) : s.id;
}

interface Running {
  pid: number;
  /** The port it was started with, from its command line (null where /proc is unavailable). */
  port: number | null;
}

/** Our live process for server `id`, or null; removes a pid file that no longer points at it. */
async function findRunning(o: StackOptions, id: string): Promise<Running | null> {
  const { pidFile } = serverPaths(o.dir, id);
  const pid = await readPidFile(pidFile);
  if (pid === null) return null;
  const argv = (await isAlive(pid)) ? await commandLine(pid) : [];
  const tag = `-Dexactlyonce.stack=${path.resolve(o.dir)}#${id}`;
  if (argv === null) return { pid, port: null }; // no /proc: trust a live pid
  if (!argv.includes(tag)) {
    await removePidFile(pidFile);
    return null;
  }
  const portArg = argv.find((a) => a.startsWith('-Dexactlyonce.port='));
  return { pid, port: portArg === undefined ? null : Number(portArg.split('=')[1]) };
}

async function status(o: StackOptions, id: string, running: Running | null): Promise<ServerStatus> {
  const s = spec(o, id);
  const port = running?.port ?? s.port;
  return {
    name: s.name,
    id,
    host: s.host,
    pid: running?.pid ?? null,
    port,
    running: running !== null,
    ready: running !== null && (port === s.port ? await s.probe() : false),
    version: s.version,
    logFile: serverPaths(o.dir, id).logFile,
  };
}

async function assertPortsFree(s: ServerSpec): Promise<void> {
  for (const { port, what, host } of s.ports) {
    if (!(await isPortFree(port, host))) throw new ExactlyOnceError('EO_PORT_IN_USE', what);
  }
}

/** Polls until ready, failing fast if the process dies; on timeout stops it. */
async function waitReady(o: StackOptions, s: ServerSpec, pid: number, logOffset: number): Promise<void> {
  const { logFile, pidFile } = serverPaths(o.dir, s.id);
  const deadline = Date.now() + o.startTimeoutMs;
  o.onProgress?.(`waiting for ${label(s)} on ${s.host}:${s.port}…`);
  for (;;) {
    if (await s.probe()) return;
    if (!(await isAlive(pid))) {
      await removePidFile(pidFile);
      throw new ExactlyOnceError('EO_SERVER_EXITED', `${label(s)} exited during start-up; see ${logFile}`, {
        details: await tailFile(logFile, 20, logOffset),
      });
    }
    if (Date.now() > deadline) {
      o.onProgress?.(`${label(s)} did not answer in ${o.startTimeoutMs} ms; stopping it…`);
      await terminate(pid, s.stopGraceMs);
      await removePidFile(pidFile);
      throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${label(s)} did not answer on ${s.host}:${s.port} within ${o.startTimeoutMs} ms; see ${logFile}`, {
        details: await tailFile(logFile, 20, logOffset),
      });
    }
    await sleep(300);
  }
}

/**
 * Starts one server, or reuses it if ours is already running (waiting for it to become ready if it
 * is still starting). Ports are checked before anything is fetched or written, so a conflict fails
 * in milliseconds.
 */
export async function startServer(o: StackOptions, id: string): Promise<ServerStatus> {
  const s = spec(o, id);
  const running = await findRunning(o, id);
  if (running !== null) {
    if (running.port !== null && running.port !== s.port) {
      throw new ExactlyOnceError('EO_PORT_IN_USE', `${label(s)} of ${o.dir} is already running on port ${running.port}, not ${s.port}; stop it first (exactlyonce stack down) to change its port`);
    }
    await waitReady(o, s, running.pid, 0);
    await s.afterReady?.(serverPaths(o.dir, id).lib);
    return status(o, id, running);
  }
  await assertPortsFree(s);
  const java = s.java === undefined ? await checkJava(o.onProgress).then(javaCommand) : await s.java();
  const lib = await ensureJars(o, s.name);
  if (isSecure(o) && !existsSync(secureFiles(o).kafkaWorkerProperties)) await prepareSecure(o);
  await s.prepare(lib);

  const p = serverPaths(o.dir, id);
  const t0 = Date.now();
  for (let attempt = 1; ; attempt++) {
    o.onProgress?.(`starting ${label(s)} ${s.version} on ${s.host}:${s.port}…${attempt > 1 ? ` (attempt ${attempt} of ${START_ATTEMPTS})` : ''}`);
    const { child, logOffset } = await spawnDetached(java, s.javaArgs(lib), { cwd: path.dirname(p.logFile), logFile: p.logFile });
    if (child.pid === undefined) {
      throw new ExactlyOnceError('EO_SERVER_EXITED', `${label(s)} could not be started (${java})`, { details: await tailFile(p.logFile, 20, logOffset) });
    }
    await writePidFile(p.pidFile, child.pid);
    try {
      await waitReady(o, s, child.pid, logOffset);
    } catch (e) {
      // A broker of a cluster that exits during start-up (it could not register with the controller or
      // catch up with the metadata log in time, on a loaded machine) is started again: what an operator
      // would do. A timeout, or any other server, is reported at once.
      const again = e instanceof ExactlyOnceError && e.code === 'EO_SERVER_EXITED' && s.name === 'kafka' && id !== 'kafka' && attempt < START_ATTEMPTS;
      if (!again) throw e;
      const why = (e.details ?? '').split('\n').reverse().find((l) => /ERROR|FATAL|Exception/.test(l)) ?? 'see its log';
      o.onProgress?.(`${label(s)} exited during start-up after ${((Date.now() - t0) / 1000).toFixed(1)} s (${why.trim().slice(0, 240)}); starting it again`);
      continue;
    }
    await s.afterReady?.(lib);
    o.onProgress?.(`${label(s)} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (pid ${child.pid}${attempt > 1 ? `, attempt ${attempt}` : ''})`);
    return status(o, id, { pid: child.pid, port: s.port });
  }
}

/** Starts of a cluster broker that exits during start-up, in all (see startServer). */
const START_ATTEMPTS = 3;

/** Stops one server cleanly (SIGTERM, SIGKILL after its grace period). False if it was not running. */
export async function stopServer(o: StackOptions, id: string): Promise<boolean> {
  const running = await findRunning(o, id);
  if (running === null) return false;
  const name = idLabel(id);
  o.onProgress?.(`stopping ${name} (pid ${running.pid})…`);
  const how = await terminate(running.pid, stackNodes(o).some((n) => n.id === id) ? spec(o, id).stopGraceMs : 60_000);
  if (how === 'kill') o.onProgress?.(`${name} did not stop in time; killed it`);
  await removePidFile(serverPaths(o.dir, id).pidFile);
  return true;
}

function idLabel(id: string): string {
  return id === 'kafka' || id === 'cassandra' || id === 'registry' ? displayName(id) : id;
}

/**
 * SIGKILLs one server: a crash, not a stop (no drain, no flush; Cassandra replays its commit log and
 * Kafka recovers its log on the next start). False if it was not running.
 */
export async function killServer(o: StackOptions, id: string): Promise<boolean> {
  const running = await findRunning(o, id);
  if (running === null) return false;
  o.onProgress?.(`SIGKILL ${idLabel(id)} (pid ${running.pid})`);
  await kill(running.pid);
  await removePidFile(serverPaths(o.dir, id).pidFile);
  return true;
}

/** Where a server's log ends now: pass it to `crashRecovery` after the next start. */
export function logEnd(o: StackOptions, id: string): number {
  try {
    return statSync(serverPaths(o.dir, id).logFile).size;
  } catch {
    return 0;
  }
}

/**
 * What a server, started again after a SIGKILL, logged about its recovery: Cassandra's commit log
 * replay ("Log replay complete, N replayed mutations in T ms"), or how many log segments Kafka
 * recovered ("Recovering unflushed segment …", one line per partition, absent after a clean stop);
 * null if the log since `fromOffset` says neither.
 */
export async function crashRecovery(o: StackOptions, id: string, fromOffset: number): Promise<string | null> {
  const text = await tailFile(serverPaths(o.dir, id).logFile, 1_000_000, fromOffset);
  if (id.startsWith('cassandra')) return /Log replay complete, \d+ replayed mutations in \d+ ms/.exec(text)?.[0] ?? null;
  const segments = text.match(/Recovering unflushed segment/g)?.length ?? 0;
  return segments === 0 ? null : `recovered ${segments} unflushed log segments`;
}

/**
 * Starts every server, reusing running ones. All or nothing: if one fails, the servers this call
 * started are stopped again, so a failed `stack up` does not leave a half stack behind. Kafka and
 * Cassandra start in parallel. In a cluster all brokers start at once (a KRaft quorum needs a
 * majority: one alone never gets ready) and the call waits until every broker is registered; the
 * Cassandra nodes start one after another, the seed first, each once the one before answers.
 */
export async function stackUp(o: StackOptions): Promise<{ servers: ServerStatus[]; started: string[]; elapsedMs: number }> {
  const t0 = Date.now();
  const nodes = stackNodes(o);
  const ids = new Set(nodes.map((n) => n.id));
  // A Schema Registry running beside a stack started without one (a test started it) is no other layout.
  const others = (await runningIds(o)).filter((id) => !ids.has(id) && id !== 'registry');
  if (others.length > 0) {
    throw new ExactlyOnceError('EO_USAGE', `the stack at ${o.dir} runs ${others.join(', ')}, which is another layout (--cassandra-nodes ${o.cassandraNodes} --kafka-brokers ${o.kafkaBrokers}); stop it first (exactlyonce stack down)`);
  }
  const before = await Promise.all(nodes.map(async (n) => [n.id, await findRunning(o, n.id)] as const));
  const toStart = before.filter(([, r]) => r === null).map(([id]) => id);
  // Check every port first: a conflict on one server must not cost a start and stop of the others.
  for (const id of toStart) await assertPortsFree(spec(o, id));
  if (isSecure(o) && nodes.length > 2) {
    throw new ExactlyOnceError('EO_USAGE', '--secure runs one Cassandra node and one Kafka broker; a secured cluster (--cassandra-nodes / --kafka-brokers above 1) is not supported yet');
  }
  writeLayout(o);
  // Certificates and passwords once, before the servers start in parallel and read them.
  if (isSecure(o)) await prepareSecure(o);

  const kafka = nodes.filter((n) => n.kind === 'kafka');
  const cassandra = nodes.filter((n) => n.kind === 'cassandra');
  // The registry keeps its schemas in its own file (registry-server.ts): it starts beside the brokers.
  const beside = nodes.filter((n) => n.kind !== 'cassandra');
  const [k, c] = await Promise.all([
    Promise.allSettled(beside.map((n) => startServer(o, n.id))),
    (async () => {
      const out: PromiseSettledResult<ServerStatus>[] = [];
      for (const n of cassandra) {
        const r = await startServer(o, n.id).then((value) => ({ status: 'fulfilled' as const, value }), (reason: unknown) => ({ status: 'rejected' as const, reason }));
        out.push(r);
        if (r.status === 'rejected') break; // the next node would not find its seed (or the ring)
      }
      return out;
    })(),
  ]);
  let failure = [...k, ...c].find((r): r is PromiseRejectedResult => r.status === 'rejected')?.reason as unknown;
  if (failure === undefined && kafka.length > 1) failure = await waitBrokers(o, kafka[0]!.port, kafka.length).catch((e: unknown) => e);
  if (failure !== undefined) {
    await Promise.all(toStart.map((id) => stopServer(o, id)));
    throw failure;
  }
  const servers = [...k, ...c].map((r) => (r as PromiseFulfilledResult<ServerStatus>).value);
  return { servers, started: toStart, elapsedMs: Date.now() - t0 };
}

/** Resolves once the broker on `port` lists `count` registered brokers (the cluster can create a topic of RF `count`). */
async function waitBrokers(o: StackOptions, port: number, count: number): Promise<undefined> {
  const deadline = Date.now() + o.startTimeoutMs;
  let seen = 0;
  while (Date.now() < deadline) {
    seen = await metadataBrokerCount(port).catch(() => 0);
    if (seen >= count) return undefined;
    await sleep(500);
  }
  throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `the Kafka cluster listed ${seen} of ${count} brokers after ${o.startTimeoutMs} ms; see the kafka*.log files in ${path.join(o.dir, 'logs')}`);
}

/** The ids of the servers with a pid file in the stack dir whose process is ours and alive. */
async function runningIds(o: StackOptions): Promise<string[]> {
  let files: string[];
  try {
    files = readdirSync(path.join(path.resolve(o.dir), 'run'));
  } catch {
    return [];
  }
  const ids = files.filter((f) => /^(kafka|cassandra)\d*\.pid$|^registry\.pid$/.test(f)).map((f) => f.slice(0, -'.pid'.length));
  ids.sort((a, b) => Number(a.startsWith('cassandra')) - Number(b.startsWith('cassandra')) || a.localeCompare(b, 'en', { numeric: true }));
  const alive = await Promise.all(ids.map(async (id) => (await findRunning(o, id)) !== null));
  return ids.filter((_, i) => alive[i]);
}

/** Stops every server of the stack dir (whatever layout it was started with), in parallel; idempotent. */
export async function stackDown(o: StackOptions): Promise<{ stopped: string[] }> {
  const ids = await runningIds(o);
  const stopped = await Promise.all(ids.map((id) => stopServer(o, id)));
  return { stopped: ids.filter((_, i) => stopped[i]) };
}

export async function stackStatus(o: StackOptions): Promise<ServerStatus[]> {
  return Promise.all(stackNodes(o).map(async (n) => status(o, n.id, await findRunning(o, n.id))));
}

/** The last `lines` lines of server `id`'s log ('' if it never ran). */
export async function stackLogs(o: StackOptions, id: string, lines: number): Promise<string> {
  return tailFile(serverPaths(o.dir, id).logFile, lines);
}
