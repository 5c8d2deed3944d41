/**
 * What a job publishes to Kafka (Kafka Streams' RecordCollector): one idempotent producer per worker,
 * created on the first publish, each send retried until the brokers acknowledge it or the worker shuts
 * down — unless the topic is gone (deleted under a running worker): then the send fails with the
 * coded error `missing` gives, which stops the partition at its checkpoint instead of a retry for ever.
 */
import type { ConnectionConfig } from '../config.js';
import { Producer } from '../kafka/producer.js';
import { isExactlyOnceError, type ExactlyOnceError } from '../errors.js';
import type { PublishRecord } from './job.js';

export class Publisher {
  private producer: Producer | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    /** Runs a Kafka call with retries (the Runner's). */
    private readonly retrying: <T>(fn: () => Promise<T>) => Promise<T>,
    /** After a failed send (`cause`): the coded error for `topic` when it does not exist, else undefined. */
    private readonly missing: (topic: string, cause: unknown) => Promise<ExactlyOnceError | undefined> = () => Promise.resolve(undefined),
  ) {}

  /** Resolves when the brokers acknowledged every record. */
  publish(topic: string, records: readonly PublishRecord[]): Promise<void> {
    // No linger: a job publishes a few records per batch and waits for them before its checkpoint, so
    // the producer's default 5 ms linger would be pure wait on the batch's path, there being no later
    // records of the batch to gather (the bench's alerts case shows it in the rows stage per batch).
    // Records sent together are still batched by the client.
    this.producer ??= new Producer(this.config, { 'linger.ms': 0 });
    const producer = this.producer;
    return this.retrying(async () => {
      try {
        await producer.send(topic, records);
      } catch (e) {
        // The client fails sends to a topic it no longer finds (after 30 s, or at its 60 s message
        // timeout) and would keep failing them: asked of the brokers whether the topic is there.
        throw (isExactlyOnceError(e, 'EO_PRODUCE_FAILED') ? await this.missing(topic, e) : undefined) ?? e;
      }
    });
  }

  /** Flushes and disconnects. Idempotent. */
  async close(): Promise<void> {
    await this.producer?.close();
  }
}
