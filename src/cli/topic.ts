/** `exactlyonce topic create`: the events topic through the Admin API. */
import { Command, Option } from 'commander';
import { intOption } from '../config.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { action, connection, withConnection } from './common.js';

export function topicCommand(): Command {
  const topic = new Command('topic').description('Kafka topics');
  withConnection(
    topic
      .command('create')
      .description('create the events topic and the compacted alerts topic (idempotent; warns when one exists with another partition count)')
      .addOption(new Option('--partitions <n>', 'partition count').default(3).argParser(intOption('--partitions', 1, 10000)))
      .addOption(new Option('--replication-factor <n>', 'replicas per partition').default(1).argParser(intOption('--replication-factor', 1, 32))),
    ['brokers', 'topic', 'alertsTopic', 'kafkaConfig'],
  ).action(
    action(async (opts: Record<string, unknown>) => {
      const config = connection(opts);
      const admin = new KafkaAdmin(config);
      try {
        const partitions = opts['partitions'] as number;
        const replicationFactor = opts['replicationFactor'] as number;
        // The alerts topic is compacted: its latest message per key (source + window) is the alert.
        const topics: Array<{ topic: string; configs: Record<string, string> }> = [
          { topic: config.topic, configs: {} },
          { topic: config.alertsTopic, configs: { 'cleanup.policy': 'compact' } },
        ];
        for (const { topic, configs } of topics) {
          const r = await admin.ensureTopic({ topic, partitions, replicationFactor, configs });
          if (r.created) {
            process.stdout.write(`created topic ${topic} with ${partitions} partitions\n`);
          } else if (r.partitions !== partitions) {
            process.stderr.write(`warning: topic ${topic} already exists with ${r.partitions} partitions, not ${partitions}; left as it is\n`);
          } else {
            process.stdout.write(`topic ${topic} already exists with ${r.partitions} partitions\n`);
          }
        }
      } finally {
        await admin.close();
      }
    }),
  );
  return topic;
}
