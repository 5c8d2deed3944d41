/**
 * `exactlyonce quarantine list` (the records a job could not decode), `quarantine redrive` (decode
 * them again with the job's current decoder and write those that decode now) and `quarantine add` (one
 * record the store refuses, by hand): parses, calls src/engine/quarantine.ts and src/operate/, prints.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { connect } from '../cassandra/session.js';
import { intOption } from './flags.js';
import { Quarantine } from '../engine/quarantine.js';
import { ExactlyOnceError } from '../errors.js';
import { formatTable } from '../text-table.js';
import { parseJobOptions } from '../job-loader.js';
import { eventsTarget, isJobFile, loadTarget, withJob } from '../operate/job-target.js';
import { quarantineByHand } from '../operate/hand-quarantine.js';
import { redrive, type Offsets } from '../operate/redrive.js';
import { JOB_FLAG } from './checkpoints.js';
import { action, connection, withConnection } from './common.js';

const offsetOption = (flag: string) => (v: string) => {
  if (!/^\d{1,19}$/.test(v.trim())) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected an offset, a whole number from 0 (got '${v}')`);
  return BigInt(v.trim());
};

function listCommand(): Command {
  return withConnection(
    new Command('list')
      .description('list quarantined records: partition, offset, reason, key and the start of the raw bytes')
      .addOption(new Option('--partition <p>', 'only this partition').argParser(intOption('--partition', 0, 1e6)))
      .addOption(new Option('--limit <n>', 'most rows shown').default(100).argParser(intOption('--limit', 1, 1e7)))
      .option('--job <module|config|name>', JOB_FLAG)
      .option('--json', 'one JSON object per line (raw bytes in base64)'),
    ['cassandra', 'datacenter', 'keyspace', 'cassandraUsername', 'cassandraPassword'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const session = await connect(config, { keyspace: config.keyspace });
      try {
        // A name needs no lookup here: the quarantine is keyed by it.
        const spec = opts.job;
        const key = spec === undefined ? undefined : isJobFile(spec) ? (await loadTarget(config, spec)).tablesKey : spec === eventsTarget(config).name ? undefined : spec;
        const rows = await new Quarantine(session, config.keyspace, undefined, key).list({ partition: opts.partition, limit: opts.limit });
        if (opts.json === true) {
          for (const r of rows) process.stdout.write(JSON.stringify({ ...r, offset: String(r.offset), key: r.key?.toString('base64') ?? null, raw: r.raw?.toString('base64') ?? null }) + '\n');
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
}

const spell = (m: Offsets) => [...m.values()].reduce((n, o) => n + o.length, 0);

function redriveCommand(): Command {
  return withConnection(
    new Command('redrive')
      .description(
        "decode a job's quarantined records again with its current decoder (after a schema was registered, a config fixed) and write those that decode now, exactly once: " +
          'the output row first (the job\'s own idempotent write with the record\'s offset), then the quarantine row is deleted; safe beside running workers, and to run again after an interruption',
      )
      .requiredOption('--job <module|config>', "the job's module or sink config (its decoder decides)")
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .option('--reason <reason>', 'only records quarantined for this reason (e.g. unknown_schema)')
      .addOption(new Option('--partition <p>', 'only this partition').argParser(intOption('--partition', 0, 1_000_000)))
      .addOption(new Option('--from <offset>', 'only offsets from this one (inclusive)').argParser(offsetOption('--from')))
      .addOption(new Option('--to <offset>', 'only offsets up to this one (inclusive)').argParser(offsetOption('--to')))
      .addOption(new Option('--batch <n>', 'records written, then taken out of the quarantine, per step').default(500).argParser(intOption('--batch', 1, 100_000)))
      .option('--dry-run', 'decode and count, write and delete nothing'),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      if (opts.from !== undefined && opts.to !== undefined && opts.to < opts.from) throw new ExactlyOnceError('EO_USAGE', `--to: ${opts.to} is below --from ${opts.from}`);
      const config = connection(cmd);
      const out = process.stdout;
      const dry = opts.dryRun === true;
      const r = await withJob(config, { job: opts.job, jobOption: opts.jobOption }, async (session, target) =>
        redrive(config, session, target, { reason: opts.reason, partition: opts.partition, from: opts.from, to: opts.to, batch: opts.batch, dryRun: dry, onLine: (l) => out.write(`${l}\n`) }),
      );
      const stay = [...r.stay].map(([reason, n]) => `${n} ${reason}`).join(', ');
      out.write(
        `${dry ? 'dry run: would redrive' : 'redrove'} ${spell(r.redriven)} record${spell(r.redriven) === 1 ? '' : 's'}` +
          `${r.reread > 0 ? ` (${r.reread} re-read from Kafka: their raw bytes were cut)` : ''}; ` +
          `${stay === '' ? 'none' : stay} still not decodable${spell(r.lost) > 0 ? `; ${spell(r.lost)} cannot be redriven (above)` : ''}` +
          `${r.inFlight > 0 ? `; ${r.inFlight} at or beyond the checkpoint left to the workers` : ''}\n`,
      );
      if (r.moved.length > 0) {
        process.stderr.write(`warning: partition${r.moved.length === 1 ? '' : 's'} ${r.moved.join(', ')} ${r.moved.length === 1 ? 'was' : 'were'} reset or rewound during the redrive: a worker may have quarantined some of these records again; run the redrive again once the workers caught up\n`);
      }
    }),
  );
}

function addCommand(): Command {
  return withConnection(
    new Command('add')
      .description(
        'quarantine one record the store refuses for good (a partition stopped with EO_PERMANENT_ERROR names it), reason refused: ' +
          'a partition stopped at or before it starts again from its checkpoint, and its worker passes over the record when the store refuses it again; verify counts it as quarantined by hand',
      )
      .requiredOption('--partition <p>', 'the partition', intOption('--partition', 0, 1_000_000))
      .requiredOption('--offset <offset>', 'the offset of the refused record', offsetOption('--offset'))
      .option('--job <module|config|name>', JOB_FLAG)
      .option('--detail <text>', 'why, kept with the record (e.g. the ticket)', ''),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const r = await withJob(config, { job: opts.job }, (session, target) => quarantineByHand(config, session, target, opts.partition, opts.offset, opts.detail));
      const p = opts.partition;
      process.stdout.write(
        `quarantined partition ${p} offset ${opts.offset} (${r.record.value?.length ?? 0} bytes), reason refused\n` +
          (r.restarted !== null
            ? `partition ${p} was stopped: it starts again from its checkpoint ${r.restarted.next} (epoch ${r.restarted.epoch}); the workers pick it up within seconds\n`
            : `partition ${p} is not stopped: its worker passes over the record if the store refuses it\n`),
      );
    }),
  );
}

export function quarantineCommand(): Command {
  return new Command('quarantine')
    .description('records a job could not decode: list them, redrive them once the cause is fixed, or quarantine one the store refuses by hand')
    .addCommand(listCommand())
    .addCommand(redriveCommand())
    .addCommand(addCommand());
}
