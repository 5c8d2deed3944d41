/**
 * A fleet of real worker processes (`exactlyonce run`), each logging JSON to a file of its own: start,
 * SIGKILL, SIGSTOP/SIGCONT, a clean stop (SIGTERM), and waits for what a worker's log or its /readyz
 * says. What `chaos` and `demo` run their workers with. A worker that exits when nobody stopped it is
 * recorded (and reported through `onUnexpectedExit`), so that the caller can count it as a finding.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { authHeaders } from '../engine/http-access.js';
import { ExactlyOnceError } from '../errors.js';
import { cliPath, terminate } from './cli-process.js';
import { sleep } from './sleep.js';

/** The one port finder (src/stack/process.ts), where the demo and the bench pick their workers' ports. */
export { freePort } from '../stack/process.js';

/** `paused`: SIGSTOPped; `waking`: SIGCONTed, left alone for a while so that it can find its partitions gone. */
export type WorkerState = 'running' | 'paused' | 'waking' | 'killed' | 'stopping' | 'exited';

export interface FleetWorker {
  readonly id: number;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Its /metrics, /healthz and /readyz port, when started with one. */
  readonly port: number | undefined;
  state: WorkerState;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface FleetOptions {
  /** The flags of `run` (connection, settings), the same for every worker. */
  args: string[];
  /** Added to the workers' environment: the connection's secrets (`connectionEnv`), never on argv. */
  env?: Record<string, string>;
  /** Where worker `id` (1, 2, …) logs. */
  logFile: (id: number) => string;
  /** Each worker in a process group of its own (Ctrl-C at a terminal then reaches only the caller). */
  detached?: boolean;
  /** Progress lines ("started worker#1 (pid …)"). */
  say?: (line: string) => void;
  /** A worker exited that nobody stopped or killed; `how` is its exit code or signal. */
  onUnexpectedExit?: (w: FleetWorker, how: string) => void;
}

const STARTED = '"msg":"worker started"';
const OWNS = '"msg":"assigned partitions';

export class WorkerFleet {
  private readonly workers = new Map<number, FleetWorker>();
  private nextId = 1;
  private closing = false;
  /** Replacements still to start (startAfter). */
  private restarting = 0;
  /** Workers that exited by themselves, with the end of their log. */
  readonly unexpectedExits: string[] = [];
  /** Workers that left with an error, or only by SIGKILL, after SIGTERM. */
  readonly badStops: string[] = [];

  constructor(private readonly o: FleetOptions) {}

  start(port?: number): FleetWorker {
    const id = this.nextId++;
    const logFile = this.o.logFile(id);
    const fd = openSync(logFile, 'w');
    const args = ['run', ...this.o.args, ...(port === undefined ? [] : ['--metrics-port', String(port)])];
    const child = spawn(cliPath, args, { stdio: ['ignore', fd, fd], detached: this.o.detached === true, env: { ...process.env, ...this.o.env, EXACTLYONCE_LOG_FORMAT: 'json' } });
    closeSync(fd);
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    const w: FleetWorker = { id, child, logFile, port, state: 'running', exited };
    this.workers.set(id, w);
    void exited.then(({ code, signal }) => {
      const was = w.state;
      w.state = 'exited';
      this.workers.delete(id);
      const how = signal ?? `code ${code}`;
      if (was === 'running' || was === 'paused' || was === 'waking') {
        this.unexpectedExits.push(`worker#${id} (pid ${child.pid}) exited by itself with ${how}: ${this.lastWords(w).split('\n').join(' | ').slice(0, 1500)}`);
        this.o.onUnexpectedExit?.(w, how);
      } else if (was === 'stopping' && code !== 0) {
        this.badStops.push(`worker#${id} (pid ${child.pid}) stopped with ${how} after SIGTERM; see ${logFile}`);
      }
    });
    this.o.say?.(`started worker#${id} (pid ${child.pid})`);
    return w;
  }

  /** Starts a replacement worker `ms` from now (not if `cancelled` by then, nor once the fleet closes); counted meanwhile. */
  async startAfter(ms: number, cancelled: () => boolean = () => false): Promise<void> {
    this.restarting++;
    try {
      await sleep(ms);
    } finally {
      this.restarting--;
    }
    if (!this.closing && !cancelled()) this.start();
  }

  running(): FleetWorker[] {
    return [...this.workers.values()].filter((w) => w.state === 'running');
  }

  /**
   * What a worker that died printed last: Node's report of an uncaught error (the lines after the last
   * JSON log line: the error's message and the frames up to the first await, not only the last), else
   * the last 3 lines.
   */
  lastWords(w: FleetWorker): string {
    const lines = readFileSync(w.logFile, 'utf8').trim().split('\n');
    let from = lines.length;
    while (from > 0 && !lines[from - 1]!.startsWith('{')) from--;
    const report = lines.slice(from).filter((l) => l.trim() !== '' && !/^\s*\^+\s*$/.test(l));
    return report.length > 0 ? report.slice(0, 12).join('\n') : lines.slice(-3).join('\n');
  }

  /** The last `lines` lines of a worker's log. */
  tail(w: FleetWorker, lines: number): string {
    return readFileSync(w.logFile, 'utf8').trim().split('\n').slice(-lines).join('\n');
  }

  /**
   * Waits until at least `n` workers run while others are on their way back (a replacement still to
   * start, a worker frozen or waking); false when no more are coming, at the deadline, or when the fleet closes.
   */
  async awaitRunning(n: number, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.running().length >= n) return true;
      const coming = this.restarting > 0 || [...this.workers.values()].some((w) => w.state === 'paused' || w.state === 'waking');
      if (!coming || this.closing || Date.now() > deadline) return false;
      await sleep(100);
    }
  }

  /** A running worker drawn by `p` (0..1); with `started`, preferably one that has joined the group. */
  pick(p: number, started = false): FleetWorker | undefined {
    let r = this.running();
    if (started) {
      const joined = r.filter((w) => readFileSync(w.logFile, 'utf8').includes(STARTED));
      if (joined.length > 0) r = joined;
    }
    return r[Math.min(r.length - 1, Math.floor(p * r.length))];
  }

  /** A running worker that owns partitions (its log says so), drawn by `p`; waits up to `timeoutMs` for one. */
  async pickOwner(p: number, timeoutMs: number): Promise<FleetWorker | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const owners = this.running().filter((w) => readFileSync(w.logFile, 'utf8').includes(OWNS));
      if (owners.length > 0) return owners[Math.min(owners.length - 1, Math.floor(p * owners.length))];
      if (Date.now() > deadline || this.closing) return undefined;
      await sleep(500);
    }
  }

  /** Waits until a worker started with a port answers 200 on /readyz (it owns its partitions and its servers answer). */
  async waitReady(w: FleetWorker, signal?: AbortSignal): Promise<void> {
    while (signal?.aborted !== true) {
      if (w.state === 'exited') throw new ExactlyOnceError('EO_SERVER_EXITED', `worker#${w.id} exited before it was ready; see ${w.logFile}`);
      const status = await fetch(`http://127.0.0.1:${w.port}/readyz`, { headers: authHeaders(), signal: AbortSignal.timeout(5000) }).then(
        (r) => r.status,
        () => undefined, // not listening yet
      );
      if (status === 200) return;
      await sleep(250, signal);
    }
  }

  kill(w: FleetWorker): void {
    w.state = 'killed';
    w.child.kill('SIGKILL');
  }

  /** SIGSTOP: the worker freezes with its batches in flight (a zombie once its session expires). */
  freeze(w: FleetWorker): void {
    w.state = 'paused';
    w.child.kill('SIGSTOP');
  }

  /** SIGCONT to a frozen worker; it runs on as `waking` until `settle`. */
  thaw(w: FleetWorker): void {
    w.state = 'waking';
    w.child.kill('SIGCONT');
  }

  settle(w: FleetWorker): void {
    if (w.state === 'waking') w.state = 'running';
  }

  /**
   * SIGTERM, then SIGKILL if it has not left after `graceMs`. A worker still starting (no signal
   * handler yet on a loaded machine) is first given up to a minute to join, as a user would wait.
   */
  async stop(w: FleetWorker, graceMs = 30_000): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    if (w.state === 'exited') return w.exited;
    if (w.state === 'paused') w.child.kill('SIGCONT');
    w.state = 'stopping';
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline && !readFileSync(w.logFile, 'utf8').includes(STARTED)) {
      if ((await Promise.race([w.exited.then(() => true), sleep(250).then(() => false)])) === true) return w.exited;
    }
    await terminate(w.child, graceMs);
    return w.exited;
  }

  /** The log files of every worker started so far, the exited ones too. */
  logs(): string[] {
    return [...this.workers.values()].map((w) => w.logFile);
  }

  /** SIGKILL to every worker at once, without waiting (a second Ctrl-C, or the caller's own exit). */
  killAll(): void {
    this.closing = true;
    for (const w of this.workers.values()) {
      w.state = 'killed';
      w.child.kill('SIGCONT');
      w.child.kill('SIGKILL');
    }
  }

  /** Stops every worker (SIGTERM, in parallel); `kill` for an abort. */
  async close(kill = false): Promise<void> {
    this.closing = true;
    const all = [...this.workers.values()];
    if (kill) this.killAll();
    await Promise.all(all.map((w) => (kill ? w.exited : this.stop(w))));
  }
}
