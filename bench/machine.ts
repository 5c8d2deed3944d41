/** The versions and machine facts stored with every result, so that two runs can be compared honestly. */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import type { BenchContext } from './context.js';
import { defaultStackOptions, stackStatus } from '../src/stack/index.js';
import { isClone, packageFile, packageRoot } from '../src/package-root.js';

const require = createRequire(import.meta.url);

/** The version of a dependency, found the way Node finds the dependency itself (hoisted or not). */
function packageVersion(name: string): string {
  try {
    return (require(`${name}/package.json`) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function git(args: string[]): string | undefined {
  try {
    return execFileSync('git', args, { cwd: packageRoot, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

export async function versions(ctx: BenchContext): Promise<Record<string, string>> {
  const v: Record<string, string> = {
    node: process.version,
    '@confluentinc/kafka-javascript': packageVersion('@confluentinc/kafka-javascript'),
    'cassandra-driver': packageVersion('cassandra-driver'),
  };
  v['exactlyonce'] = (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version;
  try {
    v['librdkafka'] = (require('@confluentinc/kafka-javascript') as { librdkafkaVersion: string }).librdkafkaVersion;
  } catch {
    v['librdkafka'] = 'unknown';
  }
  // An installed package has no commit of its own (a git command there would answer for the user's project).
  const commit = isClone ? git(['rev-parse', '--short', 'HEAD']) : undefined;
  if (commit !== undefined) v['git'] = `${commit}${git(['status', '--porcelain', '--untracked-files=no']) ? ' (with uncommitted changes)' : ''}`;
  const r = await ctx.session.execute('SELECT release_version FROM system.local').catch(() => undefined);
  v['cassandra'] = (r?.first()?.['release_version'] as string | undefined) ?? 'unknown';
  // Kafka does not report its version over the wire; the local stack knows which one it runs.
  const dir = process.env['EXACTLYONCE_STACK_DIR'];
  const local = await (async () => stackStatus(defaultStackOptions(dir === undefined ? {} : { dir })))().catch(() => []);
  const kafka = local.find((s) => s.name === 'kafka' && s.running && ctx.base.brokers.some((b) => b.endsWith(`:${s.port}`)));
  v['kafka'] = kafka?.version ?? 'unknown (not the local stack)';
  const cassandra = local.find((s) => s.name === 'cassandra' && s.running && ctx.base.cassandra.some((c) => isLocalCassandra(c, s.port)));
  ctx.servers = [kafka, cassandra].filter((s) => s?.pid != null).map((s) => ({ name: s!.name, pid: s!.pid!, logFile: s!.logFile }));
  return v;
}

/** True when a --cassandra contact point (host[:port], 9042 by default) is this machine's server on `port`. */
export function isLocalCassandra(point: string, port: number): boolean {
  const m = /^(127\.0\.0\.1|localhost)(?::(\d+))?$/.exec(point);
  return m !== null && Number(m[2] ?? 9042) === port;
}

export function machine(): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryMiB: Math.round(os.totalmem() / 2 ** 20),
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
    note: 'Kafka, Cassandra, the workers and the bench share these CPUs (and may share them with other users).',
  };
}
