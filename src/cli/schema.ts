/** `exactlyonce schema apply`: the keyspace, the original's tables verbatim, and ours. */
import { Command, Option } from '@commander-js/extra-typings';
import { applySchema, parseReplication } from '../cassandra/migrate.js';
import { connect } from '../cassandra/session.js';
import { action, connection, localCluster, withConnection } from './common.js';

export function schemaCommand(): Command {
  const schema = new Command('schema').description('Cassandra schema');
  withConnection(
    schema
      .command('apply')
      .description('create the keyspace and apply the versioned CQL files in order (a second apply is a no-op)')
      .option('--reset', 'truncate every table afterwards, as the original set-up did')
      .addOption(
        new Option('--replication <spec>', 'SimpleStrategy:RF or NetworkTopologyStrategy:DC=RF[,DC=RF…] (on a local cluster stack: its size, up to 3)')
          .env('EXACTLYONCE_REPLICATION')
          .default(localCluster()?.keyspaceReplication ?? 'SimpleStrategy:1'),
      ),
    ['cassandra', 'datacenter', 'keyspace', 'cassandraUsername', 'cassandraPassword'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const replication = parseReplication(opts.replication);
      const client = await connect(config);
      try {
        const r = await applySchema(client, config.keyspace, replication, { reset: opts.reset === true });
        const out = process.stdout;
        out.write(`keyspace ${config.keyspace}: ${r.createdKeyspace ? 'created' : 'exists'}\n`);
        for (const m of r.applied) out.write(`  applied ${m}\n`);
        if (r.applied.length === 0) out.write(`  up to date (${r.skipped.length} migrations already applied)\n`);
        if (r.truncated.length > 0) out.write(`  truncated ${r.truncated.join(', ')}\n`);
      } finally {
        await client.shutdown();
      }
    }),
  );
  return schema;
}
