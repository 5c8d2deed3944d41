/**
 * Loads @confluentinc/kafka-javascript (a native addon built by scripts/install-deps.sh) and turns our
 * ConnectionConfig into librdkafka properties. Every Kafka object of the project is made here.
 */
import { createRequire } from 'node:module';
import type { KafkaJS as KafkaJSNamespace } from '@confluentinc/kafka-javascript';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';

export type KafkaJS = typeof KafkaJSNamespace;
export type { KafkaJSNamespace };

let loaded: KafkaJS | undefined;

/** The client's KafkaJS-style API, or EO_KAFKA_CLIENT_MISSING when its native part is not built. */
export function kafkaJS(): KafkaJS {
  if (loaded === undefined) {
    try {
      const require = createRequire(import.meta.url);
      loaded = (require('@confluentinc/kafka-javascript') as { KafkaJS: KafkaJS }).KafkaJS;
    } catch (e) {
      throw new ExactlyOnceError(
        'EO_KAFKA_CLIENT_MISSING',
        'the Kafka client @confluentinc/kafka-javascript is not built; run `make deps` (or scripts/install-deps.sh)',
        { cause: e },
      );
    }
  }
  return loaded;
}

/** librdkafka properties common to producers, consumers and admin clients. */
export function baseProperties(config: ConnectionConfig, clientId: string): Record<string, string | number | boolean> {
  return {
    'bootstrap.servers': config.brokers.join(','),
    'client.id': clientId,
    // librdkafka logs connection failures itself on every retry; we report availability ourselves.
    log_level: 3,
    ...config.kafkaConfig,
  };
}

/** A KafkaJS-style logger that forwards the client's own log lines to ours at reduced volume. */
export function quietLogger(sink: (level: 'warn' | 'error', message: string) => void): KafkaJSNamespace.Logger {
  const noop = () => undefined;
  const self: KafkaJSNamespace.Logger = {
    info: noop,
    debug: noop,
    warn: (message: string) => sink('warn', message),
    error: (message: string) => sink('error', message),
    namespace: () => self,
    setLogLevel: noop,
  } as unknown as KafkaJSNamespace.Logger;
  return self;
}

export function kafkaUnavailable(config: ConnectionConfig, cause: unknown): ExactlyOnceError {
  const msg = cause instanceof Error ? cause.message.split('\n')[0] : String(cause);
  return new ExactlyOnceError(
    'EO_KAFKA_UNAVAILABLE',
    `Kafka at ${config.brokers.join(',')} did not answer (${msg}); is the stack up? run \`exactlyonce stack up\``,
    { cause },
  );
}
