/**
 * Apache Cassandra 5.0, single node, 127.0.0.1 only, started straight from its jars (no tarball,
 * no cassandra-env.sh): the options that script would add are listed here.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { cassandraStoragePort, type CommitlogSync, type StackOptions } from './options.js';
import { serverPaths, serverVersion } from './paths.js';
import { cassandraReady } from './ready.js';
import { CASSANDRA_SECURE_JVM, cassandraSecureYaml, isSecure, secureCassandraReady, setupCassandraRoles } from './secure.js';
import type { CassandraNode } from './cluster.js';
import { serverPorts, stackTags, type ServerSpec } from './server.js';

/**
 * What Cassandra's conf/jvm17-server.options sets, as users run it: its G1 settings ("GC SETTINGS":
 * a 300 ms pause target, objects tenured after one young collection, 16 MiB regions), the Java 17
 * module access it needs ("JPMS") and Netty's allocator ("Netty").
 * https://github.com/apache/cassandra/blob/cassandra-5.0/conf/jvm17-server.options
 */
const JVM17_OPTIONS = [
  '-XX:+UseG1GC',
  '-XX:+ParallelRefProcEnabled',
  '-XX:MaxTenuringThreshold=1',
  '-XX:G1HeapRegionSize=16m',
  '-XX:G1RSetUpdatingPauseTimePercent=5',
  '-XX:MaxGCPauseMillis=300',
  '-XX:InitiatingHeapOccupancyPercent=70',
  '-Djdk.attach.allowAttachSelf=true',
  ...[
    'java.base/jdk.internal.misc',
    'java.management.rmi/com.sun.jmx.remote.internal.rmi',
    'java.rmi/sun.rmi.registry',
    'java.rmi/sun.rmi.server',
    'java.sql/java.sql',
    'java.base/java.lang.ref',
    'jdk.unsupported/sun.misc',
    'jdk.compiler/com.sun.tools.javac.file',
    'jdk.attach/sun.tools.attach',
  ].map((m) => `--add-exports=${m}=ALL-UNNAMED`),
  ...[
    'java.base/java.lang.module',
    'java.base/jdk.internal.loader',
    'java.base/jdk.internal.ref',
    'java.base/jdk.internal.reflect',
    'java.base/jdk.internal.math',
    'java.base/jdk.internal.module',
    'java.base/jdk.internal.util.jar',
    'jdk.management/com.sun.management.internal',
    'java.base/sun.nio.ch',
    'java.base/java.io',
    'java.base/java.lang.reflect',
    'jdk.compiler/com.sun.tools.javac',
    'java.base/java.lang',
    'java.base/java.util',
  ].map((m) => `--add-opens=${m}=ALL-UNNAMED`),
  '-Dio.netty.tryReflectionSetAccessible=true',
  '-Dio.netty.allocator.useCacheForAllThreads=true',
  '-Dio.netty.allocator.maxOrder=11',
];

/**
 * periodic as Cassandra ships it (synced every 10 s), with its commit log compressed: Cassandra writes a
 * compressed segment's data to the file only when it syncs, so a SIGKILLed node forgets everything
 * acknowledged since the last sync — what an OS crash or a power loss does to a node on the defaults.
 * (Uncompressed, Cassandra marks what it wrote every 100 ms without syncing, and a SIGKILL, which
 * leaves the page cache to the kernel, loses at most those 100 ms: chaos would rarely see a loss.)
 */
const periodicYaml = (periodMs: number) => `
commitlog_sync_period: ${periodMs}ms
commitlog_compression:
  - class_name: LZ4Compressor`;

/** Cassandra's default `commitlog_sync_period`, in ms. */
export const DEFAULT_COMMITLOG_SYNC_PERIOD_MS = 10_000;

/**
 * The periodic sync period a node starts with: the one asked for (`stack up
 * --commitlog-sync-period-ms`: a longer one widens every loss window, for chaos and the loss tests),
 * else the one its yaml already has (a node SIGKILLed and started again keeps it), else Cassandra's 10 s.
 */
function commitlogPeriodOf(o: StackOptions, yamlFile: string): number {
  if (o.commitlogSyncPeriodMs !== undefined) return o.commitlogSyncPeriodMs;
  try {
    const m = /^commitlog_sync_period: (\d+)ms$/m.exec(readFileSync(yamlFile, 'utf8'));
    if (m !== null) return Number(m[1]);
  } catch {
    // never started: the default
  }
  return DEFAULT_COMMITLOG_SYNC_PERIOD_MS;
}

/**
 * The commit log sync a node starts with: the one asked for, else the one its yaml already has (a node
 * SIGKILLed and started again by chaos keeps its mode), else periodic, Cassandra's default, for the
 * single node and for a ring alike: users run their rings on it, and the engine's defence against what
 * a crashed node forgets (src/engine/lost-writes.ts) is what the local ring must prove.
 */
function commitlogSyncOf(o: StackOptions, yamlFile: string): CommitlogSync {
  return o.commitlogSync ?? writtenCommitlogSync(yamlFile) ?? 'periodic';
}

/** The commit log sync written in a node's yaml, or null when it has none yet. */
export function writtenCommitlogSync(yamlFile: string): CommitlogSync | null {
  let text: string;
  try {
    text = readFileSync(yamlFile, 'utf8');
  } catch {
    return null;
  }
  const m = /^commitlog_sync: (periodic|batch)$/m.exec(text);
  return m === null ? null : (m[1] as CommitlogSync);
}

/** The periodic sync period the stack's Cassandra node `id` was last started with, in ms. */
export function stackCommitlogPeriodMs(o: StackOptions, id: string): number {
  return commitlogPeriodOf({ ...o, commitlogSyncPeriodMs: undefined }, path.join(serverPaths(o.dir, id).conf, 'cassandra.yaml'));
}

/** The commit log sync the stack's Cassandra node `id` was last started with (null: never started). */
export function stackCommitlogSync(o: StackOptions, id: string): CommitlogSync | null {
  return writtenCommitlogSync(path.join(serverPaths(o.dir, id).conf, 'cassandra.yaml'));
}

/** The single node (no `node`), or one node of a ring (cluster.ts gives its address, token, seed, JMX port). */
export function cassandraServer(o: StackOptions, node?: CassandraNode): ServerSpec {
  const id = node?.id ?? 'cassandra';
  const host = node?.host ?? '127.0.0.1';
  const p = serverPaths(o.dir, id);
  const port = o.cassandraPort;
  const storagePort = cassandraStoragePort(o);
  const yamlFile = path.join(p.conf, 'cassandra.yaml');
  const logback = path.join(p.conf, 'logback.xml');
  const triggers = path.join(p.conf, 'triggers');

  // Everything not listed keeps Cassandra's default (LWT, USING TIMESTAMP, … need nothing).
  // commitlog_sync: periodic by default, as Cassandra ships it and as a user's cluster most likely runs:
  // replay after a crash stops at the last sync (every 10 s; see periodicYaml), so a crashed node
  // forgets acknowledged writes, rows and checkpoints alike. The engine notices its checkpoint went back and
  // writes them again (src/engine/lost-writes.ts), so every chaos run exercises that defence. batch
  // acknowledges a write only once the commit log holding it is synced (concurrent writes share a sync).
  const commitlog = commitlogSyncOf(o, yamlFile);
  const periodMs = commitlogPeriodOf(o, yamlFile);
  const yaml = `# Written by exactlyonce stack on every start; edit src/stack/cassandra-server.ts instead.
cluster_name: ${node?.clusterName ?? 'exactlyonce'}
num_tokens: 1${node === undefined ? '' : `\ninitial_token: ${node.initialToken}\n# A fresh ring of empty nodes: nothing to stream when a node joins.\nauto_bootstrap: false`}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "${node?.seed ?? `127.0.0.1:${storagePort}`}"
listen_address: ${host}
rpc_address: ${host}
storage_port: ${storagePort}
native_transport_port: ${port}
commitlog_sync: ${commitlog}${commitlog === 'periodic' ? periodicYaml(periodMs) : ''}
data_file_directories: [${JSON.stringify(path.join(p.data, 'data'))}]
commitlog_directory: ${JSON.stringify(path.join(p.data, 'commitlog'))}
saved_caches_directory: ${JSON.stringify(path.join(p.data, 'saved_caches'))}
hints_directory: ${JSON.stringify(path.join(p.data, 'hints'))}
cdc_raw_directory: ${JSON.stringify(path.join(p.data, 'cdc_raw'))}
# Tests drop keyspaces all the time; a snapshot per drop only costs time and disk.
auto_snapshot: false
# The batch size thresholds keep Cassandra's defaults (warn 5 KiB, fail 50 KiB), as users run them:
# every batch the pipeline writes holds one Cassandra partition, which they do not limit.
`;

  // Console only: the process's stdout/stderr go to logs/cassandra.log (see spawnDetached).
  const logbackXml = `<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="out"/></root>
</configuration>
`;

  return {
    name: 'cassandra',
    id,
    host,
    version: serverVersion('cassandra'),
    port,
    ports: [
      ...serverPorts('--cassandra-port', port, { port: storagePort, role: 'the Cassandra storage port, --cassandra-port − 2042' }).map((x) => ({ ...x, host })),
      ...(node === undefined ? [] : [{ port: node.jmxPort, what: `port ${node.jmxPort} (JMX of ${id}) is already in use by another process` }]),
    ],
    stopGraceMs: 60_000, // the shutdown hook drains: flushes memtables, syncs the commit log
    async prepare() {
      await Promise.all([p.conf, p.data, p.tmp, triggers, path.dirname(p.logFile)].map((d) => mkdir(d, { recursive: true })));
      // Secured, the file holds the keystore password: only its owner may read it.
      await writeFile(yamlFile, isSecure(o) ? yaml + cassandraSecureYaml(o) : yaml, { mode: 0o600 });
      await writeFile(logback, logbackXml);
    },
    javaArgs(lib) {
      // jamm measures memtable sizes precisely when loaded as an agent (cassandra-env.sh does so).
      const jamm = readdirSync(lib).find((f) => /^jamm-.*\.jar$/.test(f));
      return [
        `-Xms${o.cassandraHeapMb}m`,
        `-Xmx${o.cassandraHeapMb}m`,
        '-XX:+ExitOnOutOfMemoryError', // Cassandra's own advice: a node limping on after OOM can corrupt data
        ...JVM17_OPTIONS,
        // Every collection, one line each with its wall-clock time, in logs/<node>-gc.log (the options'
        // "GC logging" section, which Cassandra ships commented out, reduced to a line per collection):
        // the bench reads the pauses a latency case met.
        `-Xlog:gc:file=${gcLogFile(p.logFile)}:time,uptime:filecount=5,filesize=10m`,
        ...(jamm === undefined ? [] : [`-javaagent:${path.join(lib, jamm)}`]),
        '-Dcassandra-foreground=yes', // otherwise it closes stdout/stderr, our log
        `-Dcassandra.config=${pathToFileURL(yamlFile).href}`,
        `-Dcassandra.storagedir=${p.data}`,
        `-Dcassandra.logdir=${path.dirname(p.logFile)}`,
        `-Dcassandra.triggers_dir=${triggers}`,
        `-Dlogback.configurationFile=${logback}`,
        `-Djava.io.tmpdir=${p.tmp}`,
        // A fixed token avoids token allocation, which takes a start from ~15 s to ~1 min; a ring's nodes
        // have theirs in the yaml.
        // Gossip settles at once on one node, and a ring's nodes start one after another anyway.
        '-Dcassandra.skip_wait_for_gossip_to_settle=0',
        ...(node === undefined
          ? ['-Dcassandra.initial_token=0', ...(isSecure(o) ? CASSANDRA_SECURE_JVM : [])]
          : // Local-only JMX for nodetool; the RMI server on the same port, not a random one.
            [`-Dcassandra.jmx.local.port=${node.jmxPort}`, `-Dcom.sun.management.jmxremote.rmi.port=${node.jmxPort}`]),
        ...stackTags(path.resolve(o.dir), id, port),
        '-cp',
        `${lib}/*`,
        'org.apache.cassandra.service.CassandraDaemon',
      ];
    },
    probe: () => (isSecure(o) && node === undefined ? secureCassandraReady(o) : cassandraReady(port, 5000, host)),
    afterReady: () => (isSecure(o) && node === undefined ? setupCassandraRoles(o) : Promise.resolve()),
  };
}

/** Where a Cassandra node of the stack logs its collections: beside its log, `<node>-gc.log`. */
export function gcLogFile(logFile: string): string {
  return logFile.replace(/\.log$/, '-gc.log');
}
