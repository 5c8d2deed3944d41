/**
 * The stack coordinator: start, stop and inspect the two servers. A server is "ours" when the pid in
 * run/<name>.pid is alive and its command line carries this stack dir's tag (see stackTags), so a
 * stale pid file, or a pid reused by an unrelated process, is never mistaken for a running server.
 */
import { statSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExactlyOnceError } from '../errors.js';
import { cassandraServer } from './cassandra-server.js';
import { checkJava, ensureJars, javaCommand } from './fetch.js';
import { kafkaServer } from './kafka-server.js';
import { displayName, SERVER_NAMES, type ServerName, type ServerStatus, type StackOptions } from './options.js';
import { serverPaths } from './paths.js';
import { commandLine, isAlive, isPortFree, kill, readPidFile, removePidFile, spawnDetached, tailFile, terminate, writePidFile } from './process.js';
import type { ServerSpec } from './server.js';

function spec(o: StackOptions, name: ServerName): ServerSpec {
  return name === 'kafka' ? kafkaServer(o) : cassandraServer(o);
}

interface Running {
  pid: number;
  /** The port it was started with, from its command line (null where /proc is unavailable). */
  port: number | null;
}

/** Our live process for `name`, or null; removes a pid file that no longer points at it. */
async function findRunning(o: StackOptions, name: ServerName): Promise<Running | null> {
  const { pidFile } = serverPaths(o.dir, name);
  const pid = await readPidFile(pidFile);
  if (pid === null) return null;
  const argv = (await isAlive(pid)) ? await commandLine(pid) : [];
  const tag = `-Dexactlyonce.stack=${path.resolve(o.dir)}#${name}`;
  if (argv === null) return { pid, port: null }; // no /proc: trust a live pid
  if (!argv.includes(tag)) {
    await removePidFile(pidFile);
    return null;
  }
  const portArg = argv.find((a) => a.startsWith('-Dexactlyonce.port='));
  return { pid, port: portArg === undefined ? null : Number(portArg.split('=')[1]) };
}

async function status(o: StackOptions, name: ServerName, running: Running | null): Promise<ServerStatus> {
  const s = spec(o, name);
  const port = running?.port ?? s.port;
  return {
    name,
    pid: running?.pid ?? null,
    port,
    running: running !== null,
    ready: running !== null && (port === s.port ? await s.probe() : false),
    version: s.version,
    logFile: serverPaths(o.dir, name).logFile,
  };
}

async function assertPortsFree(s: ServerSpec): Promise<void> {
  for (const { port, what } of s.ports) {
    if (!(await isPortFree(port))) throw new ExactlyOnceError('EO_PORT_IN_USE', what);
  }
}

/** Polls until ready, failing fast if the process dies; on timeout stops it. */
async function waitReady(o: StackOptions, s: ServerSpec, pid: number, logOffset: number): Promise<void> {
  const { logFile, pidFile } = serverPaths(o.dir, s.name);
  const deadline = Date.now() + o.startTimeoutMs;
  o.onProgress?.(`waiting for ${displayName(s.name)} on 127.0.0.1:${s.port}…`);
  for (;;) {
    if (await s.probe()) return;
    if (!(await isAlive(pid))) {
      await removePidFile(pidFile);
      throw new ExactlyOnceError('EO_SERVER_EXITED', `${displayName(s.name)} exited during start-up; see ${logFile}`, {
        details: await tailFile(logFile, 20, logOffset),
      });
    }
    if (Date.now() > deadline) {
      o.onProgress?.(`${displayName(s.name)} did not answer in ${o.startTimeoutMs} ms; stopping it…`);
      await terminate(pid, s.stopGraceMs);
      await removePidFile(pidFile);
      throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${displayName(s.name)} did not answer on 127.0.0.1:${s.port} within ${o.startTimeoutMs} ms; see ${logFile}`, {
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
export async function startServer(o: StackOptions, name: ServerName): Promise<ServerStatus> {
  const s = spec(o, name);
  const running = await findRunning(o, name);
  if (running !== null) {
    if (running.port !== null && running.port !== s.port) {
      throw new ExactlyOnceError('EO_PORT_IN_USE', `${displayName(name)} of ${o.dir} is already running on port ${running.port}, not ${s.port}; stop it first (exactlyonce stack down) to change its port`);
    }
    await waitReady(o, s, running.pid, 0);
    return status(o, name, running);
  }
  await assertPortsFree(s);
  await checkJava(o.onProgress);
  const lib = await ensureJars(o, name);
  await s.prepare(lib);

  const p = serverPaths(o.dir, name);
  o.onProgress?.(`starting ${displayName(name)} ${s.version} on 127.0.0.1:${s.port}…`);
  const t0 = Date.now();
  const { child, logOffset } = await spawnDetached(javaCommand(), s.javaArgs(lib), { cwd: path.dirname(p.logFile), logFile: p.logFile });
  if (child.pid === undefined) {
    throw new ExactlyOnceError('EO_SERVER_EXITED', `${displayName(name)} could not be started (${javaCommand()})`, { details: await tailFile(p.logFile, 20, logOffset) });
  }
  await writePidFile(p.pidFile, child.pid);
  await waitReady(o, s, child.pid, logOffset);
  o.onProgress?.(`${displayName(name)} ready in ${((Date.now() - t0) / 1000).toFixed(1)} s (pid ${child.pid})`);
  return status(o, name, { pid: child.pid, port: s.port });
}

/** Stops one server cleanly (SIGTERM, SIGKILL after its grace period). False if it was not running. */
export async function stopServer(o: StackOptions, name: ServerName): Promise<boolean> {
  const running = await findRunning(o, name);
  if (running === null) return false;
  o.onProgress?.(`stopping ${displayName(name)} (pid ${running.pid})…`);
  const how = await terminate(running.pid, spec(o, name).stopGraceMs);
  if (how === 'kill') o.onProgress?.(`${displayName(name)} did not stop in time; killed it`);
  await removePidFile(serverPaths(o.dir, name).pidFile);
  return true;
}

/**
 * SIGKILLs one server: a crash, not a stop (no drain, no flush; Cassandra replays its commit log and
 * Kafka recovers its log on the next start). False if it was not running.
 */
export async function killServer(o: StackOptions, name: ServerName): Promise<boolean> {
  const running = await findRunning(o, name);
  if (running === null) return false;
  o.onProgress?.(`SIGKILL ${displayName(name)} (pid ${running.pid})`);
  await kill(running.pid);
  await removePidFile(serverPaths(o.dir, name).pidFile);
  return true;
}

/** Where a server's log ends now: pass it to `crashRecovery` after the next start. */
export function logEnd(o: StackOptions, name: ServerName): number {
  try {
    return statSync(serverPaths(o.dir, name).logFile).size;
  } catch {
    return 0;
  }
}

/**
 * The line in which a server, started again after a SIGKILL, says it recovered: Cassandra's commit
 * log replay ("Log replay complete, N replayed mutations") or Kafka's log recovery ("Recovering N logs
 * … since no clean shutdown file was found"); null if the log since `fromOffset` holds none.
 */
export async function crashRecovery(o: StackOptions, name: ServerName, fromOffset: number): Promise<string | null> {
  const text = await tailFile(serverPaths(o.dir, name).logFile, 100_000, fromOffset);
  const re = name === 'cassandra' ? /Log replay complete, \d+ replayed mutations/ : /Recovering \d+ logs from \S+ since no clean shutdown file was found/;
  return re.exec(text)?.[0] ?? null;
}

/**
 * Starts both servers in parallel, reusing running ones. All or nothing: if one fails, the servers
 * this call started are stopped again, so a failed `stack up` does not leave a half stack behind.
 */
export async function stackUp(o: StackOptions): Promise<{ servers: ServerStatus[]; started: ServerName[]; elapsedMs: number }> {
  const t0 = Date.now();
  const before = await Promise.all(SERVER_NAMES.map(async (n) => [n, await findRunning(o, n)] as const));
  const toStart = before.filter(([, r]) => r === null).map(([n]) => n);
  // Check every port first: a conflict on one server must not cost a start and stop of the other.
  for (const n of toStart) await assertPortsFree(spec(o, n));

  const results = await Promise.allSettled(SERVER_NAMES.map((n) => startServer(o, n)));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure !== undefined) {
    await Promise.all(toStart.map((n) => stopServer(o, n)));
    throw failure.reason;
  }
  const servers = results.map((r) => (r as PromiseFulfilledResult<ServerStatus>).value);
  return { servers, started: toStart, elapsedMs: Date.now() - t0 };
}

/** Stops both servers (in parallel); idempotent. */
export async function stackDown(o: StackOptions): Promise<{ stopped: ServerName[] }> {
  const stopped = await Promise.all(SERVER_NAMES.map((n) => stopServer(o, n)));
  return { stopped: SERVER_NAMES.filter((_, i) => stopped[i]) };
}

export async function stackStatus(o: StackOptions): Promise<ServerStatus[]> {
  return Promise.all(SERVER_NAMES.map(async (n) => status(o, n, await findRunning(o, n))));
}

/** The last `lines` lines of the server's log ('' if it never ran). */
export async function stackLogs(o: StackOptions, name: ServerName, lines: number): Promise<string> {
  return tailFile(serverPaths(o.dir, name).logFile, lines);
}

