/**
 * `exactlyonce topic create`: the events topic and the compacted alerts topic (or only --topic, a sink's),
 * through the Admin API; `topic produce`: a record or a few, for a first try of a sink.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { Producer } from '../kafka/producer.js';
import { localCluster } from '../stack/cluster.js';
import { action, connection, withConnection } from './common.js';

const partitionCount = (n: number) => `${n} partition${n === 1 ? '' : 's'}`;

export function topicCommand(): Command {
  const topic = new Command('topic').description('Kafka topics');
  withConnection(
    topic
      .command('create')
      .description(
        'create the events topic and the compacted alerts topic (idempotent): one line per topic, created or already there; warns when one exists with another partition count or replication factor',
      )
      .addOption(new Option('--partitions <n>', 'partition count').default(3).argParser(intOption('--partitions', 1, 10000)))
      .option('--no-alerts', "only the --topic (a sink's or your job's input), not the events job's alerts topic")
      .option('--compacted', "with --no-alerts: the --topic is compacted (an aggregate sink's closedTopic, whose latest message per key is the window)")
      .addOption(new Option('--replication-factor <n>', 'replicas per partition (on a local cluster stack: its broker count, up to 3)').default(localCluster()?.topicReplication ?? 1).argParser(intOption('--replication-factor', 1, 32))),
    ['brokers', 'topic', 'alertsTopic', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      if (opts.compacted === true && opts.alerts) throw new ExactlyOnceError('EO_USAGE', '--compacted: only with --no-alerts (the alerts topic is always compacted, the events topic never)');
      const admin = new KafkaAdmin(config);
      try {
        const { partitions, replicationFactor } = opts;
        // The alerts topic is compacted: its latest message per key (source + window) is the alert.
        const topics = [
          { role: 'events', topic: config.topic, compacted: opts.compacted === true && !opts.alerts },
          { role: 'alerts', topic: config.alertsTopic, compacted: true },
        ];
        for (const { role, topic, compacted } of opts.alerts ? topics : topics.slice(0, 1)) {
          const configs: Record<string, string> = compacted ? { 'cleanup.policy': 'compact' } : {};
          const r = await admin.ensureTopic({ topic, partitions, replicationFactor, configs });
          const name = opts.alerts ? `${role} topic ${topic}` : `topic ${topic}`;
          const rf = `replication factor ${r.replicationFactor}`;
          if (r.created) {
            process.stdout.write(`${name}: created, ${partitionCount(r.partitions)}, ${rf}, ${compacted ? 'compacted' : 'not compacted'}\n`);
            continue;
          }
          // The client cannot read an existing topic's configs, so its cleanup policy is not checked.
          const differs = r.partitions !== partitions || r.replicationFactor !== replicationFactor;
          const found =
            `${partitionCount(r.partitions)}${r.partitions === partitions ? '' : ` (not ${partitions})`}, ` +
            `${rf}${r.replicationFactor === replicationFactor ? '' : ` (not ${replicationFactor})`}, compaction not checked`;
          if (differs) process.stderr.write(`warning: ${name}: already exists, ${found}; left as it is\n`);
          else process.stdout.write(`${name}: already exists, ${found}\n`);
        }
      } finally {
        await admin.close();
      }
    }),
  );
  withConnection(
    topic
      .command('produce')
      .description("send records to --topic, each VALUE one record with the key --key; prints each record's partition and offset")
      .argument('<value...>', 'the record values, e.g. a JSON object')
      .option('--key <key>', 'the record key: for an upsert sink the key\'s canonical text (docs/sinks.md, "Log and upsert modes")'),
    ['brokers', 'topic', 'kafkaConfig'],
  ).action(
    action(async (values, opts, cmd) => {
      const config = connection(cmd);
      const producer = new Producer(config);
      const delivered: string[] = [];
      producer.onDelivered = (t, p, o) => delivered.push(`${t} partition ${p} offset ${o}`);
      try {
        await producer.send(config.topic, values.map((value) => ({ key: opts.key ?? null, value })));
      } finally {
        await producer.close();
      }
      for (const d of delivered) process.stdout.write(`produced to ${d}\n`);
    }),
  );
  return topic;
}
