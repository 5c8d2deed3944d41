/** `exactlyonce sink --config <file>`: a declarative sink, any JSON topic into any table, exactly once. */
import { Command } from '@commander-js/extra-typings';
import { loadSinkConfig } from '../sink/sink-config.js';
import { createTableCql, SinkJob } from '../sink/sink-job.js';
import { createLogger } from '../log.js';
import { action, connection, withConnection } from './common.js';
import { runCliWorker, runnerOptions, withWorkerFlags, type WorkerFlags } from './run.js';

export function sinkCommand(): Command {
  const cmd = withWorkerFlags(
    new Command('sink')
      .description(
        'run a worker of a declarative sink: the JSON records of the config\'s topic into its table, exactly once ' +
          '(mode log: one row per partition and offset; mode upsert: per key, the record with the highest offset). ' +
          'Create the table first: `exactlyonce schema apply --job <config>` (README "A sink in five minutes")',
      )
      .requiredOption('--config <file>', 'the sink config, YAML or JSON (.json): topic, table, mode, key, columns')
      .option('--print-cql', "print the CQL of the sink's table and exit (nothing is connected)"),
  );
  return withConnection(cmd, ['brokers', 'cassandra', 'datacenter', 'keyspace', 'group', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig']).action(
    action(async (opts, cmd) => {
      const config = loadSinkConfig(opts.config);
      if (opts.printCql === true) {
        process.stdout.write(createTableCql(config, connection(cmd).keyspace));
        return;
      }
      const w = opts as unknown as WorkerFlags; // added by withWorkerFlags
      let conn = connection(cmd);
      // Each sink its own consumer group unless one is given: two jobs in one group would share partitions.
      if (cmd.getOptionValueSource('group') === 'default') conn = Object.freeze({ ...conn, group: `exactlyonce.${config.name}` });
      await runCliWorker(new SinkJob(config), { connection: conn, runner: runnerOptions(w), metricsPort: w.metricsPort, log: createLogger('sink') });
    }),
  );
}
