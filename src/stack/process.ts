/**
 * OS-level helpers: run a tool to completion, spawn a detached server, pid files, liveness, ports,
 * stopping, log tails. Nothing here knows about Kafka or Cassandra.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, statSync, renameSync } from 'node:fs';
import { mkdir, open, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ExactlyOnceError } from '../errors.js';

export interface RunResult {
  code: number | null;
  /** stdout and stderr interleaved, at most the last 256 KiB. */
  output: string;
}

/** Runs a command to completion. Rejects only if it cannot be started (err.code 'ENOENT' = not installed). */
export function run(cmd: string, args: readonly string[], cwd?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    const collect = (b: Buffer): void => {
      output = (output + b.toString()).slice(-256 * 1024);
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** The last `n` lines of a text, without ANSI colour codes (mvn emits some even in batch mode). */
export function lastLines(text: string, n: number): string {
  // eslint-disable-next-line no-control-regex
  const lines = text.replace(/\x1b\[[0-9;]*m/g, '').trimEnd().split('\n');
  return lines.slice(-n).join('\n');
}

/** Logs over this size are moved to `<file>.1` when a server starts, so they cannot grow forever. */
const LOG_ROTATE_BYTES = 64 * 1024 * 1024;

/**
 * Starts a server that outlives this process: its own session (detached), stdout+stderr appended to
 * `logFile` (so JVM crashes before logging is set up are in the same file), not keeping Node alive.
 * Returns the child and the log offset at which this run's output starts.
 */
export async function spawnDetached(
  cmd: string,
  args: readonly string[],
  opts: { cwd: string; logFile: string },
): Promise<{ child: ChildProcess; logOffset: number }> {
  await mkdir(path.dirname(opts.logFile), { recursive: true });
  await mkdir(opts.cwd, { recursive: true });
  const size = fileSize(opts.logFile);
  if (size > LOG_ROTATE_BYTES) renameSync(opts.logFile, `${opts.logFile}.1`);
  const fd = openSync(opts.logFile, 'a');
  try {
    const child = spawn(cmd, args, { cwd: opts.cwd, detached: true, stdio: ['ignore', fd, fd] });
    // A failed exec (ENOENT) is reported through 'error'; keep it from crashing the process, the
    // caller sees the exit through isAlive/exitCode.
    child.on('error', () => undefined);
    child.unref();
    return { child, logOffset: size > LOG_ROTATE_BYTES ? 0 : size };
  } finally {
    closeSync(fd); // the child has its own copy of the descriptor
  }
}

function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** True if `pid` is a live process (a zombie waiting to be reaped counts as dead). */
export async function isAlive(pid: number): Promise<boolean> {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM'; // exists, but belongs to someone else
  }
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  // Field 3 (after "pid (comm)") is the state; 'Z' = exited but not reaped by its parent.
  return stat === null || stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
}

/** The process's argv from /proc, or null where /proc is unavailable (macOS) or it is gone. */
export async function commandLine(pid: number): Promise<string[] | null> {
  const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  return raw === null ? null : raw.split('\0').filter((s) => s !== '');
}

export async function readPidFile(file: string): Promise<number | null> {
  const text = await readFile(file, 'utf8').catch(() => null);
  const pid = text === null ? NaN : Number.parseInt(text.trim(), 10);
  return Number.isInteger(pid) && pid > 0 ? pid : null;
}

/** Plain pid text, so `kill $(cat .stack/run/kafka.pid)` works from a shell. */
export async function writePidFile(file: string, pid: number): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, `${pid}\n`);
}

export async function removePidFile(file: string): Promise<void> {
  await rm(file, { force: true });
}

/**
 * True if nothing listens on 127.0.0.1:`port`, by binding it for a moment. Binding (not connecting)
 * also catches a process listening on 0.0.0.0 or [::] and does not disturb it.
 */
export function isPortFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ port, host, exclusive: true }, () => server.close(() => resolve(true)));
  });
}

/**
 * A free TCP port on 127.0.0.1, the one port finder of the project: with `from`, the first port at or
 * above it that isPortFree and is not in `taken` (EO_PORT_IN_USE when there is none); without it, one
 * the OS picks (an ephemeral port, e.g. a test worker's --metrics-port).
 */
export async function freePort(from?: number, taken: ReadonlySet<number> = new Set()): Promise<number> {
  if (from === undefined) {
    const server = net.createServer();
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    await new Promise((resolve) => server.close(resolve));
    return port;
  }
  for (let port = from; port < 65535; port++) {
    if (!taken.has(port) && (await isPortFree(port))) return port;
  }
  throw new ExactlyOnceError('EO_PORT_IN_USE', `no free port at or above ${from}`);
}

/** True if something accepts TCP connections on 127.0.0.1:`port` within `timeoutMs`. */
export function canConnect(port: number, timeoutMs = 1000, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/**
 * Stops a process: SIGTERM (both servers flush and shut down cleanly on it), then SIGKILL if it is
 * still alive after `graceMs`. Resolves once it is gone; returns how it ended.
 */
export async function terminate(pid: number, graceMs: number): Promise<'term' | 'kill'> {
  const signal = (sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  signal('SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline) {
    if (!(await isAlive(pid))) return 'term';
    await sleep(200);
  }
  signal('SIGKILL');
  while (await isAlive(pid)) await sleep(100);
  return 'kill';
}

/** SIGKILLs a process (a crash: no shutdown hook runs) and resolves once it is gone. */
export async function kill(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    return; // already gone
  }
  while (await isAlive(pid)) await sleep(100);
}

/** The last `lines` lines of a file, reading only its end; '' if it does not exist. */
export async function tailFile(file: string, lines: number, fromOffset = 0): Promise<string> {
  const handle = await open(file, 'r').catch(() => null);
  if (handle === null) return '';
  try {
    const { size } = await handle.stat();
    const start = Math.max(fromOffset, size - Math.max(64 * 1024, lines * 1024));
    const buffer = Buffer.alloc(Math.max(0, size - start)); // the file may have been truncated
    await handle.read(buffer, 0, buffer.length, start);
    return lastLines(buffer.toString('utf8'), lines);
  } finally {
    await handle.close();
  }
}
