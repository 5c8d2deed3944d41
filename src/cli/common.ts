/** What the commands share: the connection flags, error printing, and flag parsers. */
import { Command, Option, type CommandUnknownOpts, type OptionValues } from '@commander-js/extra-typings';
import { connectionOptions, kafkaConfigFromEnv, loadConnectionConfig, type ConnectionConfig, type ConnectionKey } from '../config.js';
import { parseHealthMix } from '../jobs/events/generator.js';
import { isRetriableCassandraError, securityError } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';
import { localCluster, readLayout } from '../stack/cluster.js';
import { CCOMPAT_PATH } from '../stack/registry-server.js';
import { defaultStackOptions } from '../stack/options.js';

const CONNECTION_KEYS = Object.keys(connectionOptions) as ConnectionKey[];

/**
 * The local stack's Schema Registry when it runs one on another port than the default (`stack up
 * --schema-registry --registry-port N`, remembered in its layout, or EXACTLYONCE_REGISTRY_PORT): the
 * default --schema-registry-url points at it.
 */
function localRegistryUrl(): string | undefined {
  const dir = process.env['EXACTLYONCE_STACK_DIR'];
  const port = readLayout(dir !== undefined && dir !== '' ? dir : defaultStackOptions().dir)?.registryPort ?? Number(process.env['EXACTLYONCE_REGISTRY_PORT'] || 0);
  return port > 0 ? `http://127.0.0.1:${port}${CCOMPAT_PATH}` : undefined;
}

/** The connection flags as Commander leaves them: strings, not validated yet (`connection` does that). */
export type ConnectionFlags = { [K in ConnectionKey]?: K extends 'kafkaConfig' ? string[] : string };

/**
 * Adds the shared connection flags, each bound to its EXACTLYONCE_* variable with Commander's
 * `Option.env()` (so `--help` shows the variable and the default the one way Commander does). Every
 * command accepts all of them, so one set of flags or one alias works everywhere; those the command
 * does not use (`used`) are left out of its --help, and `connection` neither reads nor validates them.
 */
export function withConnection<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  cmd: Command<A, O, G>,
  usedKeys: readonly ConnectionKey[] = CONNECTION_KEYS,
): Command<A, O & ConnectionFlags, G> {
  const used = withCompanions(usedKeys);
  const cluster = localCluster();
  for (const key of CONNECTION_KEYS) {
    const o = connectionOptions[key];
    const option = new Option(o.flag, o.help).env(o.env).hideHelp(!used.includes(key));
    const clusterDefault = cluster === null ? undefined : key === 'brokers' ? cluster.brokers : key === 'cassandra' ? cluster.cassandra : undefined;
    const registry = key === 'schemaRegistryUrl' ? localRegistryUrl() : undefined;
    if (registry !== undefined) cmd.addOption(option.default(registry, `${registry}: the local stack's registry`));
    else cmd.addOption(clusterDefault !== undefined ? option.default(clusterDefault, `${clusterDefault}: the local stack's cluster`) : o.default === undefined ? option : option.default(o.default));
  }
  return cmd as unknown as Command<A, O & ConnectionFlags, G>;
}

/** A command that connects to Cassandra also takes its TLS and password-file settings; one that uses --kafka-config, the file. */
function withCompanions(used: readonly ConnectionKey[]): ConnectionKey[] {
  const out = new Set(used);
  if (used.includes('cassandraPassword')) for (const k of ['cassandraPasswordFile', 'cassandraTls', 'cassandraCa', 'cassandraCert', 'cassandraKey'] as const) out.add(k);
  if (used.includes('kafkaConfig')) out.add('kafkaConfigFile');
  // Whatever reads Kafka records may meet Avro, Protobuf or JSON Schema ones: the registry's settings too.
  if (used.includes('kafkaConfig')) for (const k of ['schemaRegistryUrl', 'schemaRegistryUsername', 'schemaRegistryPassword'] as const) out.add(k);
  if (out.has('schemaRegistryPassword')) out.add('schemaRegistryPasswordFile');
  return [...out];
}

/**
 * The validated connection of a parsed command (Commander has applied flag > environment > default).
 * Only the settings the command uses are read and validated: a bad EXACTLYONCE_BROKERS does not stop
 * `schema apply`; the others keep their defaults. As `loadConnectionConfig` does, an empty variable
 * counts as unset, and EXACTLYONCE_KAFKA_CONFIG holds key=value lines or a JSON object.
 */
export function connection(cmd: CommandUnknownOpts): ConnectionConfig {
  const raw: Record<string, unknown> = {};
  for (const key of CONNECTION_KEYS) {
    if (cmd.options.find((o) => o.attributeName() === key)?.hidden !== false) continue;
    const value = cmd.getOptionValue(key);
    if (cmd.getOptionValueSource(key) === 'env') {
      const env = process.env[connectionOptions[key].env] ?? '';
      if (env === '') continue;
      raw[key] = key === 'kafkaConfig' ? kafkaConfigFromEnv(env) : value;
    } else {
      raw[key] = value;
    }
  }
  return loadConnectionConfig(raw, {});
}

/**
 * Runs a command body: an ExactlyOnceError (or a Cassandra driver error that outlived its retries)
 * becomes `error CODE: message` (plus its details) and the code's exit status; anything else is a bug
 * and keeps its stack trace.
 */
export function action<A extends unknown[]>(fn: (...args: A) => Promise<void | number>) {
  return async (...args: A): Promise<void> => {
    try {
      const code = await fn(...args);
      if (typeof code === 'number') process.exitCode = code;
    } catch (e) {
      process.exitCode = reportError(e);
    }
  };
}

export function reportError(e: unknown): number {
  // A login, certificate or permission refusal: one line naming what to fix.
  e = securityError(e) ?? e;
  // A Cassandra driver error that outlived every retry: the server went away during the command.
  if (e instanceof Error && !(e instanceof ExactlyOnceError) && (isRetriableCassandraError(e) || e.name === 'DriverError')) {
    e = new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', `Cassandra stopped answering (${e.message.split('\n')[0]}); is it up? (\`exactlyonce stack status\` for the local stack)`, { cause: e });
  }
  if (e instanceof ExactlyOnceError) {
    process.stderr.write(`error ${e.code}: ${e.message}\n`);
    if (e.details !== undefined) process.stderr.write(e.details.replace(/\n?$/, '\n'));
    return e.exitCode;
  }
  process.stderr.write(`internal error (a bug; please report it): ${e instanceof Error ? e.stack : String(e)}\n`);
  return 70;
}

/** `--health-mix`: weights of health 0, 1, 2 as HEALTH:WEIGHT pairs (`generate`, `bench`). */
export function healthMixOption(value: string): [number, number, number] {
  const m = parseHealthMix(value);
  if (m === undefined) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--health-mix: expected HEALTH:WEIGHT pairs like 0:70,1:20,2:10 (got '${value}')`);
  return m;
}
