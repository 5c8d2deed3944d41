// Alert latency (issue 4), run with: node --import tsx bench/alert-latency.ts (stack up).
// Light load: one worker; every 2 s, 10 Critical events of a fresh source within one window are sent;
// measures produce-ack of the 10th (threshold-crossing) event → alert row visible in Cassandra.
import { spawn } from 'node:child_process';
import { connect } from '../src/cassandra/session.js';
import { applySchema } from '../src/cassandra/migrate.js';
import { loadConnectionConfig } from '../src/config.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { Producer } from '../src/kafka/producer.js';
import { encodeEvent } from '../src/jobs/events/event.js';
import { sleep } from '../src/harness/sleep.js';
const s = Math.random().toString(16).slice(2, 8);
const config = loadConnectionConfig({ brokers: '127.0.0.1:9092', cassandra: '127.0.0.1', keyspace: `lat${s}`, topic: `lat-${s}`, alertsTopic: `lat-a-${s}`, group: `lat-${s}` }, {});
const session = await connect(config);
await applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
const admin = new KafkaAdmin(config);
await admin.ensureTopic({ topic: config.topic, partitions: 3, replicationFactor: 1 });
await admin.ensureTopic({ topic: config.alertsTopic, partitions: 3, replicationFactor: 1 });
const w = spawn(new URL('../bin/exactlyonce', import.meta.url).pathname, ['run', '--brokers', '127.0.0.1:9092', '--cassandra', '127.0.0.1', '--keyspace', config.keyspace, '--topic', config.topic, '--alerts-topic', config.alertsTopic, '--group', config.group], { stdio: 'ignore' });
await sleep(6000);
const p = new Producer(config); await p.connect();
const lat: number[] = [];
for (let round = 0; round < 15; round++) {
  const src = `src-${round}`;
  const now = Date.now();
  const ts = Math.floor(now / 5000) * 5000 + 100;
  for (let i = 0; i < 9; i++) await p.send(config.topic, [{ key: 'c', value: encodeEvent({ id: BigInt(round * 100 + i), ts, source: src, client: 'c', health: 2 }) }]);
  await sleep(300);
  await p.send(config.topic, [{ key: 'c', value: encodeEvent({ id: BigInt(round * 100 + 9), ts, source: src, client: 'c', health: 2 }) }]);
  const t0 = performance.now();
  for (;;) {
    const r = await session.execute(`SELECT event_count FROM ${config.keyspace}.alerts WHERE source = ?`, [src], { prepare: true });
    if (r.rowLength > 0) break;
    await sleep(5);
  }
  lat.push(performance.now() - t0);
  await sleep(1500);
}
lat.sort((a, b) => a - b);
console.log('alert visible after threshold-crossing event acked, ms: p50', lat[7]!.toFixed(0), 'max', lat[14]!.toFixed(0), 'all', lat.map((x) => x.toFixed(0)).join(','));
w.kill('SIGTERM'); await p.close(); await admin.deleteTopic(config.topic); await admin.deleteTopic(config.alertsTopic); await admin.close();
await session.execute(`DROP KEYSPACE ${config.keyspace}`); await session.shutdown();
