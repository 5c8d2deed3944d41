/**
 * Worker discovery through Cassandra: a worker serving metrics upserts a row of `<keyspace>.workers`
 * every few seconds with a TTL, and the dashboard reads the live rows. A worker killed without a
 * goodbye expires after WORKER_TTL_S. Discovery only: a missing table or a failed heartbeat is logged
 * once and never affects the worker's processing.
 */
import { hostname } from 'node:os';
import { connect, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { metricsBindHost } from '../engine/metrics-server.js';
import type { Logger } from '../log.js';

/** Heartbeat period, in ms. */
export const HEARTBEAT_MS = 5_000;
/** A row lives this long after its last heartbeat, in seconds (the table's default TTL too). */
export const WORKER_TTL_S = 30;

export interface RegisteredWorker {
  workerId: string;
  host: string;
  metricsPort: number;
  topic: string | null;
  group: string | null;
  pid: number | null;
  startedAt: Date | null;
  heartbeat: Date | null;
}

/**
 * The host other machines reach this worker's metrics at: EXACTLYONCE_METRICS_ADVERTISE, else the
 * bind address, else (bound to every interface) the host name.
 */
export function advertisedHost(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env['EXACTLYONCE_METRICS_ADVERTISE'];
  if (explicit) return explicit;
  const bind = metricsBindHost(env);
  return bind === '0.0.0.0' || bind === '::' ? hostname() : bind;
}

export interface Announcement {
  /** Stops the heartbeat and removes the row. Idempotent. */
  stop(): Promise<void>;
}

/** Starts announcing this worker; returns at once (the first heartbeat is sent in the background). */
export function announceWorker(
  config: ConnectionConfig,
  o: { workerId: string; port: number; log: Logger; host?: string; heartbeatMs?: number; job?: string },
): Announcement {
  const ks = config.keyspace;
  const host = o.host ?? advertisedHost();
  const startedAt = new Date();
  let session: Client | undefined;
  let warned = false;
  let stopped: Promise<void> | undefined;
  let beating: Promise<void> = Promise.resolve();

  const beat = async () => {
    try {
      session ??= await connect(config, { keyspace: ks, connectTimeoutMs: 5_000 });
      // An upsert of this worker's own row: repeating it only moves the heartbeat and renews the TTL.
      await session.execute(
        `INSERT INTO ${ks}.workers (worker_id, host, metrics_port, topic, group_id, pid, started_at, heartbeat) VALUES (?, ?, ?, ?, ?, ?, ?, ?) USING TTL ${WORKER_TTL_S}`,
        [o.workerId, host, o.port, config.topic, config.group, process.pid, startedAt, new Date()],
        { prepare: true },
      );
      // The job's name, in its own statement (same TTL): a keyspace whose schema predates migration 010
      // still registers its workers; only the name is missing then.
      if (o.job !== undefined) {
        await session
          .execute(`UPDATE ${ks}.workers USING TTL ${WORKER_TTL_S} SET job = ? WHERE worker_id = ?`, [o.job, o.workerId], { prepare: true })
          .catch(() => undefined);
      }
      if (warned) o.log.info({ table: `${ks}.workers` }, 'worker registered for the dashboard');
      warned = false;
    } catch (e) {
      if (!warned) {
        const msg = e instanceof Error ? e.message.split('\n')[0] : String(e);
        const hint = /unconfigured table|does not exist/i.test(msg ?? '') ? ' (run `exactlyonce schema apply`)' : '';
        o.log.warn(
          { table: `${ks}.workers`, err: msg },
          `cannot register this worker for the dashboard${hint}; it is still found through \`dashboard --worker-metrics ${host}:${o.port}\``,
        );
      }
      warned = true;
    }
  };
  beating = beat();
  const timer = setInterval(() => {
    beating = beating.then(beat);
  }, o.heartbeatMs ?? HEARTBEAT_MS);
  timer.unref();

  return {
    stop() {
      stopped ??= (async () => {
        clearInterval(timer);
        await beating;
        if (session !== undefined) {
          await session.execute(`DELETE FROM ${ks}.workers WHERE worker_id = ?`, [o.workerId], { prepare: true }).catch(() => undefined);
          await session.shutdown().catch(() => undefined);
        }
      })();
      return stopped;
    },
  };
}

/** Live workers of the keyspace (heartbeat within the TTL), optionally only those of one topic. */
export async function listWorkers(session: Client, keyspace: string, topic?: string): Promise<RegisteredWorker[]> {
  const r = await session.execute(
    `SELECT worker_id, host, metrics_port, topic, group_id, pid, started_at, heartbeat FROM ${keyspace}.workers`,
    [],
    { prepare: true },
  );
  return r.rows
    .map((row) => ({
      workerId: row['worker_id'] as string,
      host: row['host'] as string,
      metricsPort: row['metrics_port'] as number,
      topic: (row['topic'] as string | null) ?? null,
      group: (row['group_id'] as string | null) ?? null,
      pid: (row['pid'] as number | null) ?? null,
      startedAt: (row['started_at'] as Date | null) ?? null,
      heartbeat: (row['heartbeat'] as Date | null) ?? null,
    }))
    .filter((w) => topic === undefined || w.topic === null || w.topic === topic)
    .sort((a, b) => a.workerId.localeCompare(b.workerId));
}
