/** `exactlyonce status [--json]`: every job of the keyspace on one screen (src/operate/status.ts gathers it); parses and prints. */
import { Command } from '@commander-js/extra-typings';
import { connect } from '../cassandra/session.js';
import { formatTable } from '../text-table.js';
import { jobStatusJson, readStatus, type JobStatus } from '../operate/status.js';
import { action, connection, withConnection } from './common.js';

const dash = (v: unknown) => (v === null || v === undefined ? '-' : v);

function verifyLine(s: JobStatus): string {
  const v = s.lastVerify;
  if (v === null) return `last verify: none recorded (run \`exactlyonce verify${s.name === 'events' ? '' : ' --job <its module or sink config>'}\`)`;
  const violations = Object.entries((v.summary['violations'] as Record<string, number> | undefined) ?? {}).map(([k, n]) => `${n} ${k}`);
  return `last verify: ${v.ok ? 'held' : 'FAILED'}${v.at === null ? '' : ` at ${v.at.toISOString()}`}, ${String(v.summary['records'] ?? '?')} records${violations.length === 0 ? '' : `; ${violations.join(', ')}`}`;
}

function jobText(s: JobStatus): string {
  const quarantined = Object.entries(s.quarantine).sort(([a], [b]) => a.localeCompare(b));
  const lines = [
    `job ${s.name}: topic ${s.topic}, ${s.partitions.length} partition${s.partitions.length === 1 ? '' : 's'}, lag ${s.lag}, ${s.stopped.length} stopped, workers ${s.workers.length === 0 ? 'none' : s.workers.join(', ')}`,
    ...(s.topicProblem === null ? [] : [`  ${s.topicProblem}`]),
    ...formatTable(
      ['partition', 'checkpoint', 'log end', 'lag', 'epoch', 'owner', 'stopped'],
      s.partitions.map((r) => [r.partition, dash(r.checkpoint), dash(r.logEnd), dash(r.lag), dash(r.epoch), dash(r.owner), r.stopped?.code ?? '-']),
    )
      .split('\n')
      .map((l) => `  ${l}`),
    ...s.stopped.flatMap((p) => [`  partition ${p.partition} stopped, ${p.code}: ${p.message}`, `    to get it going: ${p.fix}`]),
    `  quarantine: ${quarantined.length === 0 ? 'empty' : quarantined.map(([r, n]) => `${n} ${r}`).join(', ')}`,
    `  ${verifyLine(s)}`,
  ];
  return lines.join('\n');
}

export function statusCommand(): Command {
  return withConnection(
    new Command('status')
      .description('every job of the keyspace on one screen: its workers, lag per partition, stopped partitions with their code and the command that gets them going, quarantine counts by reason, the last verify')
      .option('--json', 'one JSON object: { keyspace, jobs: [...] } (offsets as strings)'),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (_opts, cmd) => {
      const config = connection(cmd);
      const session = await connect(config, { keyspace: config.keyspace });
      let jobs: JobStatus[];
      try {
        jobs = await readStatus(config, session);
      } finally {
        await session.shutdown();
      }
      if (_opts.json === true) {
        process.stdout.write(JSON.stringify({ keyspace: config.keyspace, jobs: jobs.map(jobStatusJson) }) + '\n');
        return;
      }
      const head = `keyspace ${config.keyspace}: ${jobs.length === 0 ? 'no job has run yet' : `${jobs.length} job${jobs.length === 1 ? '' : 's'}`}`;
      process.stdout.write([head, ...jobs.map(jobText)].join('\n\n') + '\n');
    }),
  );
}
