/**
 * Loads @confluentinc/kafka-javascript (a native addon built by scripts/kafka-client.sh: `exactlyonce
 * setup` in a project, `make deps` in a clone) and turns our
 * ConnectionConfig into librdkafka properties. Every Kafka object of the project is made here.
 */
import { createRequire } from 'node:module';
import type { KafkaJS as KafkaJSNamespace } from '@confluentinc/kafka-javascript';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { setupCommand } from '../package-root.js';
import { isSecretProperty, redact } from '../secrets.js';

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
        `the Kafka client @confluentinc/kafka-javascript does not load (${String((e as Error).message ?? e).split('\n')[0]!.slice(0, 200)}): its native part is not built; run \`${setupCommand}\``,
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

/** librdkafka's log wording for a refusal no retry changes (it keeps retrying them itself). */
const REFUSAL = /SASL authentication (error|failed)|SSL handshake failed|certificate verify failed|(Topic|Group|Cluster|Transactional ?Id) authori[sz]ation failed/i;

/** The last refusal a client of this process logged, and when. */
let lastRefusal: { message: string; at: number } | undefined;

/**
 * The refusal a client logged in the last `maxAgeMs` (librdkafka retries a failed login or handshake
 * itself and only logs why; the call that gives up says no more than "Broker transport failure").
 */
export function recentRefusal(maxAgeMs = 120_000): string | undefined {
  return lastRefusal !== undefined && Date.now() - lastRefusal.at <= maxAgeMs ? lastRefusal.message : undefined;
}

/** A client log line without librdkafka's thread prefix (`[thrd:…]: sasl_ssl://host:port/bootstrap: `). */
function cleanLogLine(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/^\[thrd:[^\]]*\]:\s*/, '').replace(/^\S+:\/\/\S+?: /, '');
}

/** A KafkaJS-style logger that forwards the client's own log lines to ours at reduced volume. */
export function quietLogger(sink: (level: 'warn' | 'error', message: string) => void): KafkaJSNamespace.Logger {
  const noop = () => undefined;
  const self: KafkaJSNamespace.Logger = {
    info: noop,
    debug: noop,
    warn: (message: string) => sink('warn', message),
    error: (message: string) => {
      if (REFUSAL.test(message)) lastRefusal = { message: cleanLogLine(message.replace(/^.*Error details: /s, '')), at: Date.now() };
      sink('error', message);
    },
    namespace: () => self,
    setLogLevel: noop,
  } as unknown as KafkaJSNamespace.Logger;
  return self;
}

/** The secret values among the Kafka properties, to scrub from anything printed. */
export function kafkaSecrets(config: ConnectionConfig): string[] {
  return Object.entries(config.kafkaConfig).filter(([k]) => isSecretProperty(k)).map(([, v]) => v);
}

/**
 * A refusal no retry can change, from the client's error or one of its log lines, in one line naming
 * what to fix: SASL credentials, the broker's certificate, a missing ACL. Undefined for anything else.
 * librdkafka codes: ERR__AUTHENTICATION -169, ERR_SASL_AUTHENTICATION_FAILED 58, ERR__SSL -181,
 * ERR_TOPIC/GROUP/CLUSTER/TRANSACTIONAL_ID_AUTHORIZATION_FAILED 29/30/31/53
 * (https://github.com/confluentinc/librdkafka/blob/master/src/rdkafka.h).
 */
export function kafkaSecurityError(config: ConnectionConfig, cause: unknown): ExactlyOnceError | undefined {
  if (cause instanceof ExactlyOnceError) return undefined;
  const where = config.brokers.join(',');
  const text = cause instanceof Error ? cause.message : String(cause);
  const msg = redact(cleanLogLine(text), kafkaSecrets(config)).slice(0, 300);
  const code = (cause as { code?: unknown } | undefined)?.code;
  const user = config.kafkaConfig['sasl.username'];
  if (code === -169 || code === 58 || /SASL authentication (error|failed)|Authentication failed/i.test(text)) {
    return new ExactlyOnceError(
      'EO_KAFKA_AUTH_FAILED',
      `Kafka at ${where} refused the login${user === undefined ? '' : ` of '${user}'`} (${msg}); check sasl.username, sasl.password and sasl.mechanisms in --kafka-config-file (or EXACTLYONCE_KAFKA_CONFIG)`,
      { cause },
    );
  }
  // A handshake cut short (the broker starting or going away: "connection reset by peer",
  // "Disconnected") is transient, not a refusal: only a certificate the client rejected is.
  if ((code === -181 || /SSL handshake failed/i.test(text)) && /certificate|unknown ca|self[- ]signed|unable to get (local )?issuer|hostname/i.test(text) && !/connection reset|Disconnected/i.test(text)) {
    return new ExactlyOnceError(
      'EO_TLS_UNTRUSTED',
      `Kafka at ${where}: the TLS handshake failed (${msg}); give the CA that signed the broker's certificate as ssl.ca.location in --kafka-config-file`,
      { cause },
    );
  }
  const denied = /(Topic|Group|Cluster|Transactional ?Id)[ _]?authori[sz]ation failed/i.exec(text);
  if (code === 29 || code === 30 || code === 31 || code === 53 || denied !== null) {
    const what = denied?.[1]?.toLowerCase() ?? { 29: 'topic', 30: 'group', 31: 'cluster', 53: 'transactional id' }[code as number] ?? 'resource';
    const said = /Broker: [^:]*authori[sz]ation failed/i.exec(text)?.[0] ?? msg;
    const target = what === 'topic' ? `topic ${config.topic}` : what === 'group' ? `group ${config.group}` : what;
    return new ExactlyOnceError(
      'EO_NOT_AUTHORIZED',
      `Kafka at ${where} refused ${user === undefined ? 'this client' : `'${user}'`} access to the ${target} (${said}); add an ACL for it (kafka-acls --add --allow-principal User:${user ?? '<user>'} …)`,
      { cause },
    );
  }
  return undefined;
}

export function kafkaUnavailable(config: ConnectionConfig, cause: unknown): ExactlyOnceError {
  const recent = recentRefusal();
  const secure = kafkaSecurityError(config, cause) ?? (recent === undefined ? undefined : kafkaSecurityError(config, Object.assign(new Error(recent), { cause })));
  if (secure !== undefined) return secure;
  const msg = redact(cause instanceof Error ? cause.message.split('\n')[0] ?? '' : String(cause), kafkaSecrets(config));
  return new ExactlyOnceError(
    'EO_KAFKA_UNAVAILABLE',
    `Kafka at ${config.brokers.join(',')} did not answer (${msg}); is the stack up? run \`exactlyonce stack up\``,
    { cause },
  );
}
