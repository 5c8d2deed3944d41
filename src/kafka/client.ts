/**
 * Loads @confluentinc/kafka-javascript (a native addon built by scripts/kafka-client.sh: `exactlyonce
 * setup` in a project, `make deps` in a clone) and turns our
 * ConnectionConfig into librdkafka properties. Every Kafka object of the project is made here.
 */
import { createRequire } from 'node:module';
import type { KafkaJS as KafkaJSNamespace, Producer as NativeProducer } from '@confluentinc/kafka-javascript';
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { setupCommand } from '../package-root.js';
import { isSecretProperty, redact } from '../secrets.js';
import { settleWithin } from '../deadline.js';

export type KafkaJS = typeof KafkaJSNamespace;
export type { KafkaJSNamespace };

let loaded: { KafkaJS: KafkaJS; Producer: typeof NativeProducer } | undefined;

/** The client's KafkaJS-style API, or EO_KAFKA_CLIENT_MISSING when its native part is not built. */
export function kafkaJS(): KafkaJS {
  return clientModule().KafkaJS;
}

/** The client's own (node-rdkafka style) producer: its connect() takes a deadline for its first metadata request. */
export function nativeProducer(): typeof NativeProducer {
  return clientModule().Producer;
}

function clientModule(): NonNullable<typeof loaded> {
  if (loaded === undefined) {
    try {
      const require = createRequire(import.meta.url);
      loaded = require('@confluentinc/kafka-javascript') as NonNullable<typeof loaded>;
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

/**
 * Clients still closing after their owner let go of them. A connection attempt given up early (a
 * refusal, or our own deadline, ended it first) can be disconnected only once the client's own connect
 * settles, up to 30 s later. A process that exits meanwhile waits for that native call anyway, then
 * tears down the process under librdkafka's live threads (a SIGSEGV at exit, about one run in five
 * after a refused TLS handshake): each of our process.exit calls awaits kafkaClientsClosed() first.
 */
const closing = new Set<Promise<unknown>>();

/** Tracks a client's disconnect that nobody awaits (see kafkaClientsClosed). */
export function closeInBackground(disconnected: Promise<unknown>): void {
  const tracked: Promise<unknown> = disconnected.catch(() => undefined).finally(() => closing.delete(tracked));
  closing.add(tracked);
}

/** Resolves once every client closing in the background is closed, or after `deadlineMs`. */
export async function kafkaClientsClosed(deadlineMs = 45_000): Promise<void> {
  if (closing.size === 0) return;
  await settleWithin(Promise.all(closing).then(() => undefined), deadlineMs, () => undefined);
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

/**
 * The librdkafka error codes we act on (rdkafka.h; the client exports the same table as
 * `KafkaJS.ErrorCodes`, and test/unit/kafka-errors.test.ts checks that they agree). Errors are judged
 * by these codes, never by their wording: the client's errors carry them (`code` on a KafkaJSError,
 * and on the LibrdKafkaError of its `event.error` events and failed fetches, tapped in
 * src/kafka/consumer.ts); its log lines are only ever shown, not parsed.
 */
export const KAFKA_ERROR_CODES = {
  /** A broker connection failed or broke (also a TLS handshake cut short: librdkafka says so itself). */
  ERR__TRANSPORT: -195,
  /** A broker's host name did not resolve. */
  ERR__RESOLVE: -193,
  /** No broker answers. */
  ERR__ALL_BROKERS_DOWN: -187,
  /** TLS: the broker's certificate was not trusted, or none was given (handshake disconnects are ERR__TRANSPORT). */
  ERR__SSL: -181,
  /** SASL: the login was refused by the client's own checks or the broker. */
  ERR__AUTHENTICATION: -169,
  /** The fetch position is outside the log, and auto.offset.reset=error forbids moving it. */
  ERR__AUTO_OFFSET_RESET: -140,
  ERR_OFFSET_OUT_OF_RANGE: 1,
  ERR_TOPIC_AUTHORIZATION_FAILED: 29,
  ERR_GROUP_AUTHORIZATION_FAILED: 30,
  ERR_CLUSTER_AUTHORIZATION_FAILED: 31,
  ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED: 53,
  ERR_SASL_AUTHENTICATION_FAILED: 58,
} as const;

const C = KAFKA_ERROR_CODES;

/** What an error of the Kafka client means to us, from its librdkafka code. */
export type KafkaErrorKind =
  | { kind: 'login-refused' }
  | { kind: 'tls-untrusted' }
  | { kind: 'not-authorized'; resource: 'topic' | 'group' | 'cluster' | 'transactional id' }
  | { kind: 'unreachable' }
  | { kind: 'out-of-range' };

/** The kind of a librdkafka error code; undefined for every other code (judged by `retriable`, src/engine/retry.ts). */
export function kafkaErrorKind(code: unknown): KafkaErrorKind | undefined {
  switch (code) {
    case C.ERR__AUTHENTICATION:
    case C.ERR_SASL_AUTHENTICATION_FAILED:
      return { kind: 'login-refused' };
    case C.ERR__SSL:
      return { kind: 'tls-untrusted' };
    case C.ERR_TOPIC_AUTHORIZATION_FAILED:
      return { kind: 'not-authorized', resource: 'topic' };
    case C.ERR_GROUP_AUTHORIZATION_FAILED:
      return { kind: 'not-authorized', resource: 'group' };
    case C.ERR_CLUSTER_AUTHORIZATION_FAILED:
      return { kind: 'not-authorized', resource: 'cluster' };
    case C.ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return { kind: 'not-authorized', resource: 'transactional id' };
    case C.ERR__TRANSPORT:
    case C.ERR__RESOLVE:
    case C.ERR__ALL_BROKERS_DOWN:
      return { kind: 'unreachable' };
    case C.ERR__AUTO_OFFSET_RESET:
    case C.ERR_OFFSET_OUT_OF_RANGE:
      return { kind: 'out-of-range' };
    default:
      return undefined;
  }
}

/** The librdkafka code an error of the Kafka client carries (its own, or its cause's), if any. */
export function kafkaErrorCode(e: unknown): number | undefined {
  for (let x: unknown = e, depth = 0; x !== null && typeof x === 'object' && depth < 3; x = (x as { cause?: unknown }).cause, depth++) {
    const code = (x as { code?: unknown }).code;
    if (typeof code === 'number' && code !== UNKNOWN_CODE) return code;
    const described = codeOfDescription(x as { origin?: unknown; message?: unknown });
    if (described !== undefined) return described;
    if (typeof code === 'number') return code;
  }
  return undefined;
}

/** What the client puts in `code` when its native layer gave none. */
const UNKNOWN_CODE = -1;

/** For each code we act on, the description an `event.error` of it carries (see codeOfDescription). */
let descriptions: Map<string, number> | undefined;

/**
 * The code of an error event whose number the client dropped. Its native layer hands an `event.error`
 * over as the library's own description of the code (rd_kafka_err2str, e.g. "Local: Authentication
 * failure") without the number, and its JavaScript layer splits and lower-cases that
 * (lib/error.js: origin "local", message "authentication failure", code -1). The same description is
 * made here from each code we act on, by the same library build (its LibrdKafkaError from a number
 * uses err2str), so the match is exact and follows any rewording: a table of codes, not of phrases.
 */
function codeOfDescription(e: { origin?: unknown; message?: unknown }): number | undefined {
  if (typeof e.origin !== 'string' || typeof e.message !== 'string') return undefined;
  if (descriptions === undefined) {
    const LibrdKafkaError = createRequire(import.meta.url)('@confluentinc/kafka-javascript/lib/error') as new (e: number | Error) => { origin: string; message: string };
    descriptions = new Map();
    for (const code of Object.values(KAFKA_ERROR_CODES)) {
      const asEvent = new LibrdKafkaError(new Error(new LibrdKafkaError(code).message));
      descriptions.set(`${asEvent.origin}\n${asEvent.message}`, code);
    }
  }
  return descriptions.get(`${e.origin}\n${e.message}`);
}

/** The last refusal an error event of a client of this process carried, and when. */
let lastRefusal: { error: Error; at: number } | undefined;

/** The last error line a client of this process logged, and when: shown beside a refusal, never judged. */
let lastErrorLine: { line: string; at: number } | undefined;

/**
 * Notes an error event of a Kafka client (its `event.error`, a failed fetch): librdkafka retries a
 * refused login or handshake itself and only reports why there; the call that gives up says no more
 * than "Broker transport failure". Kept when it is a refusal (by its code), for kafkaUnavailable —
 * with the client's own words for it when it logged them just before (an event carries only the
 * code's generic description, "authentication failure").
 */
export function noteClientError(e: unknown): void {
  const code = kafkaErrorCode(e);
  const k = kafkaErrorKind(code);
  if (k !== undefined && (k.kind === 'login-refused' || k.kind === 'tls-untrusted' || k.kind === 'not-authorized')) {
    const said = lastErrorLine !== undefined && Date.now() - lastErrorLine.at <= 5_000 ? lastErrorLine.line : undefined;
    const error = said === undefined ? (e instanceof Error ? e : new Error(String(e))) : Object.assign(new Error(said, { cause: e }), { code });
    lastRefusal = { error, at: Date.now() };
  }
}

/** A librdkafka client handle (the `_getInternalClient()` of the client's KafkaJS-style producer or consumer). */
export interface LibrdkafkaHandle {
  on(event: 'event.error', listener: (e: Error & { code?: number }) => void): void;
}

/**
 * Notes every `event.error` of a librdkafka handle by its code (noteClientError), and hands it to
 * `onError`. The KafkaJS-style layer only logs these as text; the handle has them with their codes.
 */
export function tapClientErrors(handle: LibrdkafkaHandle | null | undefined, onError?: (e: Error & { code?: number }) => void): void {
  handle?.on('event.error', (e) => {
    noteClientError(e);
    onError?.(e);
  });
}

/** The refusal a client reported in the last `maxAgeMs`. */
export function recentRefusal(maxAgeMs = 120_000): Error | undefined {
  return lastRefusal !== undefined && Date.now() - lastRefusal.at <= maxAgeMs ? lastRefusal.error : undefined;
}

/** A client message without librdkafka's thread prefix (`[thrd:…]: sasl_ssl://host:port/bootstrap: `), for display. */
function cleanLogLine(message: string): string {
  return (message.split('\n')[0] ?? '').replace(/^.*Error details: /s, '').replace(/^\[thrd:[^\]]*\]:\s*/, '').replace(/^\S+:\/\/\S+?: /, '');
}

/** A KafkaJS-style logger that forwards the client's own log lines to ours at reduced volume (shown, never parsed). */
export function quietLogger(sink: (level: 'warn' | 'error', message: string) => void): KafkaJSNamespace.Logger {
  const noop = () => undefined;
  const self: KafkaJSNamespace.Logger = {
    info: noop,
    debug: noop,
    warn: (message: string) => sink('warn', message),
    error: (message: string) => {
      if (!message.startsWith('Error: ')) lastErrorLine = { line: cleanLogLine(message), at: Date.now() };
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
 * A refusal no retry can change, from the librdkafka code of the client's error (kafkaErrorKind), in
 * one line naming what to fix: SASL credentials, the broker's certificate, a missing ACL. Undefined
 * for anything else. The message quotes the client's words; it is never read to decide.
 */
export function kafkaSecurityError(config: ConnectionConfig, cause: unknown): ExactlyOnceError | undefined {
  if (cause instanceof ExactlyOnceError) return undefined;
  const kind = kafkaErrorKind(kafkaErrorCode(cause));
  if (kind === undefined) return undefined;
  const where = config.brokers.join(',');
  const text = cause instanceof Error ? cause.message : String(cause);
  const msg = redact(cleanLogLine(text), kafkaSecrets(config)).slice(0, 300);
  const user = config.kafkaConfig['sasl.username'];
  switch (kind.kind) {
    case 'login-refused':
      return new ExactlyOnceError(
        'EO_KAFKA_AUTH_FAILED',
        `Kafka at ${where} refused the login${user === undefined ? '' : ` of '${user}'`} (${msg}); check sasl.username, sasl.password and sasl.mechanisms in --kafka-config-file (or EXACTLYONCE_KAFKA_CONFIG)`,
        { cause },
      );
    case 'tls-untrusted':
      return new ExactlyOnceError(
        'EO_TLS_UNTRUSTED',
        `Kafka at ${where}: the TLS handshake failed (${msg}); give the CA that signed the broker's certificate as ssl.ca.location in --kafka-config-file`,
        { cause },
      );
    case 'not-authorized': {
      const target = kind.resource === 'topic' ? `topic ${config.topic}` : kind.resource === 'group' ? `group ${config.group}` : kind.resource;
      // Shown, not judged: the broker's own phrase when the message has one ("JoinGroup failed: Broker: …").
      const said = /Broker: [^:]*authori[sz]ation failed/i.exec(msg)?.[0] ?? msg;
      return new ExactlyOnceError(
        'EO_NOT_AUTHORIZED',
        `Kafka at ${where} refused ${user === undefined ? 'this client' : `'${user}'`} access to the ${target} (${said}); add an ACL for it (kafka-acls --add --allow-principal User:${user ?? '<user>'} …)`,
        { cause },
      );
    }
    default:
      return undefined;
  }
}

/**
 * What to check when no broker answers: the address the user gave comes first (a wrong one is the
 * usual cause outside the local stack), then the local stack.
 */
export const KAFKA_UNREACHABLE_HINT = 'check --brokers (or EXACTLYONCE_BROKERS), or for the local stack run `exactlyonce stack up`';

export function kafkaUnavailable(config: ConnectionConfig, cause: unknown): ExactlyOnceError {
  const recent = recentRefusal();
  const secure = kafkaSecurityError(config, cause) ?? (recent === undefined ? undefined : kafkaSecurityError(config, recent));
  if (secure !== undefined) return secure;
  const msg = redact(cause instanceof Error ? cause.message.split('\n')[0] ?? '' : String(cause), kafkaSecrets(config));
  return new ExactlyOnceError(
    'EO_KAFKA_UNAVAILABLE',
    `Kafka at ${config.brokers.join(',')} did not answer (${msg}); ${KAFKA_UNREACHABLE_HINT}`,
    { cause },
  );
}
