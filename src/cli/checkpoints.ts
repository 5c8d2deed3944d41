/**
 * `exactlyonce checkpoints list` and `exactlyonce checkpoints reset`: where each partition stands, and
 * moving a checkpoint on purpose (a stopped partition, a re-created topic, a replay), safely while
 * workers — and zombies — run: a reset writes the next reset epoch, whose write timestamps are above
 * every one an old owner can still send (src/engine/checkpoint-store.ts), and the running owner moves
 * to it within a few seconds (src/engine/reset-watcher.ts).
 */
import { Command, Option } from '@commander-js/extra-typings';
import { readJob } from '../app/event-job.js';
import { clearForRebind, rebindClears } from '../app/rebind.js';
import { connect, type Client } from '../cassandra/session.js';
import { intOption, type ConnectionConfig } from '../config.js';
import {
  CheckpointStore,
  parseResetTarget,
  partitionReports,
  planResets,
  type LogBounds,
  type PartitionReport,
} from '../engine/checkpoint-store.js';
import { JobBinding, topicRecreated } from '../engine/job-binding.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Producer } from '../kafka/producer.js';
import { formatTable } from '../format/table.js';
import { action, connection, withConnection } from './common.js';

const USED = ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'] as const;

/** The topic's log bounds and ID (EO_TOPIC_MISMATCH when it does not exist). */
async function readTopic(config: ConnectionConfig): Promise<{ marks: LogBounds[]; topicId: string | null }> {
  const admin = new KafkaAdmin(config);
  try {
    if ((await admin.partitionCount(config.topic)) === null) {
      throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${config.topic} does not exist at ${config.brokers.join(',')} (--topic)`);
    }
    const [marks, topicId] = await Promise.all([admin.watermarks(config.topic), admin.topicId(config.topic)]);
    return { marks, topicId };
  } finally {
    await admin.close();
  }
}

/** Runs a read of our tables; a keyspace without migration 007 says which command adds it. */
async function reading<T>(config: ConnectionConfig, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    const msg = e instanceof Error ? (e.message.split('\n')[0] ?? '') : String(e);
    if (/unconfigured table|undefined column|does not exist|keyspace .* not/i.test(msg)) {
      throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `keyspace ${config.keyspace} has no checkpoint epochs or partition states yet (${msg}); run \`exactlyonce schema apply\``, { cause: e });
    }
    throw e;
  }
}

async function withSession<T>(config: ConnectionConfig, fn: (session: Client) => Promise<T>): Promise<T> {
  const session = await connect(config, { keyspace: config.keyspace });
  try {
    return await fn(session);
  } finally {
    await session.shutdown();
  }
}

/** A keyspace serves one input topic (src/engine/job-binding.ts): another topic's checkpoints mean nothing here. */
function checkTopic(config: ConnectionConfig, bound: { inputTopic: string } | null): void {
  if (bound !== null && bound.inputTopic !== config.topic) {
    throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `keyspace ${config.keyspace} serves topic ${bound.inputTopic}, not ${config.topic}: use --topic ${bound.inputTopic}, or the keyspace of ${config.topic} (--keyspace)`);
  }
}

const dash = (v: unknown) => (v === null || v === undefined ? '-' : v);

function listLines(rows: readonly PartitionReport[]): string {
  const table = formatTable(
    ['partition', 'checkpoint', 'log start', 'log end', 'lag', 'held', 'epoch', 'owner', 'stopped'],
    rows.map((r) => [r.partition, dash(r.checkpoint), dash(r.logStart), dash(r.logEnd), dash(r.lag), dash(r.held), dash(r.epoch), dash(r.owner), r.stopped?.code ?? '-']),
  );
  const stops = rows
    .filter((r) => r.stopped !== null)
    .map((r) => `partition ${r.partition} stopped${r.stopped!.at === null ? '' : ` at ${r.stopped!.at.toISOString()}`}${r.stopped!.by === null ? '' : ` by ${r.stopped!.by}`}: ${r.stopped!.code}: ${r.stopped!.message}`);
  return [table, `(${rows.length} partition${rows.length === 1 ? '' : 's'})`, ...stops].join('\n') + '\n';
}

function listCommand(): Command {
  return withConnection(
    new Command('list')
      .description(
        'per partition: the checkpoint (next offset to read) and its reset epoch, the log start and end, the lag (to the end of what a read_committed ' +
          'consumer can read, the last stable offset), the records held back by a transaction still open, the worker that owns it, and why it is stopped',
      )
      .option('--json', 'one JSON object per partition and line (offsets as strings)'),
    USED,
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const { marks, topicId } = await readTopic(config);
      const { rows, bound } = await withSession(config, async (session) => {
        const store = new CheckpointStore(session, config.keyspace, config.topic);
        const [stored, states, bound] = await reading(config, () => Promise.all([store.readStored(), store.readStates(), readJob(session, config.keyspace)]));
        checkTopic(config, bound);
        return { rows: partitionReports(marks, stored, states), bound };
      });
      const recreated = bound !== null && topicId !== null && bound.inputTopicId !== topicId;
      if (opts.json === true) {
        for (const r of rows) {
          const str = (v: bigint | null) => (v === null ? null : String(v));
          process.stdout.write(
            JSON.stringify({
              partition: r.partition,
              checkpoint: str(r.checkpoint),
              epoch: r.epoch,
              logStart: str(r.logStart),
              logEnd: str(r.logEnd),
              lag: str(r.lag),
              held: str(r.held),
              owner: r.owner,
              stopped: r.stopped === null ? null : { ...r.stopped, at: r.stopped.at?.toISOString() ?? null },
            }) + '\n',
          );
        }
      } else {
        process.stdout.write(listLines(rows));
      }
      if (recreated) process.stderr.write(`warning ${topicRecreated(config.topic, bound.inputTopicId, topicId).message}\n`);
    }),
  );
}

function resetCommand(): Command {
  return withConnection(
    new Command('reset')
      .description(
        'move checkpoints on purpose (safe while workers run: the reset wins over every late write of an old owner, and the owner resumes there within a few seconds). ' +
          'Records below the new checkpoint are not read again; records from it on are read (again)',
      )
      .addOption(new Option('--partition <p>', 'the partition to reset').argParser(intOption('--partition', 0, 1_000_000)))
      .option('--all', 'every partition of the topic')
      .addOption(new Option('--to <where>', 'earliest (the log start), latest (the log end) or an offset within the log').argParser(parseResetTarget))
      .option('--rebind', "with --all: start the job over on the topic as it is now (after it was deleted and re-created): clears the old topic's rows, quarantine, alert counts and alerts (table and alerts topic), then binds the job to the new topic")
      .option('--dry-run', 'print what would change, change nothing'),
    USED,
  ).action(
    action(async (opts, cmd) => {
      const { partition, to: target } = opts;
      const all = opts.all === true;
      const rebind = opts.rebind === true;
      if (partition === undefined && !all) throw new ExactlyOnceError('EO_USAGE', 'checkpoints reset: give --partition P or --all');
      if (partition !== undefined && all) throw new ExactlyOnceError('EO_USAGE', '--partition and --all: give one of them, not both');
      if (target === undefined) throw new ExactlyOnceError('EO_USAGE', '--to: required: earliest, latest or an offset');
      if (all && typeof target === 'bigint') throw new ExactlyOnceError('EO_USAGE', '--to: an offset is for one --partition; with --all use earliest or latest');
      if (rebind && !all) throw new ExactlyOnceError('EO_USAGE', '--rebind: resets every partition, so it goes with --all');
      const config = connection(cmd);
      const { marks, topicId } = await readTopic(config);
      const partitions = all ? marks.map((m) => m.partition) : [partition!];
      await withSession(config, async (session) => {
        const store = new CheckpointStore(session, config.keyspace, config.topic);
        const [stored, bound] = await reading(config, () => Promise.all([store.readStored(), readJob(session, config.keyspace)]));
        checkTopic(config, bound);
        const plans = planResets(config.topic, partitions, target, marks, stored);
        const recreated = bound !== null && topicId !== null && bound.inputTopicId !== topicId;
        if (recreated && !rebind) {
          // Resetting some partitions of a re-created topic would leave the job bound to the old one,
          // so the workers would keep every partition stopped.
          throw new ExactlyOnceError('EO_TOPIC_RECREATED', `${topicRecreated(config.topic, bound.inputTopicId, topicId).message} (a reset without --rebind is refused)`);
        }
        const out = process.stdout;
        out.write(
          formatTable(
            ['partition', 'checkpoint', 'epoch', 'new checkpoint', 'new epoch', 'log start', 'log end'],
            plans.map((r) => [r.partition, dash(r.from?.next), dash(r.from?.epoch), r.to.next, r.to.epoch, r.logStart, r.logEnd]),
          ) + '\n',
        );
        const rebinding = rebind && bound !== null && topicId !== null && bound.inputTopicId !== topicId;
        // The old topic's outputs go with it (src/app/rebind.ts): verify of the new topic would report them.
        const clears = rebinding ? rebindClears(config.keyspace, bound) : [];
        if (opts.dryRun === true) {
          out.write(`dry run: nothing changed${rebinding ? ` (would also clear the old topic's outputs: ${clears.join(', ')}; and bind the job to topic ID ${topicId})` : ''}\n`);
          return;
        }
        // Checkpoints first, then the old outputs, then the binding: interrupted anywhere, the workers
        // keep the partitions stopped (the job still names the old topic) and running the command
        // again finishes it.
        for (const plan of plans) await store.reset(plan.partition, plan.to.next, plan.from?.epoch ?? 0);
        if (rebinding) {
          const producer = new Producer(config);
          let alerts: number;
          try {
            alerts = await clearForRebind(session, config.keyspace, bound, (topic, records) => producer.send(topic, records));
          } finally {
            await producer.close();
          }
          out.write(`cleared the old topic's outputs: ${clears.join(', ')} (${alerts} alert${alerts === 1 ? '' : 's'})\n`);
          await new JobBinding(session, config.keyspace).rebind(bound.name, topicId, marks.length);
        }
        out.write(
          `reset ${plans.length} partition${plans.length === 1 ? '' : 's'} of ${config.topic}` +
            `${rebinding ? `; the job is bound to topic ID ${topicId} now` : ''}; running workers resume there within a few seconds\n`,
        );
      });
    }),
  );
}

export function checkpointsCommand(): Command {
  return new Command('checkpoints')
    .description('where each partition stands (list) and moving a checkpoint on purpose (reset)')
    .addCommand(listCommand())
    .addCommand(resetCommand());
}
