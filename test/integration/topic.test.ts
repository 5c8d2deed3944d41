import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BROKERS, runCli, testConfig, topicsAdmin } from '../helpers.js';

test('topic create says which topics it creates, is idempotent, and warns about a different partition count or replication factor', async (t) => {
  const config = testConfig();
  const admin = topicsAdmin(t, config, [config.topic, config.alertsTopic]);
  const args = ['topic', 'create', '--brokers', BROKERS, '--topic', config.topic, '--alerts-topic', config.alertsTopic];

  // A replication factor the single-broker stack cannot give: Kafka's reason, one line, nothing created.
  const refused = await runCli([...args, '--replication-factor', '2']);
  assert.equal(refused.code, 2);
  assert.equal(
    refused.stderr,
    `error EO_CONFIG_INVALID: Kafka refused to create topic ${config.topic}: Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached because only 1 broker(s) are registered. (ERR_INVALID_REPLICATION_FACTOR)\n`,
  );
  assert.equal(await admin.partitionCount(config.topic), null);

  const first = await runCli([...args, '--partitions', '3']);
  assert.equal(first.code, 0, first.stderr);
  assert.equal(
    first.stdout,
    `events topic ${config.topic}: created, 3 partitions, replication factor 1, not compacted\n` +
      `alerts topic ${config.alertsTopic}: created, 3 partitions, replication factor 1, compacted\n`,
  );
  assert.equal(first.stderr, '');
  assert.deepEqual(await admin.describeTopic(config.topic), { partitions: 3, replicationFactor: 1 });
  assert.deepEqual(await admin.describeTopic(config.alertsTopic), { partitions: 3, replicationFactor: 1 });

  const second = await runCli([...args, '--partitions', '3']);
  assert.equal(second.code, 0, second.stderr);
  assert.equal(
    second.stdout,
    `events topic ${config.topic}: already exists, 3 partitions, replication factor 1, compaction not checked\n` +
      `alerts topic ${config.alertsTopic}: already exists, 3 partitions, replication factor 1, compaction not checked\n`,
  );
  assert.equal(second.stderr, '');

  const other = await runCli([...args, '--partitions', '5', '--replication-factor', '2']);
  assert.equal(other.code, 0);
  assert.equal(other.stdout, '');
  assert.equal(
    other.stderr,
    `warning: events topic ${config.topic}: already exists, 3 partitions (not 5), replication factor 1 (not 2), compaction not checked; left as it is\n` +
      `warning: alerts topic ${config.alertsTopic}: already exists, 3 partitions (not 5), replication factor 1 (not 2), compaction not checked; left as it is\n`,
  );
  assert.equal(await admin.partitionCount(config.topic), 3);
});
