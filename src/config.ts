/**
 * Flags + environment → one validated, frozen configuration, the same names for every command.
 * Precedence: flag, then `EXACTLYONCE_<NAME>` environment variable, then the default (the seed job's
 * value where it has one: its topic, its consumer group). Every bad value is reported with the flag
 * that carries it and the form expected.
 *
 * On the command line Commander applies that precedence itself (each flag is bound to its variable
 * with `Option.env()`, src/cli/common.ts) and this module only validates; `loadConnectionConfig(raw,
 * env)` applies it for callers outside Commander (tests, the bench, the demo).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { ExactlyOnceError } from './errors.js';
import { isSecretProperty, parseKafkaProperties, REDACTED } from './secrets.js';

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
  /** From --cassandra-password, EXACTLYONCE_CASSANDRA_PASSWORD or the file --cassandra-password-file names. */
  readonly cassandraPassword: string | undefined;
  /** Client-to-node TLS, or undefined for a plaintext connection. */
  readonly cassandraTls: CassandraTls | undefined;
  /**
   * librdkafka properties passed through unchanged (SASL, TLS, …), e.g. `security.protocol=SASL_SSL`:
   * those of --kafka-config-file, then --kafka-config / EXACTLYONCE_KAFKA_CONFIG over them.
   */
  readonly kafkaConfig: Readonly<Record<string, string>>;
  /** Where the schemas of Avro, Protobuf and JSON Schema records are (src/registry/schema-registry.ts). */
  readonly schemaRegistry: SchemaRegistryConfig;
}

/** A Confluent-compatible Schema Registry: its API's base URL and, if it requires them, basic-auth credentials. */
export interface SchemaRegistryConfig {
  /** e.g. `http://127.0.0.1:8081/apis/ccompat/v7` (the local stack's Apicurio) or `https://psrc-….confluent.cloud`. */
  readonly url: string;
  readonly username: string | undefined;
  /** From --schema-registry-password, EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD or the file --schema-registry-password-file names. */
  readonly password: string | undefined;
}

/** The local stack's registry on its default port (`stack up --schema-registry`). */
export const DEFAULT_SCHEMA_REGISTRY_URL = 'http://127.0.0.1:8081/apis/ccompat/v7';

/** Cassandra client-to-node encryption: PEM files, read when the session connects. */
export interface CassandraTls {
  /** CA certificate(s) the server's certificate must chain to; undefined: the system's CAs. */
  readonly ca: string | undefined;
  /** Client certificate and its key, for servers that require client authentication. */
  readonly cert: string | undefined;
  readonly key: string | undefined;
  /** Check the server certificate's name (SAN) against the contact point (default true). */
  readonly verifyHostname: boolean;
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
  cassandraPassword: { flag: '--cassandra-password <password>', env: 'EXACTLYONCE_CASSANDRA_PASSWORD', default: undefined, help: 'Cassandra password (visible in `ps`: prefer --cassandra-password-file or the environment)' },
  cassandraPasswordFile: { flag: '--cassandra-password-file <file>', env: 'EXACTLYONCE_CASSANDRA_PASSWORD_FILE', default: undefined, help: 'file holding the Cassandra password (one line)' },
  cassandraTls: { flag: '--cassandra-tls <mode>', env: 'EXACTLYONCE_CASSANDRA_TLS', default: undefined, help: 'Cassandra TLS: on, off, or no-hostname-check (certificate checked, name not); default on when --cassandra-ca is given' },
  cassandraCa: { flag: '--cassandra-ca <file>', env: 'EXACTLYONCE_CASSANDRA_CA', default: undefined, help: "PEM CA certificate(s) Cassandra's certificate must chain to (turns TLS on)" },
  cassandraCert: { flag: '--cassandra-cert <file>', env: 'EXACTLYONCE_CASSANDRA_CERT', default: undefined, help: 'PEM client certificate, for a Cassandra that requires client authentication' },
  cassandraKey: { flag: '--cassandra-key <file>', env: 'EXACTLYONCE_CASSANDRA_KEY', default: undefined, help: 'PEM private key of --cassandra-cert' },
  kafkaConfig: { flag: '--kafka-config <key=value...>', env: 'EXACTLYONCE_KAFKA_CONFIG', default: undefined, help: 'librdkafka property passed through (SASL/TLS), repeatable; in the environment one key=value per line, or a JSON object' },
  kafkaConfigFile: { flag: '--kafka-config-file <file>', env: 'EXACTLYONCE_KAFKA_CONFIG_FILE', default: undefined, help: 'librdkafka properties file (key=value lines, # comments); --kafka-config overrides it' },
  schemaRegistryUrl: {
    flag: '--schema-registry-url <url>',
    env: 'EXACTLYONCE_SCHEMA_REGISTRY_URL',
    default: DEFAULT_SCHEMA_REGISTRY_URL,
    help: 'Schema Registry (Confluent API) base URL, for Avro, Protobuf and JSON Schema records',
  },
  schemaRegistryUsername: { flag: '--schema-registry-username <user>', env: 'EXACTLYONCE_SCHEMA_REGISTRY_USERNAME', default: undefined, help: 'Schema Registry user (HTTP basic auth; an API key on Confluent Cloud)' },
  schemaRegistryPassword: {
    flag: '--schema-registry-password <password>',
    env: 'EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD',
    default: undefined,
    help: 'Schema Registry password (visible in `ps`: prefer --schema-registry-password-file or the environment)',
  },
  schemaRegistryPasswordFile: { flag: '--schema-registry-password-file <file>', env: 'EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD_FILE', default: undefined, help: 'file holding the Schema Registry password (one line)' },
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
    cassandraPasswordFile: z.string().min(1).optional(),
    cassandraTls: z.enum(['on', 'off', 'no-hostname-check'], { message: 'expected on, off or no-hostname-check' }).optional(),
    cassandraCa: z.string().min(1).optional(),
    cassandraCert: z.string().min(1).optional(),
    cassandraKey: z.string().min(1).optional(),
    kafkaConfig: z
      .array(z.string().regex(/^[a-z0-9._]+=.*$/s, 'expected key=value (a librdkafka property)'))
      .transform((kvs) => Object.fromEntries(kvs.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))),
    kafkaConfigFile: z.string().min(1).optional(),
    schemaRegistryUrl: z.string().refine(isHttpUrl, { message: 'expected an http:// or https:// URL without credentials (the Confluent API base, e.g. http://127.0.0.1:8081/apis/ccompat/v7)' }),
    schemaRegistryUsername: z.string().min(1).optional(),
    schemaRegistryPassword: z.string().min(1).optional(),
    schemaRegistryPasswordFile: z.string().min(1).optional(),
  })
  .strict()
  .refine((c) => (c.cassandraCert === undefined) === (c.cassandraKey === undefined), { message: 'expected --cassandra-cert and --cassandra-key together', path: ['cassandraKey'] })
  .refine((c) => c.cassandraPassword === undefined || c.cassandraPasswordFile === undefined, {
    message: 'expected a password or a password file, not both',
    path: ['cassandraPasswordFile'],
  })
  .refine((c) => c.schemaRegistryPassword === undefined || c.schemaRegistryPasswordFile === undefined, {
    message: 'expected a password or a password file, not both',
    path: ['schemaRegistryPasswordFile'],
  })
  .refine((c) => (c.schemaRegistryPassword ?? c.schemaRegistryPasswordFile) === undefined || c.schemaRegistryUsername !== undefined, {
    message: 'a Schema Registry password needs --schema-registry-username too',
    path: ['schemaRegistryUsername'],
  });

/** Credentials go in their own flags (kept out of messages), never in the URL. */
function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.username === '' && u.password === '';
  } catch {
    return false;
  }
}

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
    if (key === 'kafkaConfig') v = v === undefined ? [] : Array.isArray(v) ? v : kafkaConfigFromEnv(String(v));
    if (v !== undefined) input[key] = v;
  }
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const key = String(issue.path[0] ?? '');
      const flag = spec[key]?.flag.split(' ')[0] ?? key;
      return `${flag}: ${issue.message}${shownValue(key, input[key])}`;
    });
    throw new ExactlyOnceError('EO_CONFIG_INVALID', lines.join('; '));
  }
  return deepFreeze(parsed.data);
}

/** ` (got '…')` for an error message; a secret's value is never shown. */
function shownValue(key: string, got: unknown): string {
  if (got === undefined) return '';
  if (key === 'cassandraPassword' || key === 'schemaRegistryPassword') return ` (got ${REDACTED})`;
  if (Array.isArray(got)) {
    return ` (got '${got.map((kv) => (typeof kv === 'string' && isSecretProperty(kv.split('=')[0]!) ? `${kv.split('=')[0]}=${REDACTED}` : String(kv))).join(', ')}')`;
  }
  return ` (got '${String(got)}')`;
}

/**
 * EXACTLYONCE_KAFKA_CONFIG: a JSON object (`{"sasl.password":"a,b"}`) or key=value lines (the format
 * of --kafka-config-file). Never split on commas: a SASL JAAS value or a password may hold them.
 */
export function kafkaConfigFromEnv(value: string): string[] {
  return Object.entries(parseKafkaProperties(value, 'EXACTLYONCE_KAFKA_CONFIG')).map(([k, v]) => `${k}=${v}`);
}

export function loadConnectionConfig(raw: RawOptions, env: NodeJS.ProcessEnv = process.env): ConnectionConfig {
  const c = resolveOptions(connectionOptions, connectionSchema, raw, env);
  const password = c.cassandraPasswordFile === undefined ? c.cassandraPassword : readPasswordFile(c.cassandraPasswordFile, '--cassandra-password-file');
  const registryPassword = c.schemaRegistryPasswordFile === undefined ? c.schemaRegistryPassword : readPasswordFile(c.schemaRegistryPasswordFile, '--schema-registry-password-file');
  const tlsMode = c.cassandraTls ?? (c.cassandraCa !== undefined || c.cassandraCert !== undefined ? 'on' : 'off');
  const fileConfig = c.kafkaConfigFile === undefined ? {} : readKafkaConfigFile(c.kafkaConfigFile);
  return deepFreeze({
    brokers: c.brokers,
    cassandra: c.cassandra,
    datacenter: c.datacenter,
    keyspace: c.keyspace,
    topic: c.topic,
    alertsTopic: c.alertsTopic,
    group: c.group,
    cassandraUsername: c.cassandraUsername,
    cassandraPassword: password,
    cassandraTls: tlsMode === 'off' ? undefined : { ca: c.cassandraCa, cert: c.cassandraCert, key: c.cassandraKey, verifyHostname: tlsMode === 'on' },
    kafkaConfig: { ...fileConfig, ...c.kafkaConfig },
    schemaRegistry: { url: c.schemaRegistryUrl.replace(/\/+$/, ''), username: c.schemaRegistryUsername, password: registryPassword },
  });
}

/** The file's first line, without its line ending (a trailing newline is what editors and `echo` add). */
function readPasswordFile(file: string, flag: string): string {
  const text = readFileOr(file, flag);
  const password = text.split(/\r?\n/)[0]!;
  if (password === '') throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: ${file} is empty; put the password on its first line`);
  return password;
}

function readKafkaConfigFile(file: string): Record<string, string> {
  return parseKafkaProperties(readFileOr(file, '--kafka-config-file'), `--kafka-config-file ${file}`);
}

function readFileOr(file: string, flag: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (e) {
    const why = (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : `cannot be read (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `${flag}: ${file} ${why}`, { cause: e });
  }
}

function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object') {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
