/**
 * What the topic identity check costs on its own: the metadata request a worker makes before writing
 * each batch (src/engine/identity-gate.ts: `KafkaAdmin.topicId`), timed back to back
 * on an otherwise idle client. Set beside the `identity` stage of a loaded worker (bench, "where a
 * batch's wall time goes"), the difference is the worker's event loop, busy with other partitions.
 *
 *   node --import tsx bench/identity-check.ts [--brokers localhost:9092] [--calls 200]
 */
import { loadConnectionConfig } from '../src/config.js';
import { KafkaAdmin } from '../src/kafka/admin.js';

const arg = (name: string, d: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : d;
};
const calls = Number(arg('calls', '200'));
const topic = `eo-identity-check-${process.pid}`;
const admin = new KafkaAdmin(loadConnectionConfig({ brokers: arg('brokers', 'localhost:9092') } as never));
try {
  await admin.ensureTopic({ topic, partitions: 6, replicationFactor: 1 });
  await admin.topicId(topic); // connected, metadata cached by the broker
  const ms: number[] = [];
  for (let i = 0; i < calls; i++) {
    const t = performance.now();
    await admin.topicId(topic);
    ms.push(performance.now() - t);
  }
  ms.sort((a, b) => a - b);
  const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(2);
  process.stdout.write(`topicId, ${calls} calls back to back: p50 ${q(0.5)} ms, p90 ${q(0.9)} ms, p99 ${q(0.99)} ms, max ${q(1)} ms\n`);
} finally {
  await admin.deleteTopic(topic).catch(() => undefined);
  await admin.close();
}
