/**
 * An idempotent producer (enable.idempotence: no duplicates or reordering from the client's own
 * retries; acks=all). `send` resolves when the broker has acknowledged every record given.
 */
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { baseProperties, kafkaJS, quietLogger, type KafkaJSNamespace } from './client.js';

export interface OutgoingRecord {
  key: Buffer | string | null;
  value: Buffer | string | null;
  partition?: number;
  /** Record timestamp, epoch ms (default: now). */
  timestampMs?: number;
}

export class Producer {
  private readonly producer: KafkaJSNamespace.Producer;
  private connected = false;
  private closed: Promise<void> | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    extra: Record<string, string | number | boolean> = {},
  ) {
    const { Kafka } = kafkaJS();
    this.producer = new Kafka({}).producer({
      kafkaJS: { logger: quietLogger(() => undefined) },
      ...baseProperties(config, `exactlyonce-producer-${process.pid}`),
      'enable.idempotence': true,
      acks: -1,
      'linger.ms': 5,
      'compression.type': 'lz4',
      // A send that cannot complete fails after this long instead of hanging.
      'message.timeout.ms': 60_000,
      ...extra,
    } as unknown as KafkaJSNamespace.ProducerConstructorConfig);
  }

  async connect(): Promise<void> {
    if (this.connected) return;
    try {
      await this.producer.connect();
      this.connected = true;
    } catch (e) {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka at ${this.config.brokers.join(',')} did not answer; is the stack up? run \`exactlyonce stack up\``, { cause: e });
    }
  }

  async send(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    try {
      await this.producer.send({
        topic,
        messages: records.map((r) => ({
          key: r.key,
          value: r.value,
          ...(r.partition === undefined ? {} : { partition: r.partition }),
          ...(r.timestampMs === undefined ? {} : { timestamp: String(r.timestampMs) }),
        })),
      });
    } catch (e) {
      throw new ExactlyOnceError('EO_PRODUCE_FAILED', `sending to ${topic} failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /** Flushes and disconnects. Idempotent. */
  close(): Promise<void> {
    this.closed ??= this.connected ? this.producer.disconnect().catch(() => undefined) : Promise.resolve();
    return this.closed;
  }
}
