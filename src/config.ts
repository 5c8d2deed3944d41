/**
 * Flags + environment → one validated, frozen configuration, the same names for every command.
 * Precedence: flag, then `EXACTLYONCE_<NAME>` environment variable, then the original system's
 * default. Every bad value is reported with the flag that carries it and the form expected.
 *
 * On the command line Commander applies that precedence itself (each flag is bound to its variable
 * with `Option.env()`, src/cli/common.ts) and this module only validates; `loadConnectionConfig(raw,
 * env)` applies it for callers outside Commander (tests, the bench, the demo).
 */
import { z } from 'zod';
import { ExactlyOnceError } from './errors.js';

/** The connection settings every command shares. */
export interface ConnectionConfig {
  /** Kafka bootstrap servers, `host:port`. */
  readonly brokers: readonly string[];
  /** Cassandra contact points, `host` or `host:port`. */
  readonly cassandra: readonly string[];
  /** Cassandra local data centre (the driver's load-balancing policy needs it). */
  readonly datacenter: string;
  readonly keyspace: string;
  readonly topic: string;
  /** Topic every alert and alert revision is published to (compacted). */
  readonly alertsTopic: string;
  readonly group: string;
  readonly cassandraUsername: string | undefined;
  readonly cassandraPassword: string | undefined;
  /** librdkafka properties passed through unchanged (SASL, TLS, …), e.g. `security.protocol=SASL_SSL`. */
  readonly kafkaConfig: Readonly<Record<string, string>>;
}

/** Each shared option: its flag, environment variable, default and description (the CLI's `Option`s are made from it). */
export const connectionOptions = {
  brokers: { flag: '--brokers <list>', env: 'EXACTLYONCE_BROKERS', default: 'localhost:9092', help: 'Kafka bootstrap servers, host:port[,host:port…]' },
  cassandra: { flag: '--cassandra <list>', env: 'EXACTLYONCE_CASSANDRA', default: 'localhost', help: 'Cassandra contact points, host[:port][,…]' },
  datacenter: { flag: '--datacenter <name>', env: 'EXACTLYONCE_DATACENTER', default: 'datacenter1', help: 'Cassandra local data centre' },
  keyspace: { flag: '--keyspace <name>', env: 'EXACTLYONCE_KEYSPACE', default: 'exactlyonce', help: 'Cassandra keyspace' },
  topic: { flag: '--topic <name>', env: 'EXACTLYONCE_TOPIC', default: 'exactlyonce.events', help: 'Kafka topic of events' },
  alertsTopic: { flag: '--alerts-topic <name>', env: 'EXACTLYONCE_ALERTS_TOPIC', default: 'exactlyonce.alerts', help: 'Kafka topic of alerts (compacted)' },
  group: { flag: '--group <id>', env: 'EXACTLYONCE_GROUP', default: 'EventStreamingApp', help: 'Kafka consumer group' },
  cassandraUsername: { flag: '--cassandra-username <user>', env: 'EXACTLYONCE_CASSANDRA_USERNAME', default: undefined, help: 'Cassandra user (PasswordAuthenticator)' },
  cassandraPassword: { flag: '--cassandra-password <password>', env: 'EXACTLYONCE_CASSANDRA_PASSWORD', default: undefined, help: 'Cassandra password' },
  kafkaConfig: { flag: '--kafka-config <key=value...>', env: 'EXACTLYONCE_KAFKA_CONFIG', default: undefined, help: 'librdkafka property passed through (SASL/TLS), repeatable; in the environment comma-separated' },
} as const;

export type ConnectionKey = keyof typeof connectionOptions;

const hostPort = /^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/;
const hostOptPort = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9a-fA-F:]+\](:\d{1,5})?$/;
const list = (re: RegExp, form: string) =>
  z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim()).filter((x) => x.length > 0))
    .refine((xs) => xs.length > 0 && xs.every((x) => re.test(x) && portOk(x)), { message: `expected ${form}` });

function portOk(x: string): boolean {
  const m = /:(\d+)$/.exec(x);
  return m === null || (Number(m[1]) >= 1 && Number(m[1]) <= 65535);
}

/** CQL unquoted identifiers: letter first, at most 48 characters (Cassandra's keyspace name limit). */
const cqlIdentifier = z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,47}$/, 'expected a letter then letters, digits or _ (at most 48)');
/** Kafka's legal topic names (kafka.common.Topic). */
const topicName = z.string().regex(/^[A-Za-z0-9._-]{1,249}$/, 'expected 1-249 characters of [A-Za-z0-9._-]');

const connectionSchema = z
  .object({
    brokers: list(hostPort, 'host:port[,host:port…]'),
    cassandra: list(hostOptPort, 'host[:port][,host[:port]…]'),
    datacenter: z.string().min(1, 'expected a data centre name'),
    keyspace: cqlIdentifier,
    topic: topicName,
    alertsTopic: topicName,
    group: z.string().min(1, 'expected a group id').max(255),
    cassandraUsername: z.string().min(1).optional(),
    cassandraPassword: z.string().min(1).optional(),
    kafkaConfig: z
      .array(z.string().regex(/^[a-z0-9._]+=.*$/, 'expected key=value (a librdkafka property)'))
      .transform((kvs) => Object.fromEntries(kvs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))),
  })
  .strict();

/** Raw values as the CLI parsed them (strings, maybe absent). */
export type RawOptions = Record<string, unknown>;

/**
 * Resolves flag → env → default for each key of `spec`, validates with `schema` and freezes.
 * Throws EO_CONFIG_INVALID listing every bad path as `--flag: problem (got 'value')`.
 */
export function resolveOptions<T>(
  spec: Record<string, { flag: string; env?: string; default: unknown }>,
  schema: z.ZodType<T>,
  raw: RawOptions,
  env: NodeJS.ProcessEnv = process.env,
): T {
  const input: Record<string, unknown> = {};
  for (const [key, s] of Object.entries(spec)) {
    let v = raw[key];
    if (v === undefined && s.env !== undefined && env[s.env] !== undefined && env[s.env] !== '') v = env[s.env];
    if (v === undefined) v = s.default;
    if (key === 'kafkaConfig') v = v === undefined ? [] : Array.isArray(v) ? v : String(v).split(',');
    if (v !== undefined) input[key] = v;
  }
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? '');
      const flag = spec[key]?.flag.split(' ')[0] ?? key;
      const got = input[key];
      return `${flag}: ${issue.message}${got === undefined ? '' : ` (got '${Array.isArray(got) ? got.join(',') : String(got)}')`}`;
    });
    throw new ExactlyOnceError('EO_CONFIG_INVALID', lines.join('; '));
  }
  return deepFreeze(parsed.data);
}

export function loadConnectionConfig(raw: RawOptions, env: NodeJS.ProcessEnv = process.env): ConnectionConfig {
  const c = resolveOptions(connectionOptions, connectionSchema, raw, env);
  return Object.freeze({ ...c, cassandraUsername: c.cassandraUsername, cassandraPassword: c.cassandraPassword });
}

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** A whole number within bounds, for numeric flags: `intOption('--partitions', 1, 10000)`. */
export function intOption(flag: string, min: number, max: number) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^-?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min || n > max) {
      throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a whole number from ${min} to ${max} (got '${value}')`);
    }
    return n;
  };
}

/** A fraction from 0 to 1, for ratio flags: `ratioOption('--bad-ratio')`. */
export function ratioOption(flag: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\d*\.?\d+$/.test(value) || n < 0 || n > 1) throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: expected a number from 0 to 1 (got '${value}')`);
    return n;
  };
}
