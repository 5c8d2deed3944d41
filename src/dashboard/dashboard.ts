/**
 * Starts the dashboard: a Cassandra session and a Kafka admin client for the keyspace and topic, the
 * collector, and the HTTP server. Used by `exactlyonce dashboard` and by `exactlyonce demo`.
 */
import { connect } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Collector } from './collector.js';
import type { HttpAccess } from '../engine/http-access.js';
import { dashboardAccess, serveDashboard } from './server.js';
import { DashboardStore } from './store.js';

export interface DashboardOptions {
  /** 0: any free port. */
  port: number;
  host: string;
  /** Workers' metrics addresses, `host:port` (--worker-metrics), besides those registered in `<keyspace>.workers`. */
  workerMetrics: readonly string[];
  /** Hosts of registered workers sent the token (--scrape-allow); default this machine (scrape.ts DEFAULT_SCRAPE_ALLOW). */
  scrapeAllow?: readonly string[];
  /** Scrape period, in ms. */
  intervalMs: number;
}

export interface Dashboard {
  url: string;
  access: HttpAccess;
  collector: Collector;
  /** Idempotent. */
  close(): Promise<void>;
}

export async function startDashboard(config: ConnectionConfig, o: DashboardOptions): Promise<Dashboard> {
  // A missing token for a server bound beyond loopback is a configuration error: before any connection.
  const access = dashboardAccess(o.host);
  // The admin client first: it fails at once (EO_KAFKA_CLIENT_MISSING) when the client is not built,
  // before a Cassandra session exists that would keep the process alive.
  const admin = new KafkaAdmin(config, 5_000);
  // No keyspace at connect: the dashboard may start before the schema exists and says so on the page.
  const session = await connect(config).catch(async (e: unknown) => {
    await admin.close();
    throw e;
  });
  const collector = new Collector(config, new DashboardStore(session, config.keyspace, config.topic), admin, {
    workerMetrics: o.workerMetrics,
    ...(o.scrapeAllow !== undefined ? { scrapeAllow: o.scrapeAllow } : {}),
    intervalMs: o.intervalMs,
    historyPoints: 600,
  });
  collector.on('error', () => undefined); // a failed round is retried at the next tick
  let server;
  try {
    server = await serveDashboard(collector, o.port, o.host, access);
  } catch (e) {
    await session.shutdown();
    await admin.close();
    throw new ExactlyOnceError('EO_PORT_IN_USE', `--port: cannot listen on ${o.host}:${o.port} (${(e as Error).message})`, { cause: e });
  }
  collector.start();
  let closing: Promise<void> | undefined;
  return {
    url: server.url,
    access,
    collector,
    close() {
      closing ??= (async () => {
        await server.close();
        await collector.stop();
        await admin.close();
        await session.shutdown().catch(() => undefined);
      })();
      return closing;
    },
  };
}
