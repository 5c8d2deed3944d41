/**
 * Helpers of the pipeline tests: worker processes, draining, and the exactly-once check of DESIGN.md
 * §4 invariants 1 and 2 (every offset of the log is in `events`, fields equal, or in `quarantine`
 * with the codec's reason, exactly once; nothing else is stored; every checkpoint is at the log end).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { TestContext } from 'node:test';
import { DEFAULT_ALERT_RULE } from '../src/app/alert-rule.js';
import { Auditor } from '../src/app/audit/auditor.js';
import type { Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { runCli, startCli, waitFor } from './helpers.js';

export function connectionArgs(config: ConnectionConfig): string[] {
  return ['--brokers', config.brokers.join(','), '--cassandra', config.cassandra.join(','), '--keyspace', config.keyspace, '--topic', config.topic, '--alerts-topic', config.alertsTopic, '--group', config.group];
}

/** Starts a worker process (`exactlyonce run`) with a short session timeout, so tests rebalance fast. */
export function startWorker(t: TestContext, config: ConnectionConfig, extra: string[] = []) {
  return startCli(t, ['run', ...connectionArgs(config), '--session-timeout-ms', '6000', '--max-batch', '500', ...extra]);
}

/** Waits until a worker has joined and logged "worker started" (its signal handlers are in place). */
export async function waitStarted(worker: ReturnType<typeof startWorker>, timeoutMs = 120_000): Promise<void> {
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

/** Waits until every partition's checkpoint equals its log end. */
export async function waitDrained(session: Client, config: ConnectionConfig, timeoutMs = 300_000): Promise<Map<number, bigint>> {
  const admin = new KafkaAdmin(config);
  try {
    const marks = await admin.watermarks(config.topic);
    await waitFor(
      async () => {
        const cps = await checkpoints(session, config);
        return marks.every((w) => w.high === w.low || cps.get(w.partition) === w.high);
      },
      { timeoutMs, intervalMs: 500, message: `checkpoints reach the log ends ${marks.map((w) => `${w.partition}:${w.high}`).join(' ')}` },
    ).catch(async (e: Error) => {
      const cps = await checkpoints(session, config).catch(() => new Map());
      throw new Error(`${e.message}; checkpoints now ${[...cps].map(([p, o]) => `${p}:${o}`).join(' ')}`);
    });
    return new Map(marks.map((w) => [w.partition, w.high]));
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
 * Runs the auditor (src/app/audit, what `exactlyonce verify` runs) over the whole topic and fails the
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
  const highest = new Map<number, bigint>();
  const regressions: string[] = [];
  let polls = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        for (const [p, o] of await checkpoints(session, config)) {
          const prev = highest.get(p);
          if (prev !== undefined && o < prev) regressions.push(`partition ${p}: ${prev} -> ${o}`);
          if (prev === undefined || o > prev) highest.set(p, o);
        }
        polls++;
      } catch {
        // Cassandra may be restarting in some tests.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const stop = async () => {
    running = false;
    await loop;
    return { regressions, polls, highest };
  };
  t.after(stop);
  return { stop };
}

export function randomBetween(min: number, max: number): number {
  return min + Math.random() * (max - min);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
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
