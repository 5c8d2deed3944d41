/**
 * Reads a topic back from its log start up to a fixed end offset per partition (by default the log
 * end at the time of the call), outside any consumer group that does work: a throw-away group id,
 * nothing committed. Used by the auditor and the tests to compare the log with what was stored.
 */
import { randomBytes } from 'node:crypto';
import type { ConnectionConfig } from '../config.js';
import type { SourceRecord } from './record.js';
import { KafkaAdmin } from './admin.js';
import { baseProperties, kafkaJS, quietLogger, type KafkaJSNamespace } from './client.js';

export interface ReadOptions {
  /** Exclusive end offset per partition; default: the log end now. */
  until?: Map<number, bigint>;
  /** Give up when no record arrived for this long although some are still expected, in ms. */
  idleTimeoutMs?: number;
}

/** Calls `onBatch` for each batch, partition by partition in offset order; resolves when all are read. */
export async function readTopic(
  config: ConnectionConfig,
  topic: string,
  onBatch: (records: SourceRecord[]) => void | Promise<void>,
  options: ReadOptions = {},
): Promise<Map<number, { low: bigint; end: bigint; read: number }>> {
  const admin = new KafkaAdmin(config);
  const marks = await admin.watermarks(topic).finally(() => admin.close());
  const ends = new Map(marks.map((w) => [w.partition, { low: w.low, end: options.until?.get(w.partition) ?? w.high, read: 0 }]));
  const pending = new Set([...ends].filter(([, e]) => e.end > e.low).map(([p]) => p));
  if (pending.size === 0) return ends;

  const { Kafka } = kafkaJS();
  const consumer = new Kafka({}).consumer({
    kafkaJS: { logger: quietLogger(() => undefined) },
    ...baseProperties(config, 'exactlyonce-reader'),
    'group.id': `exactlyonce-reader-${randomBytes(6).toString('hex')}`,
    'enable.auto.commit': false,
    'auto.offset.reset': 'earliest',
    'js.consumer.max.batch.size': 5000,
  } as unknown as KafkaJSNamespace.ConsumerConstructorConfig);
  await consumer.connect();
  try {
    await consumer.subscribe({ topics: [topic] });
    let lastProgress = Date.now();
    let failure: unknown;
    let resolveDone!: () => void;
    const done = new Promise<void>((r) => (resolveDone = r));
    await consumer.run({
      partitionsConsumedConcurrently: 4,
      eachBatch: async ({ batch }) => {
        const e = ends.get(batch.partition);
        if (e === undefined || !pending.has(batch.partition)) return;
        const records: SourceRecord[] = [];
        for (const m of batch.messages) {
          const offset = BigInt(m.offset);
          if (offset >= e.end) break;
          records.push({ topic, partition: batch.partition, offset, key: m.key ?? null, value: m.value ?? null, timestampMs: Number(m.timestamp) });
        }
        lastProgress = Date.now();
        try {
          if (records.length > 0) await onBatch(records);
        } catch (err) {
          failure ??= err;
          resolveDone();
        }
        e.read += records.length;
        const last = BigInt(batch.messages[batch.messages.length - 1]!.offset);
        if (last + 1n >= e.end) {
          pending.delete(batch.partition);
          if (pending.size === 0) resolveDone();
        }
      },
    });
    const idle = options.idleTimeoutMs ?? 30_000;
    const timer = setInterval(() => {
      // The last offsets below the end may be transaction markers, which are never delivered.
      if (Date.now() - lastProgress > idle) resolveDone();
    }, 250);
    await done.finally(() => clearInterval(timer));
    if (failure !== undefined) throw failure;
    return ends;
  } finally {
    await consumer.disconnect().catch(() => undefined);
  }
}
