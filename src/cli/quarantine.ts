/** `exactlyonce quarantine list`: the records the pipeline could not decode, with their offsets. */
import { Command, Option } from '@commander-js/extra-typings';
import { connect } from '../cassandra/session.js';
import { intOption } from '../config.js';
import { Quarantine } from '../engine/quarantine.js';
import { formatTable } from '../format/table.js';
import { action, connection, withConnection } from './common.js';

export function quarantineCommand(): Command {
  const q = new Command('quarantine').description('records that could not be decoded');
  withConnection(
    q
      .command('list')
      .description('list quarantined records: partition, offset, reason, key and the start of the raw bytes')
      .addOption(new Option('--partition <p>', 'only this partition').argParser(intOption('--partition', 0, 1e6)))
      .addOption(new Option('--limit <n>', 'most rows shown').default(100).argParser(intOption('--limit', 1, 1e7)))
      .option('--job <name>', "a job's quarantine by its name (e.g. a sink's; the job-keyed tables); left out: the events job's")
      .option('--json', 'one JSON object per line (raw bytes in base64)'),
    ['cassandra', 'datacenter', 'keyspace', 'cassandraUsername', 'cassandraPassword'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const session = await connect(config, { keyspace: config.keyspace });
      try {
        const rows = await new Quarantine(session, config.keyspace, undefined, opts.job === 'events' ? undefined : opts.job).list({
          partition: opts.partition,
          limit: opts.limit,
        });
        if (opts.json === true) {
          for (const r of rows) {
            process.stdout.write(
              JSON.stringify({ ...r, offset: String(r.offset), key: r.key?.toString('base64') ?? null, raw: r.raw?.toString('base64') ?? null }) + '\n',
            );
          }
          return;
        }
        const preview = (b: Buffer | null) => (b === null ? 'null' : JSON.stringify(b.subarray(0, 40).toString('utf8')));
        process.stdout.write(
          formatTable(
            ['partition', 'offset', 'reason', 'detail', 'key', 'bytes', 'raw (start)'],
            rows.map((r) => [r.partition, r.offset, r.reason, r.detail.slice(0, 50), r.key?.toString('utf8') ?? 'null', r.rawLength, preview(r.raw)]),
          ) + `\n(${rows.length} row${rows.length === 1 ? '' : 's'})\n`,
        );
      } finally {
        await session.shutdown();
      }
    }),
  );
  return q;
}
