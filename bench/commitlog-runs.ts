/**
 * One `exactlyonce bench` invocation: one run (bench/run.ts) per commit log mode of the local
 * single-node Cassandra, restarting the node with each mode and leaving it as it was found. Prints one
 * table per run on stdout and the goals after the last, progress on stderr; writes each run's results
 * as JSON and SVG. Ctrl-C stops what it started and removes what it made; a second one kills at once.
 */
import type { ConnectionConfig } from '../src/config.js';
import { ExactlyOnceError } from '../src/errors.js';
import { isCluster } from '../src/stack/cluster.js';
import { isSecure, stackCommitlogSync, stackStatus, startServer, stopServer, type CommitlogSync, type StackOptions } from '../src/stack/index.js';
import { BenchAborted } from './context.js';
import { isLocalCassandra } from './machine.js';
import { CASE_GROUPS, type BenchOptions } from './options.js';
import { formatGoals, formatResults, writeResults } from './report.js';
import type { BenchResults } from './results.js';
import { runBench } from './run.js';

export interface CommitlogRuns {
  /** The modes to measure, in order; `as-is` measures the servers as they run, once. */
  commitlog: Array<CommitlogSync | 'as-is'>;
  /** Whether `--commitlog` was given (a default falls back to as-is on servers the bench cannot restart). */
  commitlogGiven: boolean;
  /** The local stack the connection may point at (read only when a mode is to be set). */
  stack: () => StackOptions;
  /** The command line, recorded in the results. */
  command: string;
}

/**
 * The local single-node stack whose Cassandra the connection points at (not secured: restarting it
 * here would not know its secrets), with its commit log mode; null when the run uses other servers.
 */
async function localCassandra(config: ConnectionConfig, stack: () => StackOptions, onProgress: (line: string) => void): Promise<{ o: StackOptions; mode: CommitlogSync } | null> {
  const o = { ...stack(), onProgress };
  if (isCluster(o) || isSecure(o)) return null;
  const node = (await stackStatus(o)).find((s) => s.id === 'cassandra' && s.running);
  return node === undefined || !config.cassandra.some((c) => isLocalCassandra(c, node.port)) ? null : { o, mode: stackCommitlogSync(o, 'cassandra') ?? 'periodic' };
}

/** Restarts the local Cassandra with `mode` unless it runs with it already. */
async function switchCommitlog(local: { o: StackOptions; mode: CommitlogSync }, mode: CommitlogSync): Promise<void> {
  if ((stackCommitlogSync(local.o, 'cassandra') ?? 'periodic') === mode) return;
  process.stderr.write(`restarting the local Cassandra with commitlog_sync: ${mode}…\n`);
  await stopServer(local.o, 'cassandra');
  await startServer({ ...local.o, commitlogSync: mode }, 'cassandra');
}

/** Resolves to the exit code: 0, or 130 when interrupted. */
export async function runCommitlogModes(config: ConnectionConfig, options: BenchOptions, r: CommitlogRuns): Promise<number> {
  // A closed pipe (`bench | head`) must not kill the run before it has cleaned up.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);
  const abort = new AbortController();
  let kill: () => void = () => undefined;
  let interrupts = 0;
  const onSignal = () => {
    if (++interrupts === 1) {
      process.stderr.write('\ninterrupted: stopping the bench processes and removing its topics and keyspaces (Ctrl-C again to kill at once)…\n');
      abort.abort();
    } else {
      kill();
      process.exit(130);
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  const local = r.commitlog.includes('as-is') ? null : await localCassandra(config, r.stack, (line) => process.stderr.write(`  ${line}\n`));
  if (local === null && !r.commitlog.includes('as-is') && r.commitlogGiven) {
    throw new ExactlyOnceError('EO_USAGE', "--commitlog: the bench switches the commit log of the local single-node stack's Cassandra only (not a cluster, a secured stack or other servers); use --commitlog as-is");
  }
  const modes = local === null ? [undefined] : (r.commitlog as CommitlogSync[]);
  if (local === null) process.stderr.write('(not the local single-node stack: measured on the servers as they run, commit log unknown)\n');
  const all: BenchResults[] = [];
  try {
    for (const mode of modes) {
      if (mode !== undefined) await switchCommitlog(local!, mode);
      if (abort.signal.aborted) throw new BenchAborted();
      if (modes.length > 1) process.stderr.write(`=== Cassandra's commit log: ${mode} ===\n`);
      const results = await runBench(config, options, {
        signal: abort.signal,
        onKill: (k) => (kill = k),
        command: r.command,
        ...(mode === undefined ? {} : { commitlog: mode }),
      });
      const everyCase = CASE_GROUPS.every((g) => options.cases.has(g));
      const files = writeResults(results, options.outDir, everyCase);
      process.stdout.write(`${mode === undefined ? '' : `Cassandra commit log: ${mode}\n`}${formatResults(results)}\n\n`);
      process.stderr.write(`results: ${files.json}\nchart:   ${files.svg}\n`);
      if (!everyCase) process.stderr.write('(not every case ran: the latest results are left as they were)\n');
      all.push(results);
    }
    process.stdout.write(`${formatGoals(all)}\n`);
    return 0;
  } catch (e) {
    if (e instanceof BenchAborted || abort.signal.aborted) {
      process.stderr.write('bench interrupted; everything it started is stopped and removed\n');
      return 130;
    }
    throw e;
  } finally {
    // The node as it was found (a failed restart is reported, not hidden behind the bench's own error).
    if (local !== null) await switchCommitlog(local, local.mode).catch((e: unknown) => process.stderr.write(`could not restart the local Cassandra with its commit log ${local.mode}: ${String(e)}\n`));
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
