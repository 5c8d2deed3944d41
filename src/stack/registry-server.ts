/**
 * A Schema Registry beside Kafka and Cassandra (`stack up --schema-registry`): Apicurio Registry 3,
 * fetched from Maven Central like the other servers (its `tar.gz:all` artifact, unpacked by
 * src/stack/fetch.ts), serving the Confluent-compatible API at http://127.0.0.1:<port>/apis/ccompat/v7
 * — the base URL every Confluent client (ours, Debian's Python client) takes.
 *
 * - Storage: Apicurio's SQL storage on an embedded H2 database in a file under the stack dir, so that
 *   schemas survive a restart (its default, H2 in memory, forgets them all: every record produced
 *   before would then carry a schema id nobody knows). `WRITE_DELAY=0`: H2 writes each commit to its
 *   file at once instead of within a second, so a SIGKILLed registry keeps every schema whose
 *   registration it acknowledged (checked by hand: register, SIGKILL, restart, the id is there).
 * - Bound to 127.0.0.1, its Quarkus management interface (health, metrics; 0.0.0.0:9000 by default)
 *   too, on the next port.
 * - It needs Java 21 or newer (Kafka and Cassandra run on 17): found by `registryJava`.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { ExactlyOnceError } from '../errors.js';
import type { StackOptions } from './options.js';
import { serverPaths, serverVersion } from './paths.js';
import { canConnect, run } from './process.js';
import { serverPorts, stackTags, type ServerSpec } from './server.js';

/** The Confluent-compatible API's path under the registry's address. */
export const CCOMPAT_PATH = '/apis/ccompat/v7';

/** The oldest Java the registry runs on (Apicurio 3.3 is built for 21: class file version 65). */
const MIN_JAVA = 21;
/** Where Debian, Ubuntu and the Temurin packages install JDKs. */
const JVM_DIRS = ['/usr/lib/jvm', '/usr/local/lib/jvm', '/opt/java'];

/** The registry's base URL for clients (the Confluent-compatible API). */
export function registryUrl(port: number): string {
  return `http://127.0.0.1:${port}${CCOMPAT_PATH}`;
}

export function registryServer(o: StackOptions): ServerSpec {
  const id = 'registry';
  const p = serverPaths(o.dir, id);
  const port = o.registryPort;
  const managementPort = port + 1;
  const db = path.join(p.data, 'registry');
  return {
    name: 'registry',
    id,
    host: '127.0.0.1',
    version: serverVersion('registry'),
    port,
    ports: serverPorts('--registry-port', port, { port: managementPort, role: "the registry's management interface, --registry-port + 1" }),
    stopGraceMs: 30_000,
    java: registryJava,
    async prepare() {
      await Promise.all([p.data, p.tmp, path.dirname(p.logFile)].map((d) => mkdir(d, { recursive: true })));
    },
    javaArgs: (lib) => [
      `-Xmx${o.registryHeapMb}m`,
      '-XX:+ExitOnOutOfMemoryError',
      `-Djava.io.tmpdir=${p.tmp}`,
      ...stackTags(path.resolve(o.dir), id, port),
      '-Dquarkus.http.host=127.0.0.1',
      `-Dquarkus.http.port=${port}`,
      '-Dquarkus.management.host=127.0.0.1',
      `-Dquarkus.management.port=${managementPort}`,
      `-Dapicurio.datasource.url=jdbc:h2:file:${db};WRITE_DELAY=0`,
      '-Dquarkus.log.console.json=false',
      '-jar',
      quarkusRunJar(lib),
    ],
    probe: () => registryReady(port),
  };
}

/** Ready when the Confluent-compatible API lists subjects (it answers only once storage is up). */
export async function registryReady(port: number, timeoutMs = 3000): Promise<boolean> {
  if (!(await canConnect(port))) return false;
  try {
    const r = await fetch(`${registryUrl(port)}/subjects`, { signal: AbortSignal.timeout(timeoutMs) });
    return r.status === 200;
  } catch {
    return false;
  }
}

/** The runnable jar in the unpacked artifact: searched for, since its folder has moved between versions. */
function quarkusRunJar(lib: string): string {
  const queue = [lib];
  for (let depth = 0; depth < 3 && queue.length > 0; depth++) {
    for (const dir of queue.splice(0)) {
      const entries = readdirSync(dir, { withFileTypes: true });
      if (entries.some((e) => e.isFile() && e.name === 'quarkus-run.jar')) return path.join(dir, 'quarkus-run.jar');
      queue.push(...entries.filter((e) => e.isDirectory() && e.name !== 'lib').map((e) => path.join(dir, e.name)));
    }
  }
  throw new ExactlyOnceError('EO_FETCH_FAILED', `no quarkus-run.jar in ${lib}: the registry artifact's layout changed; remove ${lib} and run \`exactlyonce stack up --schema-registry\` again`);
}

/** A JDK's major version from its `release` file (no process started), or null. */
function releaseMajor(home: string): number | null {
  try {
    const m = /^JAVA_VERSION="(?:1\.)?(\d+)/m.exec(readFileSync(path.join(home, 'release'), 'utf8'));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

let found: Promise<string> | undefined;

/**
 * A Java ≥ 21 for the registry: EXACTLYONCE_REGISTRY_JAVA_HOME, else JAVA_HOME or `java` on PATH when
 * new enough, else the newest JDK under /usr/lib/jvm (a machine whose default Java is 17 for Kafka and
 * Cassandra often has a second one there). EO_TOOL_MISSING names what to install when none is found.
 */
export function registryJava(): Promise<string> {
  found ??= (async () => {
    const explicit = process.env['EXACTLYONCE_REGISTRY_JAVA_HOME'];
    if (explicit !== undefined && explicit !== '') {
      const java = path.join(explicit, 'bin', 'java');
      const major = await javaMajor(java);
      if (major !== null && major >= MIN_JAVA) return java;
      throw new ExactlyOnceError('EO_TOOL_MISSING', `EXACTLYONCE_REGISTRY_JAVA_HOME=${explicit}: ${major === null ? 'no runnable bin/java there' : `Java ${major}`}; the Schema Registry needs Java ${MIN_JAVA} or newer`);
    }
    const seen: string[] = [];
    const home = process.env['JAVA_HOME'];
    for (const java of [home !== undefined && home !== '' ? path.join(home, 'bin', 'java') : undefined, 'java']) {
      if (java === undefined) continue;
      const major = await javaMajor(java);
      if (major !== null && major >= MIN_JAVA) return java;
      seen.push(`${java}: ${major === null ? 'not found' : `Java ${major}`}`);
    }
    const jdks = JVM_DIRS.flatMap((d) => {
      try {
        return readdirSync(d).map((n) => path.join(d, n));
      } catch {
        return [];
      }
    })
      .map((h) => ({ home: h, major: releaseMajor(h) }))
      .filter((j): j is { home: string; major: number } => j.major !== null && existsSync(path.join(j.home, 'bin', 'java')))
      .sort((a, b) => b.major - a.major);
    const best = jdks[0];
    if (best !== undefined && best.major >= MIN_JAVA) return path.join(best.home, 'bin', 'java');
    seen.push(...jdks.map((j) => `${j.home}: Java ${j.major}`));
    throw new ExactlyOnceError(
      'EO_TOOL_MISSING',
      `the Schema Registry (Apicurio Registry ${serverVersion('registry')}) needs Java ${MIN_JAVA} or newer, and none was found (${seen.join('; ')}). ` +
        `Install one beside Java 17 (Debian 13: apt-get install openjdk-21-jre-headless; elsewhere a Temurin 21+ under /usr/lib/jvm), or point EXACTLYONCE_REGISTRY_JAVA_HOME at it`,
    );
  })();
  found.catch(() => (found = undefined));
  return found;
}

async function javaMajor(java: string): Promise<number | null> {
  const r = await run(java, ['-version']).catch(() => null);
  if (r === null || r.code !== 0) return null;
  const m = /version "(?:1\.)?(\d+)/.exec(r.output);
  return m === null ? null : Number(m[1]);
}
