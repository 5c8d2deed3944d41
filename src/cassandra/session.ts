/**
 * The Cassandra adapter: one driver Client per process, prepared statements only, errors mapped to
 * our codes with one line a user can act on.
 */
import cassandra from 'cassandra-driver';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';

export type Client = cassandra.Client;
export const { types } = cassandra;
export const { consistencies } = cassandra.types;
export type Long = cassandra.types.Long;
export type Row = cassandra.types.Row;
export type ResultSet = cassandra.types.ResultSet;
export type QueryOptions = cassandra.QueryOptions;

export interface SessionOptions {
  /** Connect without a keyspace (schema set-up) or into one. */
  keyspace?: string | undefined;
  /** How long to wait for the first connection, in ms. */
  connectTimeoutMs?: number;
}

/** Contact points as given (`host` or `host:port`); the driver's default port is 9042. */
function contactPoints(config: ConnectionConfig): { points: string[]; port: number } {
  let port = 9042;
  const points = config.cassandra.map((cp) => {
    const m = /^(.*):(\d+)$/.exec(cp);
    if (m === null || cp.startsWith('[') && !cp.includes(']:')) return cp;
    port = Number(m[2]);
    return m[1]!.replace(/^\[|\]$/g, '');
  });
  return { points, port };
}

export async function connect(config: ConnectionConfig, options: SessionOptions = {}): Promise<Client> {
  const { points, port } = contactPoints(config);
  const client = new cassandra.Client({
    contactPoints: points,
    protocolOptions: { port },
    localDataCenter: config.datacenter,
    keyspace: options.keyspace,
    credentials:
      config.cassandraUsername !== undefined
        ? { username: config.cassandraUsername, password: config.cassandraPassword ?? '' }
        : undefined,
    socketOptions: { connectTimeout: options.connectTimeoutMs ?? 5000, readTimeout: 30000 },
    // LOCAL_QUORUM is right for a real cluster and equals ONE on the single-node local stack.
    queryOptions: { consistency: consistencies.localQuorum, prepare: true },
    pooling: { coreConnectionsPerHost: { [cassandra.types.distance.local]: 2 } },
  });
  // Works around a driver bug (4.10): when every contact point was down (a Cassandra restart), the
  // control connection re-initialises and replaces each Host object without shutting the old one
  // down; the old host's pool keeps reconnecting on its own, and its sockets outlive shutdown().
  client.on('hostRemove', (host: { shutdown?: (waitForPending: boolean) => Promise<void> }) => {
    void host.shutdown?.(false).catch(() => undefined);
  });
  try {
    await client.connect();
  } catch (e) {
    await client.shutdown().catch(() => undefined);
    throw unavailable(config, e);
  }
  return client;
}

export function unavailable(config: ConnectionConfig, cause: unknown): ExactlyOnceError {
  const where = config.cassandra.join(',');
  const msg = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
  if (/keyspace/i.test(msg ?? '') && /does not exist/i.test(msg ?? '')) {
    return new ExactlyOnceError(
      'EO_CASSANDRA_QUERY',
      `keyspace '${config.keyspace}' does not exist at ${where}; run \`exactlyonce schema apply\``,
      { cause },
    );
  }
  return new ExactlyOnceError(
    'EO_CASSANDRA_UNAVAILABLE',
    `Cassandra at ${where} is not reachable (${msg}); is the stack up? run \`exactlyonce stack up\``,
    { cause },
  );
}

/** Server answers worth retrying: 0x1000 Unavailable, 0x1001 Overloaded, 0x1002 IsBootstrapping, 0x1100 WriteTimeout, 0x1200 ReadTimeout. */
const TRANSIENT_CODES = new Set([0x1000, 0x1001, 0x1002, 0x1100, 0x1200]);

/**
 * True for driver errors worth retrying: no host reachable, a timeout, an unavailable or overloaded
 * replica. False for an answer no retry can change (invalid request, unauthorized, a write or read
 * failure, a query that no longer prepares after a schema change) — also when the driver wraps such
 * answers from every host it tried in a NoHostAvailableError.
 */
export function isRetriableCassandraError(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const name = e.name;
  if (name === 'OperationTimedOutError' || name === 'BusyConnectionError') return true;
  // The connection itself failed (the driver's bare DriverError: "Socket was closed", a connection
  // ended while a request was in flight; or the socket's own ECONNRESET/EPIPE/ECONNREFUSED): the
  // server never answered, so the next attempt may well succeed (a node restarting, a crash).
  if (name === 'DriverError') return true;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true;
  if (name === 'NoHostAvailableError') {
    const inner = Object.values((e as { innerErrors?: Record<string, unknown> }).innerErrors ?? {});
    // Hosts that answered, each with a definite refusal: the same query will be refused again.
    const refusedByAll = inner.length > 0 && inner.every((i) => i instanceof Error && i.name === 'ResponseError' && !TRANSIENT_CODES.has((i as { code?: number }).code ?? -1));
    return !refusedByAll;
  }
  return typeof code === 'number' && TRANSIENT_CODES.has(code);
}

/**
 * True when Cassandra refused for want of live replicas (0x1000 Unavailable: "Cannot achieve
 * consistency level LOCAL_QUORUM"), also inside a NoHostAvailableError: in a cluster, more replicas
 * are down than the consistency level allows, and no retry helps until enough come back.
 */
export function isReplicasUnavailable(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  if (e.name === 'ResponseError') return (e as { code?: unknown }).code === 0x1000;
  if (e.name !== 'NoHostAvailableError') return false;
  return Object.values((e as { innerErrors?: Record<string, unknown> }).innerErrors ?? {}).some((i) => isReplicasUnavailable(i));
}

export const Long = cassandra.types.Long;
/** An int64 as the driver's Long, exactly, from its two 32-bit halves (about 10× faster than via a string: bench/micro.ts). */
export function toLong(v: bigint): cassandra.types.Long {
  return cassandra.types.Long.fromBits(Number(BigInt.asIntN(32, v)), Number(BigInt.asIntN(32, v >> 32n)));
}
export function fromLong(v: cassandra.types.Long): bigint {
  return (BigInt(v.high) << 32n) | BigInt(v.low >>> 0);
}
