/** `exactlyonce schema apply`: the keyspace, the seed job's two tables verbatim (migration 001), and ours. */
import { Command, Option } from '@commander-js/extra-typings';
import { applyJobMigrations, applySchema, parseReplication } from '../cassandra/migrate.js';
import { connect } from '../cassandra/session.js';
import { JobBinding, tableOwned } from '../engine/job-binding.js';
import { loadJobModule, parseJobOptions } from '../job-loader.js';
import { createLogger } from '../log.js';
import { localCluster } from '../stack/cluster.js';
import { evolveStatements } from '../jobs/sink/evolve.js';
import { moveColumnsForward } from '../jobs/sink/column-eras.js';
import { readTopic } from '../operate/checkpoints.js';
import { SinkJob } from '../jobs/sink/sink-job.js';
import { action, connection, withConnection } from './common.js';

export function schemaCommand(): Command {
  const schema = new Command('schema').description('Cassandra schema');
  withConnection(
    schema
      .command('apply')
      .description('create the keyspace and apply the versioned CQL files in order (a second apply is a no-op)')
      .option('--reset', 'truncate every table afterwards, as the original set-up did')
      .option('--job <module>', "then apply this job's own migrations (a job module, as for `run --job`, or a sink config, as for `sink --config`), recorded apart from the engine's")
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .addOption(
        new Option('--replication <spec>', 'SimpleStrategy:RF or NetworkTopologyStrategy:DC=RF[,DC=RF…] (on a local cluster stack: its size, up to 3)')
          .env('EXACTLYONCE_REPLICATION')
          .default(localCluster()?.keyspaceReplication ?? 'SimpleStrategy:1'),
      ),
    ['cassandra', 'datacenter', 'keyspace', 'topic', 'cassandraUsername', 'cassandraPassword', 'schemaRegistryUrl', 'schemaRegistryUsername', 'schemaRegistryPassword'],
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
        if (opts.job !== undefined) {
          const job = await loadJobModule(opts.job, { config, options: parseJobOptions(opts.jobOption), log: createLogger('schema') });
          // A table another job writes is refused here too, before this job's migrations are recorded.
          const binding = new JobBinding(client, config.keyspace);
          for (const table of job.tables ?? []) {
            const owner = await binding.owner(table);
            if (owner !== null && owner !== job.name) throw tableOwned(config.keyspace, table, owner, (await binding.read(owner))?.inputTopic, { name: job.name, inputTopic: job.topic ?? config.topic });
          }
          // A sink whose columns are derived from the registry: fields a newer schema version added get
          // their columns (src/jobs/sink/evolve.ts); a removed or retyped field is refused, nothing altered.
          let followsRegistry: number[] = [];
          if (job instanceof SinkJob && job.config.derived) {
            const live = await client.execute('SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [config.keyspace, job.config.table], { prepare: true });
            const alters = evolveStatements(job.config, new Map(live.rows.map((r) => [r['column_name'] as string, r['type'] as string])), config.keyspace);
            for (const statement of alters) {
              await client.execute(statement);
              out.write(`  applied ${statement}\n`);
            }
            followsRegistry = [1];
          }
          const j = await applyJobMigrations(client, config.keyspace, job.name, job.migrations ?? [], { followsRegistry });
          for (const m of j.applied) out.write(`  applied ${m}\n`);
          if (j.applied.length === 0) out.write(`  job ${job.name}: up to date (${j.skipped.length} migrations already applied)\n`);
          // The job's stored columns move forward to the added ones (src/jobs/sink/column-eras.ts), so its workers start with them.
          if (job instanceof SinkJob && job.config.derived) {
            const logEnds = async () => new Map((await readTopic(config, job.topic)).marks.map((m) => [m.partition, m.high]));
            const moved = await moveColumnsForward(client, config.keyspace, job, logEnds);
            const at = [...moved.from].map(([p, o]) => `${p}@${o}`).join(', ');
            if (moved.added.length > 0) out.write(`  job ${job.name}: stores ${moved.added.join(', ')} from offsets ${at || 'the start'} (partition@offset, the log ends; records before are stored with the columns before)\n`);
            if (moved.why !== undefined) out.write(`  job ${job.name}: its stored columns stay: ${moved.why}\n`);
          }
        }
      } finally {
        await client.shutdown();
      }
    }),
  );
  return schema;
}
