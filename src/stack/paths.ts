/**
 * Where every file of the stack lives, derived from the stack dir, and where the package's
 * `stack/pom.xml` is (the versions are read from it, so it is the single source of truth).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ServerName } from './options.js';
import { packageFile } from '../package-root.js';

export function pomFile(): string {
  return packageFile('stack', 'pom.xml');
}

/** The server version, from `<kafka.version>` / `<cassandra.version>` / `<registry.version>` in the pom. */
export function serverVersion(name: ServerName): string {
  const m = new RegExp(`<${name}\\.version>([^<]+)</`).exec(readFileSync(pomFile(), 'utf8'));
  return m?.[1] ?? 'unknown';
}

export interface ServerPaths {
  lib: string;
  data: string;
  conf: string;
  tmp: string;
  logFile: string;
  pidFile: string;
}

/** `id`: the server's name (`kafka`, `cassandra`) or, in a cluster, its node id (`kafka2`, `cassandra3`). */
export function serverPaths(dir: string, id: string): ServerPaths {
  const abs = path.resolve(dir);
  return {
    lib: path.join(abs, 'lib', id.replace(/\d+$/, '')),
    data: path.join(abs, 'data', id),
    conf: path.join(abs, 'conf', id),
    // JNA, snappy and zstd unpack native code into java.io.tmpdir; /tmp may be noexec or shared.
    tmp: path.join(abs, 'tmp', id),
    logFile: path.join(abs, 'logs', `${id}.log`),
    pidFile: path.join(abs, 'run', `${id}.pid`),
  };
}
