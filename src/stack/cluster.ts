/**
 * A local stack of several nodes: N Cassandra nodes forming one ring and M Kafka brokers forming one
 * KRaft quorum (`stack up --cassandra-nodes N --kafka-brokers M`). With 1 and 1 (the default) the
 * stack is the single Kafka and the single Cassandra it always was, under the same names and paths.
 *
 * - Cassandra node i (1..N) listens on 127.0.0.(1+i) with the standard ports (CQL --cassandra-port,
 *   storage --cassandra-port − 2042): Linux routes all of 127.0.0.0/8 to the loopback interface, so
 *   nothing needs configuring and nothing clashes with a single node on 127.0.0.1. One seed (node 1;
 *   two seeds make the first node wait for the other), one token each (evenly spaced Murmur3 tokens,
 *   so no token allocation), a cluster name of its own (gossip never mixes with another local
 *   Cassandra), JMX on 127.0.0.1:7199 + 100·i for nodetool.
 * - Kafka broker i (1..M) is a combined broker + controller on 127.0.0.1:(--kafka-port + 20000 + 100·i)
 *   (29192, 29292, 29392 by default), its controller on the next port; a static voter set; every node
 *   formatted with the same cluster id; internal topics replicated min(M, 3) times, min.insync.replicas
 *   2 when M ≥ 3. All brokers start at once: a quorum needs a majority, so one alone never gets ready.
 *
 * The layout a stack was started with is written to `<dir>/cluster.json`, so that `status`, `down`,
 * `chaos` and the connection defaults of the other commands find the cluster without flags.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { defaultStackOptions, type ServerName, type StackOptions } from './options.js';
import { serverPaths } from './paths.js';

/** One server of the stack: `id` names its files and pid (`kafka`, `cassandra` alone; `kafka2`, `cassandra3` in a cluster). */
export interface StackNode {
  id: string;
  kind: ServerName;
  /** 1-based. */
  index: number;
  host: string;
  port: number;
}

export interface CassandraNode {
  id: string;
  host: string;
  clusterName: string;
  /** host:port of the one seed. */
  seed: string;
  initialToken: string;
  jmxPort: number;
}

export interface KafkaNode {
  id: string;
  nodeId: number;
  port: number;
  controllerPort: number;
  /** controller.quorum.voters */
  voters: string;
  replication: number;
  minIsr: number;
  /** The cluster id every node is formatted with. */
  clusterId(): string;
}

/** Differs from the single node's `exactlyonce`, so the two never gossip with each other. */
export const CASSANDRA_CLUSTER_NAME = 'exactlyonce-ring';

/** Heaps of a cluster's JVMs when no --…-heap flag is given: 3 + 3 take about 4 GiB of RSS. */
export const CLUSTER_HEAP_MB: Readonly<Record<'kafka' | 'cassandra', number>> = { cassandra: 512, kafka: 512 };

export function isCluster(o: Pick<StackOptions, 'cassandraNodes' | 'kafkaBrokers'>): boolean {
  return o.cassandraNodes > 1 || o.kafkaBrokers > 1;
}

export function cassandraHost(o: Pick<StackOptions, 'cassandraNodes'>, i: number): string {
  return o.cassandraNodes > 1 ? `127.0.0.${1 + i}` : '127.0.0.1';
}

export function kafkaPortOf(o: Pick<StackOptions, 'kafkaBrokers' | 'kafkaPort'>, i: number): number {
  return o.kafkaBrokers > 1 ? o.kafkaPort + 20000 + 100 * i : o.kafkaPort;
}

/** Every server of the stack, the Kafka brokers first, the Schema Registry last (the order of status lists). */
export function stackNodes(o: StackOptions): StackNode[] {
  const range = (n: number) => Array.from({ length: n }, (_, k) => k + 1);
  return [
    ...range(o.kafkaBrokers).map((i) => ({ id: o.kafkaBrokers > 1 ? `kafka${i}` : 'kafka', kind: 'kafka' as const, index: i, host: '127.0.0.1', port: kafkaPortOf(o, i) })),
    ...range(o.cassandraNodes).map((i) => ({ id: o.cassandraNodes > 1 ? `cassandra${i}` : 'cassandra', kind: 'cassandra' as const, index: i, host: cassandraHost(o, i), port: o.cassandraPort })),
    ...(o.schemaRegistry ? [{ id: 'registry', kind: 'registry' as const, index: 1, host: '127.0.0.1', port: o.registryPort }] : []),
  ];
}

/** Evenly spaced Murmur3 tokens: node i of n owns the range ending at −2^63 + (i − 1)·2^64/n. */
export function initialToken(i: number, n: number): string {
  return (-(2n ** 63n) + (BigInt(i - 1) * 2n ** 64n) / BigInt(n)).toString();
}

export function cassandraNode(o: StackOptions, i: number): CassandraNode {
  const storagePort = o.cassandraPort - 2042;
  return {
    id: `cassandra${i}`,
    host: cassandraHost(o, i),
    clusterName: CASSANDRA_CLUSTER_NAME,
    seed: `${cassandraHost(o, 1)}:${storagePort}`,
    initialToken: initialToken(i, o.cassandraNodes),
    jmxPort: 7199 + 100 * i,
  };
}

export function kafkaNode(o: StackOptions, i: number): KafkaNode {
  const voters = Array.from({ length: o.kafkaBrokers }, (_, k) => `${k + 1}@127.0.0.1:${kafkaPortOf(o, k + 1) + 1}`).join(',');
  const port = kafkaPortOf(o, i);
  return {
    id: `kafka${i}`,
    nodeId: i,
    port,
    controllerPort: port + 1,
    voters,
    replication: Math.min(o.kafkaBrokers, 3),
    minIsr: o.kafkaBrokers >= 3 ? 2 : 1,
    clusterId: () => sharedClusterId(o.dir),
  };
}

/**
 * The Kafka cluster id all brokers of the stack are formatted with, made once and kept in
 * `<dir>/data/kafka-cluster-id`. Kafka's Uuid text form: 16 random bytes in base64url (22 chars);
 * one starting with '-' would read as a flag, so it is drawn again. (Synchronous, so brokers prepared
 * at the same time in one process cannot make two.)
 */
export function sharedClusterId(dir: string): string {
  const file = path.join(path.resolve(dir), 'data', 'kafka-cluster-id');
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    let id: string;
    do id = randomBytes(16).toString('base64url');
    while (id.startsWith('-'));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(file, `${id}\n`);
    return id;
  }
}

/** What `<dir>/cluster.json` records. */
export interface StackLayout {
  cassandraNodes: number;
  kafkaBrokers: number;
  kafkaPort: number;
  cassandraPort: number;
  /** The Schema Registry's port when the stack runs one (`stack up --schema-registry`). */
  registryPort?: number;
}

function layoutFile(dir: string): string {
  return path.join(path.resolve(dir), 'cluster.json');
}

/** The layout the stack in `dir` was last started with, or null (never started, or started before layouts existed: 1 + 1). */
export function readLayout(dir: string): StackLayout | null {
  try {
    const l = JSON.parse(readFileSync(layoutFile(dir), 'utf8')) as Partial<StackLayout>;
    const ok = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
    return ok(l.cassandraNodes) && ok(l.kafkaBrokers) && ok(l.kafkaPort) && ok(l.cassandraPort)
      ? { cassandraNodes: l.cassandraNodes, kafkaBrokers: l.kafkaBrokers, kafkaPort: l.kafkaPort, cassandraPort: l.cassandraPort, ...(ok(l.registryPort) ? { registryPort: l.registryPort } : {}) }
      : null;
  } catch {
    return null;
  }
}

export function writeLayout(o: StackOptions): void {
  mkdirSync(path.resolve(o.dir), { recursive: true });
  const l: StackLayout = { cassandraNodes: o.cassandraNodes, kafkaBrokers: o.kafkaBrokers, kafkaPort: o.kafkaPort, cassandraPort: o.cassandraPort, ...(o.schemaRegistry ? { registryPort: o.registryPort } : {}) };
  writeFileSync(layoutFile(o.dir), JSON.stringify(l) + '\n');
}

/**
 * When the stack in `dir` is a cluster: the connection defaults that point at it (every broker, every
 * contact point) and the replication its size allows (up to 3). Null for a single-node stack.
 */
export function clusterDefaults(dir: string): { brokers: string; cassandra: string; keyspaceReplication: string; topicReplication: number } | null {
  const l = readLayout(dir);
  if (l === null || !isCluster(l)) return null;
  const range = (n: number) => Array.from({ length: n }, (_, k) => k + 1);
  return {
    brokers: range(l.kafkaBrokers).map((i) => `127.0.0.1:${kafkaPortOf(l, i)}`).join(','),
    cassandra: range(l.cassandraNodes).map((i) => (l.cassandraPort === 9042 ? cassandraHost(l, i) : `${cassandraHost(l, i)}:${l.cassandraPort}`)).join(','),
    keyspaceReplication: `NetworkTopologyStrategy:datacenter1=${Math.min(l.cassandraNodes, 3)}`,
    topicReplication: Math.min(l.kafkaBrokers, 3),
  };
}

/**
 * The local stack's cluster (EXACTLYONCE_STACK_DIR, else ./.stack) when it was started as one
 * (`stack up --cassandra-nodes N --kafka-brokers M`): then the connection defaults of the commands point
 * at all its nodes and brokers, and `schema apply` / `topic create` / the bench replicate as widely as it
 * allows (up to 3).
 */
export function localCluster(): ReturnType<typeof clusterDefaults> {
  const dir = process.env['EXACTLYONCE_STACK_DIR'];
  return clusterDefaults(dir !== undefined && dir !== '' ? dir : defaultStackOptions().dir);
}

/**
 * The node id of the active KRaft controller, from the quorum-state file each broker keeps in its log
 * dir (`__cluster_metadata-0/quorum-state`: leaderId, leaderEpoch); the highest epoch wins, as a
 * stale broker may still name an old leader. In KRaft the "controller" of a Metadata response is not
 * the active controller, so this is the one way to find it. Null when no broker names one.
 */
export function activeController(o: StackOptions): number | null {
  let best: { id: number; epoch: number } | null = null;
  for (const n of stackNodes(o).filter((x) => x.kind === 'kafka')) {
    try {
      const q = JSON.parse(readFileSync(path.join(serverPaths(o.dir, n.id).data, '__cluster_metadata-0', 'quorum-state'), 'utf8')) as { leaderId?: number; leaderEpoch?: number };
      if (typeof q.leaderId === 'number' && q.leaderId >= 0 && typeof q.leaderEpoch === 'number' && (best === null || q.leaderEpoch > best.epoch)) best = { id: q.leaderId, epoch: q.leaderEpoch };
    } catch {
      // not formatted yet, or being rewritten
    }
  }
  return best?.id ?? null;
}
