/**
 * The Cassandra adapter: one driver Client per process, prepared statements only, errors mapped to
 * our codes with one line a user can act on.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions } from 'node:tls';
import cassandra from 'cassandra-driver';
import type { CassandraTls, ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { redact } from '../secrets.js';

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

/**
 * The longest wait between two attempts to reconnect to a node, in ms. The driver's default schedule
 * doubles from 1 s up to 10 minutes, so after an outage of a minute a worker waited for its next
 * attempt (up to about as long again) before it wrote anything, though Cassandra answered long before.
 */
export const RECONNECT_MAX_MS = 5_000;

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
    sslOptions: config.cassandraTls === undefined ? undefined : tlsOptions(config.cassandraTls),
    socketOptions: { connectTimeout: options.connectTimeoutMs ?? 5000, readTimeout: 30000 },
    // LOCAL_QUORUM is right for a real cluster and equals ONE on the single-node local stack.
    queryOptions: { consistency: consistencies.localQuorum, prepare: true },
    pooling: { coreConnectionsPerHost: { [cassandra.types.distance.local]: 2 } },
    policies: { reconnection: new cassandra.policies.reconnection.ExponentialReconnectionPolicy(500, RECONNECT_MAX_MS, false) },
    // A set column reads as a JS Set (the driver's default is an array, in Cassandra's order), so a
    // sink's set<T> compares as a set with the value it bound (src/jobs/sink/cql-types.ts canonical).
    encoding: { set: Set },
  });
  serializeControlRefresh(client);
  // Works around a driver bug (4.10): when every contact point was down (a Cassandra restart), the
  // control connection re-initialises and replaces each Host object without shutting the old one
  // down; the old host's pool keeps reconnecting on its own, and its sockets outlive shutdown().
  client.on('hostRemove', (host: { shutdown?: (waitForPending: boolean) => Promise<void> }) => {
    void host.shutdown?.(false).catch(() => undefined);
  });
  try {
    await client.connect();
  } catch (e) {
    if (e instanceof ExactlyOnceError) throw e;
    await client.shutdown().catch(() => undefined);
    throw unavailable(config, e);
  }
  return client;
}

/** What serializeControlRefresh needs of the driver's ControlConnection (4.10), not in its types. */
interface ControlConnectionInternals {
  _refresh(hostIterator?: unknown): Promise<void>;
  _isShuttingDown: boolean;
}

/**
 * Works around a driver bug (4.10) that killed workers under repeated Cassandra restarts: the control
 * connection starts a refresh from each of its health listeners and each failed refresh's timer,
 * never asking whether one is under way, and it attaches two sets of listeners when it re-initialises
 * after every node was down. So refreshes multiply with each outage (3 outages here: 4 listener sets,
 * reconnect attempts twice as often as the schedule), and two that overlap null each other's
 * connection: the one that fails then reads `this.connection.endpoint` of null in its catch, and when
 * a timer had started it, nothing handles the rejection and Node ends the process. Here one refresh
 * runs at a time: a second asked for meanwhile joins it (the one under way fails too if its
 * connection closed, and schedules the driver's next attempt); the driver's retry within a refresh,
 * with a host iterator, goes through. A refresh that fails resolves once it has scheduled its next
 * attempt; one that rejects all the same (a driver bug) is tried again after RECONNECT_MAX_MS.
 * Upstream has the same diagnosis and fix open (NODEJS-681, apache/cassandra-nodejs-driver pull
 * request 462: a refresh-in-progress flag in `_refresh`); this goes once a release has it.
 */
export function serializeControlRefresh(client: Client): void {
  const cc = (client as unknown as { controlConnection?: ControlConnectionInternals }).controlConnection;
  if (typeof cc?._refresh !== 'function') throw new Error('cassandra-driver: ControlConnection._refresh not found; the workaround in src/cassandra/session.ts needs the pinned driver version');
  const refresh = cc._refresh.bind(cc);
  let running: Promise<void> | undefined;
  cc._refresh = (hostIterator?: unknown) => {
    if (hostIterator !== undefined) return refresh(hostIterator);
    running ??= refresh()
      .catch(() => {
        if (!cc._isShuttingDown) setTimeout(() => void cc._refresh(), RECONNECT_MAX_MS).unref();
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
}

/**
 * The driver's `sslOptions` (Node's tls.connect options). The driver defaults `rejectUnauthorized` to
 * false; we verify the chain always and the name unless told not to. Files are read here, so a
 * missing one is named by its flag.
 */
export function tlsOptions(tls: CassandraTls): ConnectionOptions {
  const read = (file: string | undefined, flag: string): Buffer | undefined => {
    if (file === undefined) return undefined;
    try {
      return readFileSync(file);
    } catch (e) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: ${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`, { cause: e });
    }
  };
  const o: ConnectionOptions = { rejectUnauthorized: true };
  const ca = read(tls.ca, '--cassandra-ca');
  const cert = read(tls.cert, '--cassandra-cert');
  const key = read(tls.key, '--cassandra-key');
  if (ca !== undefined) o.ca = ca;
  if (cert !== undefined) o.cert = cert;
  if (key !== undefined) o.key = key;
  if (!tls.verifyHostname) o.checkServerIdentity = () => undefined;
  return o;
}

/** Node's codes for a server certificate that is not trusted, expired, or issued for another name. */
const TLS_TRUST_CODES = /^(SELF_SIGNED_CERT_IN_CHAIN|DEPTH_ZERO_SELF_SIGNED_CERT|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?|CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|CERT_UNTRUSTED|CERT_SIGNATURE_FAILURE|ERR_TLS_CERT_ALTNAME_INVALID)$/;

/** The errors the driver met on each host (a NoHostAvailableError wraps them), or the error itself. */
function innerErrors(e: unknown): unknown[] {
  const inner = (e as { innerErrors?: Record<string, unknown> } | undefined)?.innerErrors;
  return inner === undefined ? [e] : Object.values(inner);
}

/**
 * A refusal no retry can change, in one line naming what to fix: wrong credentials, an untrusted or
 * mismatched certificate, a missing permission. Undefined for anything else.
 */
export function securityError(cause: unknown, config?: ConnectionConfig): ExactlyOnceError | undefined {
  const where = config?.cassandra.join(',') ?? '';
  for (const e of innerErrors(cause)) {
    if (!(e instanceof Error)) continue;
    const msg = redact(e.message.split('\n')[0] ?? '', [config?.cassandraPassword]);
    const code = (e as { code?: unknown }).code;
    if (e.name === 'AuthenticationError' || code === 0x0100) {
      const what = config?.cassandraUsername === undefined
        ? 'it requires a username and password: give --cassandra-username and --cassandra-password-file (or EXACTLYONCE_CASSANDRA_PASSWORD)'
        : `check --cassandra-username '${config.cassandraUsername}' and its password (--cassandra-password-file or EXACTLYONCE_CASSANDRA_PASSWORD)`;
      return new ExactlyOnceError('EO_CASSANDRA_AUTH_FAILED', `Cassandra${where === '' ? '' : ` at ${where}`} refused the login (${msg}); ${what}`, { cause });
    }
    if (typeof code === 'string' && TLS_TRUST_CODES.test(code)) {
      const fix = code === 'ERR_TLS_CERT_ALTNAME_INVALID'
        ? 'connect by a name or address the certificate lists, or pass --cassandra-tls no-hostname-check'
        : code === 'CERT_HAS_EXPIRED' || code === 'CERT_NOT_YET_VALID'
          ? "renew the server's certificate"
          : "give the CA that signed the server's certificate with --cassandra-ca";
      return new ExactlyOnceError('EO_TLS_UNTRUSTED', `Cassandra${where === '' ? '' : ` at ${where}`}: the server's TLS certificate is not accepted (${code}: ${msg}); ${fix}`, { cause });
    }
    if (e.name === 'ResponseError' && code === 0x2100) {
      return new ExactlyOnceError('EO_NOT_AUTHORIZED', `Cassandra${where === '' ? '' : ` at ${where}`} refused an operation to ${config?.cassandraUsername ?? 'this user'} (${msg}); grant the role the permission it names`, { cause });
    }
  }
  return undefined;
}

export function unavailable(config: ConnectionConfig, cause: unknown): ExactlyOnceError {
  const secure = securityError(cause, config);
  if (secure !== undefined) return secure;
  const where = config.cassandra.join(',');
  const msg = redact(cause instanceof Error ? cause.message.split('\n')[0] ?? '' : String(cause), [config.cassandraPassword]);
  if (/keyspace/i.test(msg ?? '') && /does not exist/i.test(msg ?? '')) {
    return new ExactlyOnceError(
      'EO_CASSANDRA_QUERY',
      `keyspace '${config.keyspace}' does not exist at ${where}; run \`exactlyonce schema apply --keyspace ${config.keyspace}\` (with \`--job <module or sink config>\` for a job of your own: it also creates the job's tables)`,
      { cause },
    );
  }
  return new ExactlyOnceError(
    'EO_CASSANDRA_UNAVAILABLE',
    `Cassandra at ${where} is not reachable (${msg}); check --cassandra (or EXACTLYONCE_CASSANDRA), or for the local stack run \`exactlyonce stack up\``,
    { cause },
  );
}

/**
 * The driver's own bare errors for a host without an open connection (lib/host-connection-pool.js):
 * it has no code or type to tell them by, so the exact message is matched; a unit test obtains them
 * from the installed driver, so a reworded message fails there instead of stopping partitions.
 */
const DRIVER_NO_CONNECTION = new Set(['No connection available', 'Connection closed']);

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
  // The pool of a host has no open connection (it is reconnecting after an outage): the driver
  // throws a bare Error with no code or type, out of a prepare or a retry on the same host.
  if (e.constructor === Error && DRIVER_NO_CONNECTION.has(e.message)) return true;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code)) return true;
  if (securityError(e) !== undefined) return false;
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

/**
 * The nodes as `client` sees them: those the driver holds down, and when the node started last of all
 * (epoch ms, rounded up to the second). A node's gossip generation is the second it started
 * (`system_views.gossip_info`, Cassandra 4.1 and later; on an older server, or when the coordinator
 * cannot say, the start is unknown: null, and `onUnknownStart` is told why).
 */
export async function ringState(client: Client, onUnknownStart?: (cause: unknown) => void): Promise<{ down: string[]; lastStart: number | null }> {
  const down = client.hosts.values().filter((h) => !h.isUp()).map((h) => h.address);
  let lastStart: number | null = null;
  try {
    const r = await client.execute('SELECT generation FROM system_views.gossip_info', [], { consistency: consistencies.localOne });
    const starts = r.rows.map((row) => row['generation'] as number | null).filter((g): g is number => typeof g === 'number');
    if (starts.length > 0) lastStart = (Math.max(...starts) + 1) * 1000;
  } catch (e) {
    if (isRetriableCassandraError(e)) throw e;
    onUnknownStart?.(e);
  }
  return { down, lastStart };
}

export const Long = cassandra.types.Long;
/** An int64 as the driver's Long, exactly, from its two 32-bit halves (about 10× faster than via a string: bench/micro.ts). */
export function toLong(v: bigint): cassandra.types.Long {
  return cassandra.types.Long.fromBits(Number(BigInt.asIntN(32, v)), Number(BigInt.asIntN(32, v >> 32n)));
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
type EncoderThis = { encodingOptions?: { useBigIntAsLong?: boolean; useBigIntAsVarint?: boolean } };
type Encode = (this: EncoderThis, value: unknown, typeInfo?: unknown) => unknown;

/** The CQL type code of an encode call's type hint (a code, a name, or a column's info); undefined when the driver guesses. */
function typeCode(typeInfo: unknown): number | undefined {
  if (typeof typeInfo === 'number') return typeInfo;
  if (typeof typeInfo === 'string') return (cassandra.types.dataTypes as unknown as { getByName(name: string): { code?: number } | undefined }).getByName(typeInfo)?.code;
  const code = (typeInfo as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'number' ? code : undefined;
}

/**
 * A bigint as the driver 4.10 encodes the column's type without `encoding.useBigIntAsLong`: a Long
 * for bigint, counter and timestamp (and when the driver guesses), an Integer for varint. Outside
 * int64 it is refused rather than wrapped.
 */
function fromBigint(value: bigint, typeInfo: unknown, options: EncoderThis['encodingOptions']): unknown {
  const { bigint, counter, timestamp, varint } = cassandra.types.dataTypes;
  const code = typeCode(typeInfo);
  if (code === varint) return options?.useBigIntAsVarint === true ? value : cassandra.types.Integer.fromString(value.toString());
  if (options?.useBigIntAsLong === true || (code !== undefined && code !== bigint && code !== counter && code !== timestamp)) return value;
  if (value < INT64_MIN || value > INT64_MAX) throw new TypeError(`Not a valid bigint: ${value} is outside the 64-bit range`);
  return toLong(value);
}

// The engine hands a job each record's offset as a bigint (SourceRecord.offset), and a job naturally
// writes it to a bigint column as it is. The driver takes only a Long there unless the client sets
// `encoding.useBigIntAsLong`, which also refuses Long values and reads every bigint column as a
// bigint, breaking every job written against Long. So the encoder takes both (a bigint becomes the
// Long it stands for, exactly) while reads stay Long. Patched once, on the driver's shared prototype,
// so every Client's connections (a job's own session included) encode the same way.
const encoderPrototype = (cassandra as unknown as { Encoder: { prototype: { encode: Encode } } }).Encoder.prototype;
const driverEncode = encoderPrototype.encode;
encoderPrototype.encode = function encode(this: EncoderThis, value: unknown, typeInfo?: unknown): unknown {
  return driverEncode.call(this, typeof value === 'bigint' ? fromBigint(value, typeInfo, this.encodingOptions) : value, typeInfo);
};
export function fromLong(v: cassandra.types.Long): bigint {
  return (BigInt(v.high) << 32n) | BigInt(v.low >>> 0);
}
