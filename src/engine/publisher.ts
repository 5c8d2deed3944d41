/**
 * What a job publishes to Kafka (Kafka Streams' RecordCollector): one idempotent producer per worker,
 * created on the first publish, each send retried until the brokers acknowledge it or the worker shuts
 * down.
 */
import type { ConnectionConfig } from '../config.js';
import { Producer } from '../kafka/producer.js';
import type { PublishRecord } from './job.js';

export class Publisher {
  private producer: Producer | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    /** Runs a Kafka call with retries (the Runner's). */
    private readonly retrying: <T>(fn: () => Promise<T>) => Promise<T>,
  ) {}

  /** Resolves when the brokers acknowledged every record. */
  publish(topic: string, records: readonly PublishRecord[]): Promise<void> {
    this.producer ??= new Producer(this.config);
    const producer = this.producer;
    return this.retrying(() => producer.send(topic, records));
  }

  /** Flushes and disconnects. Idempotent. */
  async close(): Promise<void> {
    await this.producer?.close();
  }
}
