/** `exactlyonce sink --config <file>`: a declarative sink, any topic into any table, exactly once. */
import { Command } from '@commander-js/extra-typings';
import { loadResolvedSinkConfig, type SinkConfig } from '../jobs/sink/sink-config.js';
import { sinkConfigKeysHelp } from '../jobs/sink/sink-config-keys.js';
import { canonical, cqlTypeName } from '../jobs/sink/cql-types.js';
import { valueFieldSpec } from '../jobs/sink/column-source.js';
import { SinkJob } from '../jobs/sink/sink-job.js';
import { createTableCql } from '../jobs/sink/sink-table.js';
import { createLogger } from '../log.js';
import { action, connection, withConnection } from './common.js';
import { runCliWorker } from './run.js';
import { runnerOptions, withWorkerFlags, type WorkerFlags } from './worker-flags.js';

export function sinkCommand(): Command {
  const cmd = withWorkerFlags(
    new Command('sink')
      .description(
        "run a worker of a declarative sink: the records of the config's topic (JSON, or Avro, Protobuf or JSON Schema through a Schema Registry) into its table, exactly once " +
          '(mode log: one row per partition and offset; mode upsert: per key, the record with the highest offset). ' +
          'Create the table first: `exactlyonce schema apply --job <config>` (README.md, "A sink in five minutes")',
      )
      .requiredOption('--config <file>', 'the sink config, YAML or JSON (.json): topic, format, table, mode, key, columns')
      .option('--print-cql', "print the CQL of the sink's table and exit (connects to nothing but, when columns are left out, the Schema Registry)"),
  );
  const withConn = withConnection(cmd, ['brokers', 'cassandra', 'datacenter', 'keyspace', 'group', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig']);
  // A sink's group is its own (see below), not the events job's EventStreamingApp: --help says so.
  const group = withConn.options.find((o) => o.attributeName() === 'group');
  if (group !== undefined) group.defaultValueDescription = "exactlyonce.<name>, the config's name";
  withConn.addHelpText('after', `\n${sinkConfigKeysHelp()}`);
  return withConn.action(
    action(async (opts, cmd) => {
      let conn = connection(cmd);
      const config = await loadResolvedSinkConfig(opts.config, conn.schemaRegistry);
      if (opts.printCql === true) {
        process.stdout.write(createTableCql(config, conn.keyspace));
        if (config.derived) process.stdout.write(derivedNote(config));
        return;
      }
      const w = opts as unknown as WorkerFlags; // added by withWorkerFlags
      // Each sink its own consumer group unless one is given: two jobs in one group would share partitions.
      if (cmd.getOptionValueSource('group') === 'default') conn = Object.freeze({ ...conn, group: `exactlyonce.${config.name}` });
      await runCliWorker(new SinkJob(config, conn.schemaRegistry), { connection: conn, runner: runnerOptions(w), metricsPort: w.metricsPort, progressEveryMs: w.progressInterval * 1000, log: createLogger('sink') });
    }),
  );
}

/** The derived columns as a config's `columns:` block (to pin them: a later schema version then changes nothing), and what was left out. */
function derivedNote(config: SinkConfig & { skipped?: string[] }): string {
  const lines = ['-- The columns were derived from the registered schema. To pin them, put this in the config:', '--   columns:'];
  for (const c of config.columns) {
    const spec = [`type: ${cqlTypeName(c.type)}`, ...(c.field.join('.') === c.name ? [] : [`field: ${valueFieldSpec(c.field.join('.'))}`]), ...(c.default === undefined ? [] : [`default: ${JSON.stringify(canonical(c.default))}`])];
    lines.push(`--     ${c.name}: { ${spec.join(', ')} }`);
  }
  for (const s of config.skipped ?? []) lines.push(`-- left out: ${s}`);
  return `${lines.join('\n')}\n`;
}
