import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readTopic } from '../../src/kafka/log-reader.js';
import { connectedProducer, freshTopic, testConfig } from '../helpers.js';

test('records produced with the Kafka client are read back exactly, partition by partition', async (t) => {
  const config = testConfig();
  await freshTopic(t, config, 3);
  const producer = await connectedProducer(t, config);
  const sent = Array.from({ length: 30 }, (_, i) => ({ key: `k${i % 3}`, value: `v${i}`, partition: i % 3 }));
  await producer.send(config.topic, sent);

  const got: Array<{ partition: number; offset: bigint; key: string; value: string }> = [];
  const ends = await readTopic(config, config.topic, (records) => {
    for (const r of records) got.push({ partition: r.partition, offset: r.offset, key: r.key!.toString(), value: r.value!.toString() });
  });
  got.sort((a, b) => a.partition - b.partition || Number(a.offset - b.offset));
  const expected = [0, 1, 2].flatMap((p) =>
    sent.filter((s) => s.partition === p).map((s, i) => ({ partition: p, offset: BigInt(i), key: s.key, value: s.value })),
  );
  assert.deepEqual(got, expected);
  assert.deepEqual([...ends.values()].map((e) => [e.low, e.end, e.read]), [[0n, 10n, 10], [0n, 10n, 10], [0n, 10n, 10]]);
});
