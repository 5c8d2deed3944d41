/**
 * `bin/exactlyonce` as a child process: its path, the flags that carry a connection and an alert rule
 * (built here only), and one command run to completion.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { AlertRule } from '../jobs/events/alert-rule.js';
import type { ConnectionConfig } from '../config.js';
import { packageFile } from '../package-root.js';

export const cliPath = packageFile('bin', 'exactlyonce');

/**
 * The connection flags that give a child command the same connection as `config`, together with
 * `connectionEnv(config)`: the flags carry nothing secret (a command line is visible to every user
 * in `ps`), the environment carries the password and the Kafka properties.
 */
export function connectionArgs(config: ConnectionConfig): string[] {
  const args = ['--brokers', config.brokers.join(','), '--cassandra', config.cassandra.join(','), '--datacenter', config.datacenter];
  args.push('--keyspace', config.keyspace, '--topic', config.topic, '--alerts-topic', config.alertsTopic, '--group', config.group);
  if (config.cassandraUsername !== undefined) args.push('--cassandra-username', config.cassandraUsername);
  const tls = config.cassandraTls;
  if (tls !== undefined) {
    args.push('--cassandra-tls', tls.verifyHostname ? 'on' : 'no-hostname-check');
    if (tls.ca !== undefined) args.push('--cassandra-ca', path.resolve(tls.ca));
    if (tls.cert !== undefined) args.push('--cassandra-cert', path.resolve(tls.cert));
    if (tls.key !== undefined) args.push('--cassandra-key', path.resolve(tls.key));
  }
  return args;
}

/**
 * The environment that carries `config`'s secrets to a child (readable only by the same user, in
 * /proc/<pid>/environ): the Cassandra password and every Kafka property (as JSON, so values may hold
 * commas and newlines). The *_FILE variables are emptied so the child takes these values, whatever
 * the parent inherited.
 */
export function connectionEnv(config: ConnectionConfig): Record<string, string> {
  return {
    EXACTLYONCE_CASSANDRA_PASSWORD: config.cassandraPassword ?? '',
    EXACTLYONCE_CASSANDRA_PASSWORD_FILE: '',
    EXACTLYONCE_KAFKA_CONFIG: Object.keys(config.kafkaConfig).length === 0 ? '' : JSON.stringify(config.kafkaConfig),
    EXACTLYONCE_KAFKA_CONFIG_FILE: '',
    EXACTLYONCE_SCHEMA_REGISTRY_URL: config.schemaRegistry.url,
    EXACTLYONCE_SCHEMA_REGISTRY_USERNAME: config.schemaRegistry.username ?? '',
    EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD: config.schemaRegistry.password ?? '',
    EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD_FILE: '',
  };
}

/** The flags of an alert rule (`run`, `verify`, `chaos`). */
export function ruleArgs(r: AlertRule): string[] {
  return ['--window-ms', String(r.windows.sizeMs), '--slide-ms', String(r.windows.slideMs), '--threshold', String(r.threshold), '--alert-health', String(r.health)];
}

export interface CliRun {
  readonly child: ChildProcess;
  /** Its exit code and what it wrote on stdout (and stderr, unless inherited). */
  readonly result: Promise<{ code: number | null; output: string }>;
}

/** SIGTERM to a child still running, then SIGKILL if it has not exited after `graceMs`; resolves once it has exited. */
export async function terminate(child: ChildProcess, graceMs = 30_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Starts `bin/exactlyonce args…` in its own process group (Ctrl-C reaches only the caller, which stops it). */
export function startCli(args: string[], o: { inheritStderr?: boolean; env?: Record<string, string> } = {}): CliRun {
  const child = spawn(cliPath, args, { stdio: ['ignore', 'pipe', o.inheritStderr === true ? 'inherit' : 'pipe'], detached: true, env: { ...process.env, ...o.env } });
  let output = '';
  child.stdout!.on('data', (d) => (output += d));
  child.stderr?.on('data', (d) => (output += d));
  return { child, result: new Promise((resolve) => child.on('exit', (code) => resolve({ code, output }))) };
}
