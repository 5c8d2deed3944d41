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
      .description('create the events topic (idempotent; warns when it exists with another partition count)')
      .addOption(new Option('--partitions <n>', 'partition count').default(3).argParser(intOption('--partitions', 1, 10000)))
      .addOption(new Option('--replication-factor <n>', 'replicas per partition').default(1).argParser(intOption('--replication-factor', 1, 32))),
    ['brokers', 'topic', 'kafkaConfig'],
  ).action(
    action(async (opts: Record<string, unknown>) => {
      const config = connection(opts);
      const admin = new KafkaAdmin(config);
      try {
        const partitions = opts['partitions'] as number;
        const r = await admin.ensureTopic({ topic: config.topic, partitions, replicationFactor: opts['replicationFactor'] as number });
        if (r.created) {
          process.stdout.write(`created topic ${config.topic} with ${partitions} partitions\n`);
        } else if (r.partitions !== partitions) {
          process.stderr.write(
            `warning: topic ${config.topic} already exists with ${r.partitions} partitions, not ${partitions}; left as it is\n`,
          );
        } else {
          process.stdout.write(`topic ${config.topic} already exists with ${r.partitions} partitions\n`);
        }
      } finally {
        await admin.close();
      }
    }),
  );
  return topic;
}
