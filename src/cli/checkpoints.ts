/**
 * `exactlyonce checkpoints list` and `exactlyonce checkpoints reset`, for the events job or any other
 * (`--job`): parses, calls src/operate/checkpoints.ts, prints.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import type { PartitionReport } from '../engine/checkpoint-store.js';
import { formatTable } from '../text-table.js';
import { checkResetRequest, listCheckpoints, resetCheckpoints } from '../operate/checkpoints.js';
import { withJob, type JobTarget } from '../operate/job-target.js';
import { isTime, parseTarget } from '../operate/reset-target.js';
import { action, connection, withConnection } from './common.js';

const USED = ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'] as const;

export const JOB_FLAG = "the job: a job module or a sink config (as `run --job`, `sink --config`), or the name of a job that ran in the keyspace; left out: the events job";

const dash = (v: unknown) => (v === null || v === undefined ? '-' : v);
const str = (v: bigint | null) => (v === null ? null : String(v));

function listLines(target: JobTarget, rows: readonly PartitionReport[]): string {
  const table = formatTable(
    ['partition', 'checkpoint', 'log start', 'log end', 'lag', 'held', 'epoch', 'owner', 'stopped'],
    rows.map((r) => [r.partition, dash(r.checkpoint), dash(r.logStart), dash(r.logEnd), dash(r.lag), dash(r.held), dash(r.epoch), dash(r.owner), r.stopped?.code ?? '-']),
  );
  const stops = rows
    .filter((r) => r.stopped !== null)
    .map((r) => `partition ${r.partition} stopped${r.stopped!.at === null ? '' : ` at ${r.stopped!.at.toISOString()}`}${r.stopped!.by === null ? '' : ` by ${r.stopped!.by}`}: ${r.stopped!.code}: ${r.stopped!.message}`);
  const head = target.flag === '' ? [] : [`job ${target.name}, topic ${target.topic}`];
  return [...head, table, `(${rows.length} partition${rows.length === 1 ? '' : 's'})`, ...stops].join('\n') + '\n';
}

function listCommand(): Command {
  return withConnection(
    new Command('list')
      .description(
        "per partition of the job's topic: the checkpoint (next offset to read) and its reset epoch, the log start and end, the lag (to the last stable offset), " +
          'the records held back by a transaction still open, the worker that owns it, and why it is stopped',
      )
      .option('--job <module|config|name>', JOB_FLAG)
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .option('--json', 'one JSON object per partition and line (offsets as strings)'),
    USED,
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const { target, listing } = await withJob(config, opts, async (session, target) => ({ target, listing: await listCheckpoints(config, session, target) }));
      if (opts.json === true) {
        for (const r of listing.rows) {
          const { checkpoint, logStart, logEnd, lag, held, stopped } = r;
          const line = { ...(target.flag === '' ? {} : { job: target.name, topic: target.topic }), partition: r.partition, checkpoint: str(checkpoint), epoch: r.epoch, logStart: str(logStart), logEnd: str(logEnd), lag: str(lag), held: str(held), owner: r.owner };
          process.stdout.write(JSON.stringify({ ...line, stopped: stopped === null ? null : { ...stopped, at: stopped.at?.toISOString() ?? null } }) + '\n');
        }
      } else {
        process.stdout.write(listLines(target, listing.rows));
      }
      if (listing.recreated !== null) process.stderr.write(`warning ${listing.recreated}\n`);
    }),
  );
}

function resetCommand(): Command {
  return withConnection(
    new Command('reset')
      .description(
        "move the job's checkpoints on purpose (safe while workers run: the reset wins over every late write of an old owner, and the owner resumes there within a few seconds). " +
          'Records below the new checkpoint are not read again; records from it on are read (again)',
      )
      .option('--job <module|config|name>', JOB_FLAG)
      .option('--job-option <key=value...>', 'passed to the job factory as context.options (repeatable)')
      .addOption(new Option('--partition <p>', 'the partition to reset').argParser(intOption('--partition', 0, 1_000_000)))
      .option('--all', 'every partition of the topic')
      .addOption(
        new Option('--to <where>', 'earliest (the log start), latest (the log end), an offset within the log, or a time: ISO-8601 with its zone, or @EPOCH_MS (each partition from its first record at or after it; Kafka offsets-for-times)').argParser(parseTarget),
      )
      .option('--rebind', "with --all: start the job over on the topic as it is now (after it was deleted and re-created): clears the old topic's outputs (the job's rows, quarantine; the events job's alert counts and alerts too), then binds the job to the new topic")
      .option('--dry-run', 'print what would change, change nothing'),
    USED,
  ).action(
    action(async (opts, cmd) => {
      const request = { partition: opts.partition, all: opts.all === true, to: opts.to, rebind: opts.rebind === true };
      checkResetRequest(request);
      const config = connection(cmd);
      const out = process.stdout;
      await withJob(config, opts, async (session, target) => {
        const to = request.to!;
        const r = await resetCheckpoints(config, session, target, { ...request, to, dryRun: opts.dryRun === true });
        if (target.flag !== '') out.write(`job ${target.name}, topic ${target.topic}${isTime(to) ? `, to the first record at or after ${new Date(to.atMs).toISOString()}` : ''}\n`);
        else if (isTime(to)) out.write(`to the first record at or after ${new Date(to.atMs).toISOString()}\n`);
        out.write(
          formatTable(
            ['partition', 'checkpoint', 'epoch', 'new checkpoint', 'new epoch', 'log start', 'log end'],
            r.plans.map((p) => [p.partition, dash(p.from?.next), dash(p.from?.epoch), p.to.next, p.to.epoch, p.logStart, p.logEnd]),
          ) + '\n',
        );
        if (opts.dryRun === true) {
          out.write(`dry run: nothing changed${r.reboundTo === null ? '' : ` (would also clear the old topic's outputs: ${r.clears.join(', ')}; and bind the job to topic ID ${r.reboundTo})`}\n`);
          return;
        }
        if (r.reboundTo !== null) out.write(`cleared the old topic's outputs: ${r.clears.join(', ')}${target.tablesKey === undefined ? ` (${r.alerts} alert${r.alerts === 1 ? '' : 's'})` : ''}\n`);
        out.write(
          `reset ${r.plans.length} partition${r.plans.length === 1 ? '' : 's'} of ${target.topic}` +
            `${r.reboundTo === null ? '' : `; the job is bound to topic ID ${r.reboundTo} now`}; running workers resume there within a few seconds\n`,
        );
      });
    }),
  );
}

export function checkpointsCommand(): Command {
  return new Command('checkpoints')
    .description("where each partition of a job stands (list) and moving a job's checkpoints on purpose (reset)")
    .addCommand(listCommand())
    .addCommand(resetCommand());
}
