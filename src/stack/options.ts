/**
 * What the local stack is and where it lives. One value, built once by `defaultStackOptions`, is
 * passed to every stack function; nothing here touches the disk.
 */
import path from 'node:path';

export type ServerName = 'kafka' | 'cassandra' | 'registry';

/**
 * Cassandra's commit log sync (cassandra.yaml `commitlog_sync`): `periodic` is what Cassandra ships
 * (acknowledge at once, sync every 10 s: a crashed node forgets up to 10 s of acknowledged writes, and
 * the engine finds and writes them again, docs/guarantees.md, "Durability of an acknowledged write"); `batch` syncs before acknowledging.
 */
export type CommitlogSync = 'periodic' | 'batch';
export const COMMITLOG_SYNCS: readonly CommitlogSync[] = ['periodic', 'batch'];

/** Start order does not matter (they start in parallel); this is the order of status lists. */
export const SERVER_NAMES: readonly ServerName[] = ['kafka', 'cassandra'];

export interface StackOptions {
  /** Root of all stack state: lib/ (jars), data/, logs/, run/ (pid files), conf/, tmp/. */
  dir: string;
  /** Kafka PLAINTEXT port on 127.0.0.1; the KRaft controller listens on kafkaPort + 1. */
  kafkaPort: number;
  /** Cassandra CQL port on 127.0.0.1; the storage (gossip) port is derived: cassandraPort − 2042 (9042 → 7000). */
  cassandraPort: number;
  /** JVM heap (-Xms = -Xmx) in MiB. */
  kafkaHeapMb: number;
  cassandraHeapMb: number;
  /** Cassandra nodes in one ring and Kafka brokers in one KRaft quorum (1 and 1: the single-node stack; see cluster.ts). */
  cassandraNodes: number;
  kafkaBrokers: number;
  /**
   * A Schema Registry beside them (`stack up --schema-registry`, registry-server.ts); once started, the
   * stack dir's layout remembers it (cluster.ts), so `status`, `down` and the connection defaults find it.
   */
  schemaRegistry: boolean;
  /** The registry's HTTP port on 127.0.0.1; its management interface listens on registryPort + 1. */
  registryPort: number;
  registryHeapMb: number;
  /** How long a freshly started JVM may take to answer, in ms (the one-off jar fetch is not counted). */
  startTimeoutMs: number;
  /**
   * TLS and authentication on both servers (see secure.ts). A stack dir made secure stays secure:
   * its secure/ folder is found on later starts even without this.
   */
  secure?: boolean;
  /**
   * Cassandra's commit log sync, written into each node's yaml at start. Absent: the mode the node's
   * yaml already has (a restarted node keeps its mode), else `periodic`.
   */
  commitlogSync?: CommitlogSync;
  /**
   * The periodic commit log's sync period in ms, written into each node's yaml at start. Absent: the
   * period the node's yaml already has, else Cassandra's 10 s.
   */
  commitlogSyncPeriodMs?: number;
  /** Human progress lines ("fetching Cassandra 5.0.6 jars…"). */
  onProgress?: (line: string) => void;
}

export interface ServerStatus {
  name: ServerName;
  /** `kafka` / `cassandra` alone, `kafka2` / `cassandra3` in a cluster (see cluster.ts). */
  id: string;
  host: string;
  pid: number | null;
  port: number;
  running: boolean;
  /** Running and answering a client request (Kafka metadata / CQL query) right now. */
  ready: boolean;
  version: string;
  logFile: string;
}

/**
 * The stack's folder unless --stack-dir / EXACTLYONCE_STACK_DIR say otherwise: `.stack` in the working
 * directory, as node_modules is per project (one stack per project, removed with `rm -rf .stack`; in a
 * clone, where `make` and CI run from the root, `<repo>/.stack`). Never beside the code: an installed
 * package's folder is wiped by the next `npm ci`.
 */
export const DEFAULT_STACK_DIR = '.stack';

export function defaultStackOptions(overrides: Partial<StackOptions> = {}): StackOptions {
  return {
    dir: path.resolve(DEFAULT_STACK_DIR),
    kafkaPort: 9092,
    cassandraPort: 9042,
    kafkaHeapMb: 1024,
    // 1 GiB ran out (OutOfMemoryError, the node exits) under the benchmark since every write waits for
    // its commit log sync (cassandra-server.ts): memtables were still flushing while writes came in.
    cassandraHeapMb: 2048,
    startTimeoutMs: 180_000,
    cassandraNodes: 1,
    kafkaBrokers: 1,
    schemaRegistry: false,
    // The port Confluent's Schema Registry and its clients default to.
    registryPort: 8081,
    // Apicurio holds schemas in an embedded H2 database: 512 MiB leaves room (~260 MiB RSS idle).
    registryHeapMb: 512,
    ...overrides,
  };
}

/** Cassandra's inter-node port, derived so a second stack only needs a different CQL port. */
export function cassandraStoragePort(o: StackOptions): number {
  return o.cassandraPort - 2042;
}

export function displayName(name: ServerName): string {
  return name === 'kafka' ? 'Kafka' : name === 'cassandra' ? 'Cassandra' : 'Schema Registry';
}
