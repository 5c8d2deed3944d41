/** What the coordinator needs to know about one server; kafka-server.ts and cassandra-server.ts fill it in. */
import type { ServerName } from './options.js';

export interface ServerSpec {
  name: ServerName;
  /** The name alone; the node id in a cluster (see cluster.ts). */
  id: string;
  /** The address its client port listens on. */
  host: string;
  version: string;
  /** The port clients use. */
  port: number;
  /** Every port the server binds, checked before start, with the flag that moves it (for the error). */
  ports: readonly { port: number; what: string; host?: string }[];
  /** Writes configs, formats storage: everything that must exist before the JVM starts. */
  prepare(lib: string): Promise<void>;
  /** Everything after `java`. */
  javaArgs(lib: string): string[];
  /** After the server first answers (each start): one-off set-up such as users and grants (secure.ts). */
  afterReady?(lib: string): Promise<void>;
  /** True when the server answers a client request (see ready.ts). */
  probe(): Promise<boolean>;
  /** How long a clean SIGTERM shutdown may take before SIGKILL, in ms. */
  stopGraceMs: number;
  /** The java to start it with, when not the stack's Java 17 (the registry needs 21+: registry-server.ts). */
  java?(): Promise<string>;
}

/**
 * Tags put on the java command line: they let status/stop recognise *our* process behind a pid file
 * (pids are reused) and recover the port it was started with.
 */
export function stackTags(dir: string, id: string, port: number): string[] {
  return [`-Dexactlyonce.stack=${dir}#${id}`, `-Dexactlyonce.port=${port}`];
}

/**
 * A server's two ports, each with what to say when another process holds it: the client port, moved
 * by `flag`, and the second port derived from it (`role` says which, and how it is derived).
 */
export function serverPorts(flag: string, port: number, second: { port: number; role: string }): ServerSpec['ports'] {
  return [
    { port, what: `port ${port} is already in use by another process; stop it or pass ${flag}` },
    { port: second.port, what: `port ${second.port} (${second.role}) is already in use by another process; stop it or pass another ${flag}` },
  ];
}
