/**
 * The tools the stack needs (java, mvn) and the server jars, copied from Maven Central (through
 * ~/.m2) by `mvn dependency:copy-dependencies` with the repo's stack/pom.xml.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExactlyOnceError } from '../errors.js';
import { displayName, type ServerName, type StackOptions } from './options.js';
import { pomFile, serverPaths, serverVersion } from './paths.js';
import { lastLines, run } from './process.js';

/** `$JAVA_HOME/bin/java` when JAVA_HOME is set (the usual way to pick a JDK), else `java` on PATH. */
export function javaCommand(): string {
  const home = process.env['JAVA_HOME'];
  return home !== undefined && home !== '' ? path.join(home, 'bin', 'java') : 'java';
}

let javaChecked: Promise<void> | undefined;

/**
 * Fails early with a one-liner when java is missing or too old. Kafka 4 brokers need Java 17+ and
 * Cassandra 5.0 supports only 11 and 17, so 17 is the one version that runs both.
 */
export function checkJava(onProgress?: (line: string) => void): Promise<void> {
  javaChecked ??= (async () => {
    const java = javaCommand();
    const r = await run(java, ['-version']).catch((e: unknown) => {
      throw new ExactlyOnceError('EO_TOOL_MISSING', `java not found (${java}); install a Java 17 JDK or set JAVA_HOME`, { cause: e });
    });
    const m = /version "(?:1\.)?(\d+)/.exec(r.output);
    const major = m === null ? NaN : Number(m[1]);
    if (r.code !== 0 || !(major >= 17)) {
      throw new ExactlyOnceError('EO_TOOL_MISSING', `Java 17 is required (found ${Number.isNaN(major) ? 'none' : major} at ${java}); install a Java 17 JDK or set JAVA_HOME`, { details: lastLines(r.output, 5) });
    }
    if (major !== 17) onProgress?.(`warning: Java ${major} found; Cassandra 5.0 supports only Java 11 and 17`);
  })();
  // A failed check is retried on the next call (the user may have fixed PATH meanwhile).
  javaChecked.catch(() => (javaChecked = undefined));
  return javaChecked;
}

/** Marker written into a lib folder once its copy is complete: the hash of the pom it came from. */
const MARKER = '.pom-sha256';

async function pomHash(): Promise<string> {
  return createHash('sha256').update(await readFile(pomFile())).digest('hex');
}

/**
 * Makes sure `<dir>/lib/<name>` holds the jars of the current pom. Runs mvn only when the folder is
 * missing or was filled from a different pom; copies into a temporary folder and renames it into
 * place, so an interrupted fetch never leaves a half-filled lib that looks complete.
 */
export function ensureJars(o: StackOptions, name: ServerName): Promise<string> {
  // The brokers of a cluster start at the same time, each asking for the same jars: one fetch serves
  // them all (three at once wrote into one staging folder and failed: "Failed to copy full contents").
  const { lib } = serverPaths(o.dir, name);
  let fetching = fetches.get(lib);
  if (fetching === undefined) {
    fetching = fetchJars(o, name, lib).finally(() => fetches.delete(lib));
    fetches.set(lib, fetching);
  }
  return fetching;
}

/** The fetches in progress in this process, by lib folder. */
const fetches = new Map<string, Promise<string>>();

async function fetchJars(o: StackOptions, name: ServerName, lib: string): Promise<string> {
  const hash = await pomHash();
  const recorded = await readFile(path.join(lib, MARKER), 'utf8').catch(() => null);
  if (recorded?.trim() === hash) return lib;

  o.onProgress?.(`fetching ${displayName(name)} ${serverVersion(name)} jars (mvn, cached in ~/.m2)…`);
  const staging = `${lib}.fetching-${process.pid}`;
  await rm(staging, { recursive: true, force: true });
  await mkdir(path.dirname(lib), { recursive: true });
  const args = ['-B', '-q', '-Dstyle.color=never', '-f', pomFile(), '-P', name, 'dependency:copy-dependencies', `-DoutputDirectory=${staging}`, '-DincludeScope=runtime'];
  const r = await run('mvn', args).catch((e: unknown) => {
    throw new ExactlyOnceError('EO_TOOL_MISSING', 'mvn not found on PATH; install Maven 3.6+ (e.g. apt-get install maven)', { cause: e });
  });
  if (r.code !== 0 || !existsSync(staging)) {
    await rm(staging, { recursive: true, force: true });
    throw new ExactlyOnceError('EO_FETCH_FAILED', `fetching ${displayName(name)} ${serverVersion(name)} jars with mvn failed (exit ${r.code}): network, or a wrong version in stack/pom.xml?`, { details: lastLines(r.output, 30) });
  }
  await unpackArchives(staging);
  await writeFile(path.join(staging, MARKER), `${hash}\n`);
  await rm(lib, { recursive: true, force: true });
  await rename(staging, lib);
  return lib;
}

/**
 * A server published as an archive (the Schema Registry's `tar.gz:all`) is unpacked where it was copied,
 * with the system's tar: Maven's own unpacking (dependency:unpack) silently dropped the three entries of
 * Apicurio 3.3.3 whose names need pax headers, and the registry then failed on its first Protobuf request.
 */
async function unpackArchives(dir: string): Promise<void> {
  for (const f of (await readdir(dir)).filter((n) => n.endsWith('.tar.gz'))) {
    const r = await run('tar', ['-xzf', path.join(dir, f), '-C', dir]).catch((e: unknown) => {
      throw new ExactlyOnceError('EO_TOOL_MISSING', 'tar not found on PATH; install it (e.g. apt-get install tar)', { cause: e });
    });
    if (r.code !== 0) throw new ExactlyOnceError('EO_FETCH_FAILED', `unpacking ${f} failed (exit ${r.code})`, { details: lastLines(r.output, 10) });
    await rm(path.join(dir, f));
  }
}
