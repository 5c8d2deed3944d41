/**
 * The processes a bench run starts: real `exactlyonce run` workers, and the bench's own child scripts
 * (the baseline consumer, the ceiling writer), each in its own process so that no case shares an event
 * loop with the orchestrator. Peak RSS and CPU time are read from /proc (Linux), while the process runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { ConnectionConfig } from '../src/config.js';
import { ExactlyOnceError } from '../src/errors.js';
import { cliPath, connectionArgs, connectionEnv } from '../src/harness/cli-process.js';
import { freePort } from '../src/harness/worker-fleet.js';
import { fileURLToPath } from 'node:url';
import { BenchAborted, pause } from './abort.js';
import type { BenchOptions } from './options.js';

/**
 * How a child script runs, found from this module: from sources (bench/*.ts, through the tsx loader
 * this process runs with) or from the build (dist/bench/*.js, plain node), like the CLI that started it.
 */
const fromSources = import.meta.url.endsWith('.ts');
const ext = fromSources ? '.ts' : '.js';
const loaderArgs = fromSources ? ['--import', import.meta.resolve('tsx')] : [];
const moduleFile = (relative: string) => fileURLToPath(new URL(`${relative}${ext}`, import.meta.url));
/** Output kept per process for error messages (the tail), in characters. */
const KEEP_OUTPUT = 64 * 1024;
/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on every Linux we run on). */
const CLOCK_TICKS = 100;

/** Peak resident set size of a process so far, in KiB (VmHWM), or undefined once it is gone. */
export function peakRssKiB(pid: number): number | undefined {
  try {
    const m = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? undefined : Number(m[1]);
  } catch {
    return undefined;
  }
}

/** User + system CPU seconds a process has used so far (all its threads), or undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may contain spaces) start at field 3; utime and stime are 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

export class BenchProcess {
  /** A worker's --metrics-port (src/engine/metrics-server.ts): where bench/stages.ts reads its stage histogram. */
  metricsPort: number | undefined;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private out = '';
  private lineListeners = new Set<(line: string) => void>();
  private readonly partial = { stdout: '', stderr: '' };
  private stopping: Promise<void> | undefined;

  constructor(
    readonly label: string,
    private readonly child: ChildProcess,
  ) {
    const onData = (stream: 'stdout' | 'stderr') => (d: Buffer) => {
      const s = d.toString();
      this.out = (this.out + s).slice(-KEEP_OUTPUT);
      const lines = (this.partial[stream] + s).split('\n');
      this.partial[stream] = lines.pop()!;
      for (const line of lines) for (const l of this.lineListeners) l(line);
    };
    child.stdout?.on('data', onData('stdout'));
    child.stderr?.on('data', onData('stderr'));
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** The last lines of the process's output, for error messages. */
  tail(lines = 15): string {
    return this.out.split('\n').slice(-lines).join('\n');
  }

  onLine(listener: (line: string) => void): () => void {
    this.lineListeners.add(listener);
    return () => this.lineListeners.delete(listener);
  }

  peakRssKiB(): number | undefined {
    return peakRssKiB(this.pid);
  }

  cpuSeconds(): number | undefined {
    return cpuSeconds(this.pid);
  }

  /** Throws when the process has exited (a worker must not end on its own during a case). */
  assertRunning(): void {
    if (!this.running) {
      throw new ExactlyOnceError('EO_SERVER_EXITED', `${this.label} (pid ${this.pid}) exited with ${this.child.exitCode ?? this.child.signalCode}`, {
        details: this.tail(),
      });
    }
  }

  /** Waits for a line of output that matches, failing when the process exits or the deadline passes. */
  async waitForLine(match: (line: string) => boolean, what: string, timeoutMs: number, signal: AbortSignal): Promise<string> {
    let found: string | undefined;
    const off = this.onLine((line) => {
      if (found === undefined && match(line)) found = line;
    });
    try {
      const recent = this.out.split('\n').find(match);
      if (recent !== undefined) return recent;
      const deadline = Date.now() + timeoutMs;
      while (found === undefined) {
        this.assertRunning();
        if (Date.now() > deadline) {
          throw new ExactlyOnceError('EO_STARTUP_TIMEOUT', `${this.label} (pid ${this.pid}): no sign of "${what}" after ${timeoutMs / 1000}s`, { details: this.tail() });
        }
        await pause(50, signal);
      }
      return found;
    } finally {
      off();
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited within `graceMs`. Idempotent. */
  stop(graceMs = 20_000): Promise<void> {
    this.stopping ??= (async () => {
      if (!this.running) return;
      this.child.kill('SIGTERM');
      const timer = setTimeout(() => this.kill(), graceMs);
      await this.exited;
      clearTimeout(timer);
    })();
    return this.stopping;
  }

  kill(): void {
    if (this.running) this.child.kill('SIGKILL');
  }
}

/**
 * What starting a process needs of the run (BenchContext is one): its options, its abort signal, and a
 * register of what it started, so that all of it is stopped however the run ends.
 */
export interface ProcessHost {
  readonly options: BenchOptions;
  readonly signal: AbortSignal;
  track(p: BenchProcess): BenchProcess;
}

function start(ctx: ProcessHost, label: string, command: string, args: string[], env: Record<string, string>): BenchProcess {
  if (ctx.signal.aborted) throw new BenchAborted();
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  return ctx.track(new BenchProcess(label, child));
}

/** Where a process's CPU profile goes when --cpu-prof is given: one folder per process label. */
function profileArgs(ctx: ProcessHost, label: string): string[] {
  const dir = ctx.options.profileDir;
  return dir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${dir}/${label.replace(/[^A-Za-z0-9]+/g, '-')}`];
}

function nodeOptions(ctx: ProcessHost): Record<string, string> {
  const extra = ctx.options.workerNodeOptions;
  return extra === undefined ? {} : { NODE_OPTIONS: `${process.env['NODE_OPTIONS'] ?? ''} ${extra}`.trim() };
}

/** Metrics ports handed to the run's workers (each found free, and not handed out twice before it is bound). */
const metricsPorts = new Set<number>();
const FIRST_METRICS_PORT = 19400;

/**
 * A real worker: `bin/exactlyonce run` with the bench's batching flags, JSON logs at info level, and
 * /metrics on a free port (its stage histogram is part of the results: bench/stages.ts).
 */
/** `extra`: more arguments of `run` (a job's `--job <file>`). */
export async function startWorker(ctx: ProcessHost, config: ConnectionConfig, label: string, extra: readonly string[] = []): Promise<BenchProcess> {
  const o = ctx.options;
  const port = await freePort(FIRST_METRICS_PORT, metricsPorts);
  metricsPorts.add(port);
  const args = ['run', ...connectionArgs(config), '--max-batch', String(o.maxBatch), '--concurrency', String(o.concurrency), '--max-buffer-mb', String(o.maxBufferMb), '--layout', o.layout];
  args.push('--metrics-port', String(port), ...extra);
  const env: Record<string, string> = { ...connectionEnv(config), EXACTLYONCE_LOG_FORMAT: 'json', EXACTLYONCE_LOG_LEVEL: 'info', ...nodeOptions(ctx) };
  // Node refuses --cpu-prof in NODE_OPTIONS, so a profiled worker is started as bin/exactlyonce
  // starts it (node and the CLI's main module, the build's or through tsx the sources') with the
  // profiler flags added. The profile is written when the worker exits cleanly (SIGTERM).
  const memory = workerMemory();
  const proc =
    o.profileDir === undefined
      ? start(ctx, label, cliPath, args, env)
      : start(ctx, label, process.execPath, [...memory.args, ...profileArgs(ctx, label), ...loaderArgs, moduleFile('../src/cli/main'), ...args], { ...memory.env, ...env });
  proc.metricsPort = port;
  return proc;
}

/** bin/exactlyonce's default V8 heap cap for `run`, MiB (`run --max-heap-mb`). */
const WORKER_HEAP_MB = 160;

/**
 * What bin/exactlyonce gives a worker (`run`) to bound its memory: the same for a profiled worker and
 * for the baseline consumer, so that they differ from a worker only in the exactly-once machinery.
 */
function workerMemory(): { args: string[]; env: Record<string, string> } {
  return {
    args: [`--max-old-space-size=${process.env['EXACTLYONCE_WORKER_HEAP_MB'] ?? WORKER_HEAP_MB}`],
    env: { MALLOC_ARENA_MAX: process.env['MALLOC_ARENA_MAX'] ?? '2' },
  };
}

/**
 * One of the bench's child scripts (bench/<script>.ts, or its build), run like the CLI; `asWorker` gives
 * it a worker's memory settings (the baseline consumer; not the ceiling, which holds all its rows).
 * Its arguments (they hold the connection, secrets included) go as JSON in EXACTLYONCE_BENCH_ARGS,
 * not on its command line.
 */
export function startScript(ctx: ProcessHost, label: string, script: string, args: unknown, asWorker = false): BenchProcess {
  const memory = asWorker ? workerMemory() : { args: [], env: {} };
  return start(ctx, label, process.execPath, [...memory.args, ...profileArgs(ctx, label), ...loaderArgs, moduleFile(`./${script}`)], {
    ...memory.env,
    ...nodeOptions(ctx),
    EXACTLYONCE_BENCH_ARGS: JSON.stringify(args),
  });
}

/** Waits until a worker has joined the group and been given its partitions. */
export async function waitAssigned(ctx: ProcessHost, worker: BenchProcess, timeoutMs = 120_000): Promise<void> {
  await worker.waitForLine((l) => l.includes('"msg":"assigned partitions'), 'assigned partitions', timeoutMs, ctx.signal);
}
