/**
 * One demo run (`exactlyonce demo`): the whole pipeline on the local stack. Brings the stack up, applies
 * the schema, creates the topics, starts the workers (each serving /metrics) and the live dashboard,
 * runs the generator with the seed job's defaults while a status line shows events/s, lag and alerts,
 * waits until every partition's checkpoint reaches the log end, prints the events stored per partition
 * and the alerts raised, and runs `verify`. Ctrl-C stops everything it started. The stack stays up
 * unless `stopStack` is set.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { applySchema } from '../cassandra/migrate.js';
import { connect } from '../cassandra/session.js';
import { loadConnectionConfig } from '../config.js';
import { startDashboard, type Dashboard } from '../dashboard/dashboard.js';
import { statusLine } from '../dashboard/status-line.js';
import { ExactlyOnceError } from '../errors.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import { formatTable } from '../text-table.js';
import { connectionArgs, connectionEnv, startCli, terminate } from './cli-process.js';
import { waitDrained } from './drain.js';
import { sleep } from './sleep.js';
import { freePort, WorkerFleet } from './worker-fleet.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { stackDown, stackUp, type StackOptions } from '../stack/index.js';
import { cliCommand } from '../package-root.js';

class Interrupted extends Error {}

export interface DemoOptions {
  /** The local stack the demo brings up (and stops with `stopStack`). */
  stack: StackOptions;
  /** Worker processes. */
  workers: number;
  /** The generator's events per client. */
  eventsPerKey: number;
  /** Dashboard port (the next free one if taken). */
  dashboardPort: number;
  /** The first worker's metrics port; the others take the next free ones. */
  metricsPort: number;
  stopStack?: boolean;
  /** Keep the workers and the dashboard up after the run until Ctrl-C; undefined: on a terminal. */
  stay?: boolean;
}

/** Runs the demo, printing as it goes; resolves to the exit code (verify's, or 130 when interrupted). */
export async function runDemo(opts: DemoOptions): Promise<number> {
  const stack = opts.stack;
  const t0 = Date.now();
  const secs = () => `${((Date.now() - t0) / 1000).toFixed(1)}s`;
  const tty = process.stderr.isTTY === true;
  const out = (s: string) => {
    if (tty) process.stderr.write('\r\x1b[K');
    process.stdout.write(s + '\n');
  };
  const stay = opts.stay ?? (process.stdin.isTTY === true && process.stdout.isTTY === true);

  // Ctrl-C: the first one stops what the demo started, cleanly; a second one kills it at once.
  let fleet: WorkerFleet | undefined;
  /** The generator and verify. */
  const children: ChildProcess[] = [];
  let stopping = false;
  const interrupt = new AbortController();
  const interrupted = new Promise<never>((_, reject) => interrupt.signal.addEventListener('abort', () => reject(new Interrupted())));
  interrupted.catch(() => undefined);
  // Last resort if the demo itself dies: the children run in their own process groups.
  const killAll = () => {
    fleet?.killAll();
    children.forEach((c) => c.exitCode === null && c.signalCode === null && c.kill('SIGKILL'));
  };
  const onSigint = () => {
    if (stopping) {
      killAll();
      process.exit(130);
    }
    stopping = true;
    out('\nstopping the generator, the workers and the dashboard…');
    interrupt.abort();
  };
  process.on('SIGINT', onSigint);
  process.on('SIGTERM', onSigint);
  process.on('exit', killAll);
  const race = <T>(p: Promise<T>): Promise<T> => Promise.race([p, interrupted]);

  const up = await race(stackUp(stack));
  out(`stack: Kafka 127.0.0.1:${stack.kafkaPort}, Cassandra 127.0.0.1:${stack.cassandraPort} (${up.started.length ? `started in ${(up.elapsedMs / 1000).toFixed(1)}s` : 'already up'})`);
  const config = loadConnectionConfig({ brokers: `127.0.0.1:${stack.kafkaPort}`, cassandra: `127.0.0.1:${stack.cassandraPort}` }, {});
  const session = await connect(config);
  const admin = new KafkaAdmin(config);
  let dashboard: Dashboard | undefined;
  let status: NodeJS.Timeout | undefined;
  let exitCode = 0;
  let staying = false;
  try {
    // The demo's keyspace starts empty each time (`schema apply --reset`, like the seed job's
    // set-up): the workers then read the whole topic again, so the closing verify checks one
    // complete run.
    await race(applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 }, { reset: true }));
    const topic = await race(admin.ensureTopic({ topic: config.topic, partitions: 3, replicationFactor: 1 }));
    await race(admin.ensureTopic({ topic: config.alertsTopic, partitions: 3, replicationFactor: 1, configs: { 'cleanup.policy': 'compact' } }));
    out(`schema ${config.keyspace} applied and its tables emptied; topics ${config.topic} (${topic.partitions} partitions) and ${config.alertsTopic} (compacted)`);

    const args = connectionArgs(config);
    const logDir = join(stack.dir, 'logs');
    mkdirSync(logDir, { recursive: true });
    const env = connectionEnv(config);
    const workers: WorkerFleet = (fleet = new WorkerFleet({
      args,
      env,
      logFile: (id) => join(logDir, `demo-worker-${id}.log`),
      detached: true,
      onUnexpectedExit: (w, how) => {
        if (!stopping) out(`worker ${w.id} exited unexpectedly (${how}); the end of ${w.logFile}:\n${workers.tail(w, 5)}`);
      },
    }));
    const ports: number[] = [];
    for (let i = 0; i < opts.workers; i++) {
      const port = await freePort(ports.length === 0 ? opts.metricsPort : ports.at(-1)! + 1, new Set(ports));
      workers.start(port);
      ports.push(port);
    }
    const dashboardPort = await freePort(opts.dashboardPort, new Set(ports));
    dashboard = await startDashboard(config, { port: dashboardPort, host: '127.0.0.1', workerMetrics: ports.map((p) => `127.0.0.1:${p}`), intervalMs: 1000 });
    const collector = dashboard.collector;
    out(`started ${ports.length} workers (metrics on ${ports.map((p) => `127.0.0.1:${p}`).join(', ')}; logs in ${logDir}/demo-worker-N.log)`);
    out(`\n  dashboard: ${dashboard.url}\n`);

    // One status line, rewritten every second on a terminal (every 5 s otherwise).
    let firstStored: string | undefined;
    let firstAlert: string | undefined;
    let alertsBefore: number | undefined;
    let ticks = 0;
    status = setInterval(() => {
      const s = collector.snapshot();
      if (s !== undefined && s.alerts !== null) {
        // Rows already there from an earlier demo do not count as this run's first.
        alertsBefore ??= s.alerts.rows;
        if (firstStored === undefined && s.totals.stored > 0) out(`first events stored ${(firstStored = secs())} after the start`);
        if (firstAlert === undefined && s.alerts.rows > alertsBefore) out(`first alert on the dashboard ${(firstAlert = secs())} after the start`);
      }
      if (tty) process.stderr.write(`\r\x1b[K${statusLine(s)}`);
      else if (ticks++ % 5 === 0) process.stdout.write(`${statusLine(s)}\n`);
    }, 1000);

    await race(Promise.all(workers.running().map((w) => workers.waitReady(w, interrupt.signal))));
    out(`workers ready after ${secs()}; running the generator (3 clients × ${opts.eventsPerKey} events, a 500 ms pause every 10 rounds)…`);
    const gen = startCli(['generate', '--brokers', config.brokers.join(','), '--topic', config.topic, '--events-per-key', String(opts.eventsPerKey)], { inheritStderr: true, env });
    children.push(gen.child);
    const generated = await race(gen.result);
    if (generated.code !== 0) throw new ExactlyOnceError('EO_PRODUCE_FAILED', `the generator exited with ${generated.code}`);
    out(generated.output.trim());

    const checkpoints = new CheckpointStore(session, config.keyspace, config.topic);
    const marks = await race(waitDrained(() => admin.watermarks(config.topic), () => checkpoints.readAll(), { intervalMs: 250, signal: interrupt.signal }));
    if (marks === undefined) throw new Interrupted();
    out(`all partitions checkpointed at the end of what can be read after ${secs()}`);
    await race(sleep(2500)); // the alerts poll (2 s) catches up
    clearInterval(status);
    status = undefined;
    if (tty) process.stderr.write('\r\x1b[K');
    out(statusLine(collector.snapshot()));

    const rows: unknown[][] = [];
    for (const w of marks) {
      const r = await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.events WHERE partition = ?`, [w.partition], { prepare: true });
      const q = await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.quarantine WHERE partition = ?`, [w.partition], { prepare: true });
      rows.push([w.partition, String(r.first()['n']), String(q.first()['n']), String(w.high)]);
    }
    out('\n' + formatTable(['partition', 'events stored', 'quarantined', 'log end offset'], rows));
    const alerts = collector.snapshot()?.alerts;
    if (alerts !== null && alerts !== undefined) {
      out(`\nalerts: ${alerts.rows} row(s) in ${config.keyspace}.alerts (${alerts.sources} source(s)); the latest:`);
      out(formatTable(['window end', 'source', 'critical events'], alerts.latest.map((a) => [new Date(a.ts).toISOString(), a.source, a.eventCount])));
    }
    if (firstStored !== undefined || firstAlert !== undefined) {
      out(`\ntime from the start: first events stored ${firstStored ?? '–'}, first alert on the dashboard ${firstAlert ?? '–'}`);
    }

    out('\nverify:');
    const verify = startCli(['verify', ...args], { env });
    children.push(verify.child);
    const verified = await race(verify.result);
    out(verified.output.trim());
    if (verified.code !== 0) exitCode = verified.code ?? 1;

    out(`\nexplore: ${cliCommand} cql "SELECT * FROM events LIMIT 10"`);
    if (stay) {
      out(`the workers and the dashboard (${dashboard.url}) stay up; Ctrl-C stops them`);
      staying = true; // Ctrl-C is then the normal end: the exit code stays verify's
      await race(new Promise(() => undefined));
    }
  } catch (e) {
    if (!(e instanceof Interrupted)) throw e;
    if (!staying) exitCode = 130;
  } finally {
    stopping = true;
    clearInterval(status);
    await Promise.all([fleet?.close(), ...children.map((c) => terminate(c))]);
    await dashboard?.close();
    await admin.close();
    await session.shutdown();
    process.off('exit', killAll);
    process.off('SIGINT', onSigint);
    process.off('SIGTERM', onSigint);
  }
  if (opts.stopStack === true) {
    const down = await stackDown(stack);
    out(down.stopped.length ? `stopped ${down.stopped.join(' and ')}` : 'the stack was not running');
  } else {
    out(`the stack stays up: stop it with \`${cliCommand} stack down\``);
  }
  return exitCode;
}
