/** `exactlyonce cql [STATEMENT]`: one CQL statement, or a small prompt (cqlsh is not available here). */
import { createInterface } from 'node:readline/promises';
import { Command, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { connect, type Client } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';
import { formatTable } from '../text-table.js';
import { action, connection, withConnection } from './common.js';

async function runOne(client: Client, statement: string): Promise<void> {
  let result;
  try {
    result = await client.execute(statement, [], { prepare: false });
  } catch (e) {
    throw new ExactlyOnceError('EO_CASSANDRA_QUERY', (e as Error).message, { cause: e });
  }
  if (result.columns === null || result.columns === undefined) {
    process.stdout.write('OK\n');
    return;
  }
  const columns = result.columns.map((c) => c.name);
  process.stdout.write(formatTable(columns, result.rows.map((r) => columns.map((c) => r[c]))) + '\n');
  process.stdout.write(`(${result.rowLength} row${result.rowLength === 1 ? '' : 's'})\n`);
}

export function cqlCommand(): CommandUnknownOpts {
  return withConnection(
    new Command('cql')
      .description('run one CQL statement (or, without one, an interactive prompt) and print rows as a table')
      .argument('[statement]', "e.g. \"SELECT * FROM events LIMIT 10\""),
    ['cassandra', 'datacenter', 'keyspace', 'cassandraUsername', 'cassandraPassword'],
  ).action(
    action(async (statement, _opts, cmd) => {
      const config = connection(cmd);
      // The keyspace is selected when it exists, so `SELECT * FROM events` works without the keyspace's name (as in README.md, "A sink in five minutes").
      const probe = await connect(config);
      const exists = await probe
        .execute('SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?', [config.keyspace])
        .then((r) => r.rowLength > 0)
        .finally(() => probe.shutdown());
      const client = await connect(config, { keyspace: exists ? config.keyspace : undefined });
      try {
        if (statement !== undefined) return await runOne(client, statement);
        const rl = createInterface({ input: process.stdin, output: process.stdout, prompt: `cql:${config.keyspace}> ` });
        let buffer = '';
        rl.prompt();
        for await (const line of rl) {
          buffer += (buffer ? '\n' : '') + line;
          if (/^\s*(exit|quit)\s*;?\s*$/i.test(buffer)) break;
          if (buffer.trim().endsWith(';') || buffer.trim() === '') {
            if (buffer.trim() !== '') {
              try {
                await runOne(client, buffer.trim().replace(/;$/, ''));
              } catch (e) {
                process.stderr.write(`error: ${(e as Error).message}\n`);
              }
            }
            buffer = '';
          }
          rl.prompt();
        }
        rl.close();
      } finally {
        await client.shutdown();
      }
    }),
  );
}
