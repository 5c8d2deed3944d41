/**
 * Helpers of the pipeline tests: worker processes, draining, and the exactly-once check of docs/design.md
 * §4 invariants 1 and 2 (every offset of the log is in `events`, fields equal, or in `quarantine`
 * with the codec's reason, exactly once; nothing else is stored; every checkpoint is at the log end).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { TestContext } from 'node:test';
import { DEFAULT_ALERT_RULE } from '../src/jobs/events/alert-rule.js';
import { Auditor } from '../src/verify/auditor.js';
import type { Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { connectionArgs } from '../src/harness/cli-process.js';
import { CheckpointWatch, waitDrained as pollDrained } from '../src/harness/drain.js';
import { sleep } from '../src/harness/sleep.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { killServer, stackCommitlogPeriodMs, stackCommitlogSync, startServer, type StackOptions } from '../src/stack/index.js';
import { freePort } from '../src/stack/process.js';
import { localStack, runCli, startCli, waitFor } from './helpers.js';

/** freePort(): a free port the OS picks on 127.0.0.1 (for a worker's --metrics-port). */
export { connectionArgs, freePort, sleep };

/** Starts a worker process (`exactlyonce run`) with a short session timeout, so tests rebalance fast. */
export function startWorker(t: TestContext, config: ConnectionConfig, extra: string[] = []) {
  return startCli(t, ['run', ...connectionArgs(config), '--session-timeout-ms', '6000', '--max-batch', '500', ...extra]);
}

export type Worker = ReturnType<typeof startWorker>;

/**
 * A shorter group session timeout than startWorker's, for the tests that SIGKILL workers: a killed
 * worker's partitions move after 3 s instead of 6 (the local broker allows down to 1 s).
 */
export const FAST_FAILOVER = ['--session-timeout-ms', '3000'];

/** Starts a worker that also serves /metrics, /healthz and /readyz (`--metrics-port`) on a free port. */
export async function startServedWorker(t: TestContext, config: ConnectionConfig, extra: string[] = []): Promise<Worker & { port: number }> {
  const port = await freePort();
  return Object.assign(startWorker(t, config, [...extra, '--metrics-port', String(port)]), { port });
}

/** A served worker's /readyz: 200 with 'ready: owns partitions 0,1', 503 with e.g. 'not ready: Cassandra not answering'. */
export async function readyz(worker: { port: number }): Promise<{ status: number; detail: string } | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${worker.port}/readyz`, { signal: AbortSignal.timeout(5000) });
    return { status: res.status, detail: (await res.text()).trim() };
  } catch {
    return undefined; // not listening yet
  }
}

/** Waits until a served worker's /readyz answers as `accept` wants; returns that answer. */
export async function waitReadyz(
  worker: Worker & { port: number },
  accept: (r: { status: number; detail: string }) => boolean,
  message: string,
  timeoutMs = 120_000,
): Promise<{ status: number; detail: string }> {
  let last: { status: number; detail: string } | undefined;
  return waitFor(
    async () => {
      last = await readyz(worker);
      return last !== undefined && accept(last) && last;
    },
    { timeoutMs, message: `worker ${worker.pid} /readyz: ${message} (last answer: ${last ? `${last.status} ${last.detail}` : 'none'})` },
  );
}

/** Where the worker resumed a partition it owns (null: from the log start; 'stopped': never read), and where in its output it said so. */
export interface Owned {
  start: bigint | null | 'stopped';
  at: number;
}

/**
 * The partitions a worker owns according to its log (src/engine/runner.ts): each "assigned partitions"
 * line adds partitions with the offsets they resume from, each "revoked partitions" or "lost
 * partitions" line removes some (the cooperative assignor moves only the partitions that must move).
 */
export function ownedPartitions(worker: Worker): Map<number, Owned> {
  const owned = new Map<number, Owned>();
  const output = worker.output();
  let at = 0;
  for (const line of output.split('\n')) {
    const lineAt = at;
    at += line.length + 1;
    if (!/"msg":"(assigned|revoked|lost) partitions/.test(line)) continue;
    let entry: { assigned?: Record<string, string>; revoked?: number[] };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue; // still being written
    }
    for (const [p, start] of Object.entries(entry.assigned ?? {})) {
      owned.set(Number(p), { start: start === 'beginning' ? null : start === 'stopped' ? 'stopped' : BigInt(start), at: lineAt });
    }
    for (const p of entry.revoked ?? []) owned.delete(p);
  }
  return owned;
}

/** Waits until a worker's log says it owns at least one partition; returns what it owns. */
export async function waitOwns(worker: Worker, timeoutMs = 120_000): Promise<Map<number, Owned>> {
  return waitFor(
    () => {
      const owned = ownedPartitions(worker);
      return owned.size > 0 && owned;
    },
    { timeoutMs, message: `worker ${worker.pid} is assigned partitions` },
  );
}

/** Checkpoints and log ends read once, shared by the progress checks of several workers. */
function progressReader(session: Client, config: ConnectionConfig, admin: KafkaAdmin) {
  let cps: Promise<Map<number, bigint>> | undefined;
  let ends: Promise<Map<number, { low: bigint; stable: bigint }>> | undefined;
  return {
    checkpoints: () => (cps ??= checkpoints(session, config)),
    ends: () => (ends ??= admin.watermarks(config.topic).then((ws) => new Map(ws.map((w) => [w.partition, w])))),
  };
}

/**
 * Whether a worker is at work: it owns partitions (its log says so) and has moved the checkpoint of
 * one of them past `since` (default: the offset it resumed it from), or every one of them is at its
 * log end (there was nothing left to do).
 */
async function atWork(worker: Worker, read: ReturnType<typeof progressReader>, since?: ReadonlyMap<number, bigint>): Promise<Map<number, Owned> | false> {
  const owned = ownedPartitions(worker);
  if (owned.size === 0) return false;
  const cps = await read.checkpoints();
  const moved = [...owned].some(([p, o]) => {
    const cp = cps.get(p);
    const from = since?.get(p) ?? (typeof o.start === 'bigint' ? o.start : -1n);
    return cp !== undefined && cp > from;
  });
  if (moved) return owned;
  const ends = await read.ends();
  return [...owned.keys()].every((p) => {
    const w = ends.get(p);
    return w !== undefined && (w.stable === w.low || cps.get(p) === w.stable);
  }) && owned;
}

/**
 * Waits until a worker has made progress: it owns partitions and has moved a checkpoint of one of them
 * past `since` (default: where it resumed them), or all of them are at their log end. Returns what it owns.
 */
export async function waitProgress(
  worker: Worker,
  session: Client,
  config: ConnectionConfig,
  admin: KafkaAdmin,
  options: { since?: ReadonlyMap<number, bigint>; timeoutMs?: number } = {},
): Promise<Map<number, Owned>> {
  return waitFor(() => atWork(worker, progressReader(session, config, admin), options.since), {
    timeoutMs: options.timeoutMs ?? 120_000,
    message: `worker ${worker.pid} owns partitions and moves a checkpoint`,
  });
}

/**
 * Waits until at least one of `workers` is at work (as waitProgress: owns partitions and has moved a
 * checkpoint past where it resumed them, or caught up); returns the indexes of all that are.
 */
export async function waitWorking(workers: readonly Worker[], session: Client, config: ConnectionConfig, admin: KafkaAdmin, timeoutMs = 120_000): Promise<number[]> {
  return waitFor(
    async () => {
      const read = progressReader(session, config, admin);
      const busy: number[] = [];
      for (const [i, w] of workers.entries()) if (w.exitCode === null && w.signalCode === null && (await atWork(w, read))) busy.push(i);
      return busy.length > 0 && busy;
    },
    { timeoutMs, message: `one of the workers ${workers.map((w) => w.pid).join(',')} owns partitions and moves a checkpoint` },
  );
}

/** Waits until a worker has joined and logged "worker started" (its signal handlers are in place). */
export async function waitStarted(worker: Worker, timeoutMs = 120_000): Promise<void> {
  await waitFor(() => worker.output().includes('"msg":"worker started"'), { timeoutMs, message: `worker ${worker.pid} starts` });
}

export async function generate(config: ConnectionConfig, args: string[]): Promise<string> {
  const r = await runCli(['generate', '--brokers', config.brokers.join(','), '--topic', config.topic, ...args]);
  assert.equal(r.code, 0, `generate failed: ${r.stderr}`);
  return r.stdout;
}

export async function checkpoints(session: Client, config: ConnectionConfig): Promise<Map<number, bigint>> {
  const r = await session.execute(`SELECT partition, next_offset FROM ${config.keyspace}.checkpoints WHERE topic = ?`, [config.topic]);
  return new Map(r.rows.map((row) => [row['partition'] as number, BigInt(row['next_offset'].toString())]));
}

/**
 * Waits until every partition's checkpoint is at the end of what can be read as of the call (the
 * log ends are read once, then the checkpoints polled every 500 ms through src/harness/drain.ts's
 * waitDrained); returns those ends. Throws at the deadline, with the checkpoints then.
 */
export async function waitDrained(session: Client, config: ConnectionConfig, timeoutMs = 300_000): Promise<Map<number, bigint>> {
  const admin = new KafkaAdmin(config);
  try {
    const marks = await admin.watermarks(config.topic);
    let last: unknown;
    const read = () =>
      checkpoints(session, config).catch((e: unknown) => {
        last = e;
        throw e;
      });
    if ((await pollDrained(async () => marks, read, { timeoutMs, intervalMs: 500 })) === undefined) {
      const cps = await checkpoints(session, config).catch(() => new Map());
      const message = `checkpoints reach the log ends ${marks.map((w) => `${w.partition}:${w.stable}`).join(' ')}`;
      throw new Error(`timed out after ${timeoutMs} ms: ${message}${last ? ` (last error: ${String(last)})` : ''}; checkpoints now ${[...cps].map(([p, o]) => `${p}:${o}`).join(' ')}`);
    }
    return new Map(marks.map((w) => [w.partition, w.stable]));
  } finally {
    await admin.close();
  }
}

export interface Ledger {
  records: number;
  stored: number;
  quarantined: number;
  reasons: Record<string, number>;
}

/**
 * Runs the auditor (src/verify, what `exactlyonce verify` runs) over the whole topic and fails the
 * test with the exact partitions/offsets that are missing, duplicated, extra or different. As strict as
 * a full read-back: every checkpoint must be at the log end (nothing left unjudged), no row may lie
 * below the log start or beyond the checkpoint. Alerts are left to test/alerts-check.ts.
 */
export async function assertExactlyOnce(session: Client, config: ConnectionConfig): Promise<Ledger> {
  const report = await new Auditor(config, session, { rule: DEFAULT_ALERT_RULE, checkAlerts: false }).run();
  assert.deepEqual(report.violations.slice(0, 50).map((v) => v.message), [], `${report.violationTotal} violations`);
  assert.equal(report.violationTotal, 0);
  assert.deepEqual(
    report.partitions.filter((p) => p.lag !== '0' || p.belowLogStart > 0 || p.aheadOfCheckpoint > 0).map((p) => `partition ${p.partition}: lag ${p.lag}, below log start ${p.belowLogStart}, ahead ${p.aheadOfCheckpoint}`),
    [],
    'every offset of the log was judged',
  );
  const reasons: Record<string, number> = {};
  for (const p of report.partitions) for (const [r, n] of Object.entries(p.reasons)) reasons[r] = (reasons[r] ?? 0) + n;
  return { records: report.totals.records, stored: report.totals.stored, quarantined: report.totals.quarantined, reasons };
}

/** Polls the checkpoints until stopped (at the latest when the test ends) and records any move backwards. */
export function watchCheckpoints(t: TestContext, session: Client, config: ConnectionConfig) {
  const watch = new CheckpointWatch(() => checkpoints(session, config), 100);
  const stop = async () => {
    await watch.stop();
    return { regressions: watch.regressions, polls: watch.polls, highest: watch.highest };
  };
  t.after(stop);
  return { stop };
}

/** Marks the moments of a test's phases, for its diagnostic line ("SIGSTOP at 8.2 s, …"). */
export function timeline() {
  const t0 = Date.now();
  const marks: string[] = [];
  return {
    mark: (what: string) => void marks.push(`${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s`),
    toString: () => marks.join(', '),
  };
}

export function randomBetween(min: number, max: number): number {
  return min + Math.random() * (max - min);
}

/**
 * SIGKILLs one of `workers` at a random moment of its work (drawn among those that own partitions and
 * have moved a checkpoint past where they resumed them, or caught up; killed within the next second)
 * and puts `start()`'s new worker in its place.
 */
export async function killOneAtWork(workers: Worker[], session: Client, config: ConnectionConfig, admin: KafkaAdmin, start: () => Worker): Promise<void> {
  const busy = await waitWorking(workers, session, config, admin);
  const i = busy[Math.floor(Math.random() * busy.length)]!;
  await sleep(randomBetween(0, 1000));
  workers[i]!.kill('SIGKILL');
  await once(workers[i]!, 'exit');
  workers[i] = start();
}

/** The end of a run under faults: the producer finishes, every checkpoint reaches its log end, the workers stop cleanly. */
export async function finishRun(
  producing: Promise<unknown>,
  workers: readonly Worker[],
  session: Client,
  config: ConnectionConfig,
  phases: ReturnType<typeof timeline>,
): Promise<void> {
  await producing;
  phases.mark('produced');
  await waitDrained(session, config);
  phases.mark('drained');
  await stopWorkers(workers);
  phases.mark('stopped');
}

/** One worker until the topic is drained (with what `produce` sends), then stopped: SIGTERM once it has started, exit code 0. */
export async function drainWith(t: TestContext, config: ConnectionConfig, session: Client, produce: () => Promise<unknown>): Promise<void> {
  const worker = startWorker(t, config);
  await produce();
  await waitStarted(worker);
  await waitDrained(session, config);
  worker.kill('SIGTERM');
  const [code] = await once(worker, 'exit');
  assert.equal(code, 0, worker.output());
}

/** Stops workers cleanly (SIGTERM once each has started) and asserts each exits with code 0. */
export async function stopWorkers(workers: ReadonlyArray<ReturnType<typeof startWorker>>): Promise<void> {
  for (const w of workers) await waitStarted(w);
  const exits = workers.map((w) => (w.exitCode === null && w.signalCode === null ? once(w, 'exit') : Promise.resolve([w.exitCode, w.signalCode])));
  for (const w of workers) w.kill('SIGTERM');
  for (const [i, exit] of exits.entries()) {
    const [code] = await exit;
    assert.equal(code, 0, workers[i]!.output());
  }
}

/** Starts the stack's SIGKILLed Cassandra again once its ports are free (the killed JVM takes a moment to go). */
export async function restartCassandra(stack: StackOptions): Promise<void> {
  await waitFor(
    () =>
      startServer(stack, 'cassandra').then(
        () => true,
        (e: { code?: string }) => {
          if (e.code === 'EO_PORT_IN_USE') return false;
          throw e;
        },
      ),
    { timeoutMs: 60_000, message: 'the ports of the SIGKILLed Cassandra are free again' },
  );
}

/**
 * The commit log's sync period the loss tests run Cassandra with: every acknowledged write of the last
 * minute is gone when it is SIGKILLed, so the loss window covers a whole step of a test (on Cassandra's
 * 10 s a step can fall between two syncs and lose nothing: the test would prove nothing).
 */
export const WIDE_SYNC_MS = 60_000;

/**
 * The stack's single Cassandra on the periodic commit log synced every `periodMs` (WIDE_SYNC_MS unless
 * told), restarted on it unless it runs so, or always with `fresh`. A fresh start puts the first sync a
 * whole period after `restartedAt` (taken before the SIGKILL): a test whose fault must fall before any
 * sync (not by the luck of the sync's phase) kills Cassandra before `restartedAt + periodMs`.
 */
export async function wideLossWindow(phases?: ReturnType<typeof timeline>, opts: { periodMs?: number; fresh?: boolean } = {}): Promise<StackOptions & { restartedAt?: number }> {
  const periodMs = opts.periodMs ?? WIDE_SYNC_MS;
  const stack = { ...(await localStack()), commitlogSync: 'periodic' as const, commitlogSyncPeriodMs: periodMs };
  if (opts.fresh === true || stackCommitlogSync(stack, 'cassandra') !== 'periodic' || stackCommitlogPeriodMs(stack, 'cassandra') !== periodMs) {
    const restartedAt = Date.now();
    await killServer(stack, 'cassandra');
    await restartCassandra(stack);
    phases?.mark(`Cassandra restarted on the periodic commit log synced every ${periodMs / 1000} s`);
    return { ...stack, restartedAt };
  }
  return stack;
}
