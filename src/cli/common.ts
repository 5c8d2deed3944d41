/** What the commands share: the connection flags, error printing, and flag parsers. */
import { Command, Option } from 'commander';
import { connectionOptions, loadConnectionConfig, type ConnectionConfig, type ConnectionKey } from '../config.js';
import { parseHealthMix } from '../app/generator.js';
import { isRetriableCassandraError } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';

/**
 * Adds the shared connection flags (each also read from its EXACTLYONCE_* variable). Every command
 * accepts all of them, so one set of flags or one alias works everywhere; those the command does not
 * use are left out of its --help.
 */
export function withConnection(cmd: Command, used: readonly ConnectionKey[] = Object.keys(connectionOptions) as ConnectionKey[]): Command {
  for (const key of Object.keys(connectionOptions) as ConnectionKey[]) {
    const o = connectionOptions[key];
    const help = `${o.help} (env ${o.env}${o.default === undefined ? '' : `, default ${o.default}`})`;
    cmd.addOption(new Option(o.flag, help).hideHelp(!used.includes(key)));
  }
  return cmd;
}

export function connection(opts: Record<string, unknown>): ConnectionConfig {
  return loadConnectionConfig(opts);
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
  // A Cassandra driver error that outlived every retry: the server went away during the command.
  if (e instanceof Error && (isRetriableCassandraError(e) || e.name === 'DriverError')) {
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
