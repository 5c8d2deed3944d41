/**
 * Helpers of the pipeline tests: worker processes, draining, and the exactly-once check of DESIGN.md
 * §4 invariants 1 and 2 (every offset of the log is in `events`, fields equal, or in `quarantine`
 * with the codec's reason, exactly once; nothing else is stored; every checkpoint is at the log end).
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { TestContext } from 'node:test';
import { decodeEvent } from '../src/app/event.js';
import type { Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { readTopic } from '../src/kafka/topic-reader.js';
import { runCli, startCli, waitFor } from './helpers.js';

export function connectionArgs(config: ConnectionConfig): string[] {
  return ['--brokers', config.brokers.join(','), '--cassandra', config.cassandra.join(','), '--keyspace', config.keyspace, '--topic', config.topic, '--group', config.group];
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

/** Every row of a query, paged (the driver's ResultStream is a Readable, typed as an EventEmitter). */
function rows(session: Client, query: string): AsyncIterable<unknown> {
  return session.stream(query, [], { prepare: true, fetchSize: 5000 }) as unknown as AsyncIterable<unknown>;
}

export interface Ledger {
  records: number;
  stored: number;
  quarantined: number;
  reasons: Record<string, number>;
}

/**
 * Reads the whole topic back and compares it row by row with `events` and `quarantine`. Fails the
 * test with the exact partitions/offsets that are missing, duplicated, extra or different.
 */
export async function assertExactlyOnce(session: Client, config: ConnectionConfig): Promise<Ledger> {
  const ks = config.keyspace;
  const events = new Map<string, Record<string, unknown>>();
  for await (const row of rows(session, `SELECT partition, offset, id, ts, source, client, health FROM ${ks}.events`)) {
    const r = row as Record<string, unknown>;
    events.set(`${r['partition']}/${r['offset']}`, { id: String(r['id']), ts: (r['ts'] as Date).getTime(), source: r['source'], client: r['client'], health: r['health'] });
  }
  const quarantine = new Map<string, string>();
  for await (const row of rows(session, `SELECT partition, offset, reason FROM ${ks}.quarantine`)) {
    const r = row as Record<string, unknown>;
    quarantine.set(`${r['partition']}/${r['offset']}`, r['reason'] as string);
  }
  const ledger: Ledger = { records: 0, stored: 0, quarantined: 0, reasons: {} };
  const problems: string[] = [];
  await readTopic(config, config.topic, (records) => {
    for (const rec of records) {
      ledger.records++;
      const key = `${rec.partition}/${rec.offset}`;
      const d = decodeEvent(rec.value);
      const row = events.get(key);
      const q = quarantine.get(key);
      events.delete(key);
      quarantine.delete(key);
      if (d.ok) {
        const want = { id: String(d.value.id), ts: d.value.ts, source: d.value.source, client: d.value.client, health: d.value.health };
        if (row === undefined) problems.push(`missing event ${key}`);
        else if (JSON.stringify(row) !== JSON.stringify(want)) problems.push(`event ${key} differs: ${JSON.stringify(row)} != ${JSON.stringify(want)}`);
        else ledger.stored++;
        if (q !== undefined) problems.push(`valid record ${key} also quarantined (${q})`);
      } else {
        if (q === undefined) problems.push(`malformed record ${key} (${d.reason}) not quarantined`);
        else if (q !== d.reason) problems.push(`record ${key} quarantined as ${q}, expected ${d.reason}`);
        else {
          ledger.quarantined++;
          ledger.reasons[q] = (ledger.reasons[q] ?? 0) + 1;
        }
        if (row !== undefined) problems.push(`malformed record ${key} stored as an event`);
      }
    }
  });
  for (const key of events.keys()) problems.push(`extra event row ${key}`);
  for (const key of quarantine.keys()) problems.push(`extra quarantine row ${key}`);
  assert.deepEqual(problems.slice(0, 50), [], `${problems.length} violations`);
  return ledger;
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
