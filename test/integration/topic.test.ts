import assert from 'node:assert/strict';
import { test } from 'node:test';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { runCli, testConfig } from '../helpers.js';

test('topic create is idempotent and warns about a different partition count', async (t) => {
  const config = testConfig();
  const admin = new KafkaAdmin(config);
  t.after(async () => {
    await admin.deleteTopic(config.topic).catch(() => undefined);
    await admin.deleteTopic(config.alertsTopic).catch(() => undefined);
    await admin.close();
  });
  const args = ['topic', 'create', '--brokers', '127.0.0.1:9092', '--topic', config.topic, '--alerts-topic', config.alertsTopic];
  const first = await runCli([...args, '--partitions', '3']);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(first.stdout, `created topic ${config.topic} with 3 partitions\ncreated topic ${config.alertsTopic} with 3 partitions\n`);
  assert.equal(await admin.partitionCount(config.topic), 3);

  const second = await runCli([...args, '--partitions', '3']);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(second.stdout, `topic ${config.topic} already exists with 3 partitions\ntopic ${config.alertsTopic} already exists with 3 partitions\n`);

  const other = await runCli([...args, '--partitions', '5']);
  assert.equal(other.code, 0);
  assert.equal(
    other.stderr,
    `warning: topic ${config.topic} already exists with 3 partitions, not 5; left as it is\n` +
      `warning: topic ${config.alertsTopic} already exists with 3 partitions, not 5; left as it is\n`,
  );
  assert.equal(await admin.partitionCount(config.topic), 3);
});
