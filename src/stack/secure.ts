/**
 * `stack up --secure`: the local servers with TLS and authentication, as a production cluster has.
 *
 * Under `<stack dir>/secure/` (mode 0700): a throwaway CA and a server certificate for 127.0.0.1 /
 * localhost made with the JDK's keytool, random passwords (files, mode 0600), and ready-to-use client
 * settings for an admin (schema, topics) and a worker (least privilege).
 *
 * - Cassandra: client-to-node TLS (no plaintext), PasswordAuthenticator + CassandraAuthorizer. On
 *   first start the default `cassandra` superuser is replaced by `exactlyonce_admin` (its login is
 *   disabled, its password randomised), and `exactlyonce_worker` gets SELECT and MODIFY only.
 * - Kafka: one SASL_SSL listener (SCRAM-SHA-512), StandardAuthorizer, no access without an ACL. The
 *   SCRAM users are added when the storage is formatted, the worker's ACLs by the admin after the
 *   first start, both by stack/KafkaSecureSetup.java, so no password is ever on a command line. The
 *   controller listener stays plaintext on 127.0.0.1 (principal ANONYMOUS, a super user: the broker
 *   reaches its own controller through it).
 *
 * The stack dir remembers it is secure (the secure/ folder): a later `stack up` without --secure
 * starts it secured again.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import cassandra from 'cassandra-driver';
import { ExactlyOnceError } from '../errors.js';
import { javaCommand } from './fetch.js';
import type { StackOptions } from './options.js';
import { serverPaths } from './paths.js';
import { lastLines } from './process.js';
import { packageFile } from '../package-root.js';

const execFileP = promisify(execFile);

export const CASSANDRA_ADMIN = 'exactlyonce_admin';
export const CASSANDRA_WORKER = 'exactlyonce_worker';
export const KAFKA_ADMIN = 'exactlyonce-admin';
export const KAFKA_WORKER = 'exactlyonce-worker';
/** What the worker principal may use in Kafka: topics and groups with this prefix, and the default group. */
export const KAFKA_WORKER_PREFIX = 'exactlyonce';

export interface SecureFiles {
  dir: string;
  /** The CA certificate (PEM) clients trust. */
  ca: string;
  /** PKCS12 keystore with the server's key and certificate chain (both servers use it). */
  keystore: string;
  /** PKCS12 truststore holding the CA (the broker's own client side). */
  truststore: string;
  storePassword: string;
  cassandraAdminPassword: string;
  cassandraWorkerPassword: string;
  kafkaAdminPassword: string;
  kafkaWorkerPassword: string;
  /** librdkafka properties files for `--kafka-config-file`. */
  kafkaAdminProperties: string;
  kafkaWorkerProperties: string;
  /** Shell files of EXACTLYONCE_* settings: `set -a; . admin.env; set +a`. */
  adminEnv: string;
  workerEnv: string;
  /** Written once the roles / users and ACLs exist. */
  cassandraDone: string;
  kafkaDone: string;
}

export function secureFiles(o: StackOptions): SecureFiles {
  const dir = path.join(path.resolve(o.dir), 'secure');
  const f = (name: string) => path.join(dir, name);
  return {
    dir,
    ca: f('ca.pem'),
    keystore: f('server.p12'),
    truststore: f('truststore.p12'),
    storePassword: f('store.password'),
    cassandraAdminPassword: f('cassandra-admin.password'),
    cassandraWorkerPassword: f('cassandra-worker.password'),
    kafkaAdminPassword: f('kafka-admin.password'),
    kafkaWorkerPassword: f('kafka-worker.password'),
    kafkaAdminProperties: f('kafka-admin.properties'),
    kafkaWorkerProperties: f('kafka-worker.properties'),
    adminEnv: f('admin.env'),
    workerEnv: f('worker.env'),
    cassandraDone: f('cassandra-roles.done'),
    kafkaDone: f('kafka-acls.done'),
  };
}

/** True when the stack is to run secured: asked for, or made secured before (its secure/ folder exists). */
export function isSecure(o: StackOptions): boolean {
  return o.secure === true || existsSync(secureFiles(o).ca);
}

function secret(file: string): string {
  return readFileSync(file, 'utf8').trim();
}

/** Writes a file only its owner can read. */
async function writePrivate(file: string, text: string): Promise<void> {
  await writeFile(file, text, { mode: 0o600 });
  await chmod(file, 0o600); // an existing file keeps its mode on write
}

/**
 * Makes the CA, the server certificate, the passwords and the client settings once (idempotent).
 * A stack dir that already holds plaintext server data cannot be turned secure: its Cassandra has no
 * roles and its Kafka no SCRAM users or ACLs.
 */
export async function prepareSecure(o: StackOptions): Promise<SecureFiles> {
  const s = secureFiles(o);
  if (!existsSync(s.ca)) {
    const hasData = ['kafka', 'cassandra'].some((n) => existsSync(serverPaths(o.dir, n as 'kafka' | 'cassandra').data));
    if (hasData) {
      throw new ExactlyOnceError('EO_USAGE', `the stack in ${o.dir} was made without --secure and holds data; secure a fresh one (--stack-dir <new dir>) or remove ${o.dir}/data first`);
    }
    o.onProgress?.('making a local CA and server certificate (keytool)…');
    await rm(s.dir, { recursive: true, force: true });
    await mkdir(s.dir, { recursive: true, mode: 0o700 });
    for (const file of [s.storePassword, s.cassandraAdminPassword, s.cassandraWorkerPassword, s.kafkaAdminPassword, s.kafkaWorkerPassword]) {
      await writePrivate(file, `${randomBytes(18).toString('base64url')}\n`);
    }
    await makeCertificates(s);
  }
  await writeClientSettings(o, s);
  return s;
}

/**
 * keytool steps: a CA (basic constraints CA:true), a server key pair, its certificate signed by the
 * CA for IP 127.0.0.1 and DNS localhost (so hostname verification passes), the chain imported into
 * the server keystore, the CA into a truststore and out as PEM. Passwords go through the environment
 * (`-storepass:env`), never the command line.
 */
async function makeCertificates(s: SecureFiles): Promise<void> {
  const keytool = javaCommand() === 'java' ? 'keytool' : path.join(path.dirname(javaCommand()), 'keytool');
  const env = { ...process.env, EO_STORE_PASSWORD: secret(s.storePassword) };
  const caStore = path.join(s.dir, 'ca.p12');
  const csr = path.join(s.dir, 'server.csr');
  const cert = path.join(s.dir, 'server.pem');
  const pass = ['-storetype', 'PKCS12', '-storepass:env', 'EO_STORE_PASSWORD'];
  const key = ['-keyalg', 'EC', '-groupname', 'secp256r1'];
  const steps: string[][] = [
    ['-genkeypair', '-keystore', caStore, ...pass, '-alias', 'ca', '-dname', 'CN=exactlyonce local CA', ...key, '-validity', '3650', '-ext', 'bc:c'],
    ['-exportcert', '-keystore', caStore, ...pass, '-alias', 'ca', '-rfc', '-file', s.ca],
    ['-genkeypair', '-keystore', s.keystore, ...pass, '-alias', 'server', '-dname', 'CN=localhost, O=exactlyonce local stack', ...key, '-validity', '825'],
    ['-certreq', '-keystore', s.keystore, ...pass, '-alias', 'server', '-file', csr],
    ['-gencert', '-keystore', caStore, ...pass, '-alias', 'ca', '-infile', csr, '-outfile', cert, '-rfc', '-validity', '825', '-ext', 'SAN=ip:127.0.0.1,dns:localhost', '-ext', 'KU=digitalSignature', '-ext', 'EKU=serverAuth,clientAuth'],
    ['-importcert', '-keystore', s.keystore, ...pass, '-alias', 'ca', '-file', s.ca, '-noprompt'],
    ['-importcert', '-keystore', s.keystore, ...pass, '-alias', 'server', '-file', cert],
    ['-importcert', '-keystore', s.truststore, ...pass, '-alias', 'ca', '-file', s.ca, '-noprompt'],
  ];
  for (const args of steps) {
    try {
      await execFileP(keytool, args, { env });
    } catch (e) {
      const err = e as { code?: string; stdout?: string; stderr?: string };
      if (err.code === 'ENOENT') throw new ExactlyOnceError('EO_TOOL_MISSING', `keytool not found (${keytool}); install a Java 17 JDK or set JAVA_HOME`, { cause: e });
      throw new ExactlyOnceError('EO_SERVER_EXITED', `keytool ${args[0]} failed while making the stack's certificates`, { cause: e, details: lastLines(`${err.stdout ?? ''}${err.stderr ?? ''}`, 10) });
    }
  }
  for (const f of [caStore, s.keystore, s.truststore]) await chmod(f, 0o600);
  await rm(csr, { force: true });
}

/** The librdkafka properties of a user (SASL_SSL, SCRAM-SHA-512, the stack's CA). */
function kafkaProperties(s: SecureFiles, user: string, passwordFile: string): string {
  return [
    `# Written by exactlyonce stack up --secure: librdkafka settings of the Kafka user ${user}.`,
    '# Use with --kafka-config-file (or EXACTLYONCE_KAFKA_CONFIG_FILE). Holds a password: keep it 0600.',
    'security.protocol=SASL_SSL',
    'sasl.mechanisms=SCRAM-SHA-512',
    `sasl.username=${user}`,
    `sasl.password=${secret(passwordFile)}`,
    `ssl.ca.location=${s.ca}`,
    '',
  ].join('\n');
}

function envFile(o: StackOptions, s: SecureFiles, role: 'admin' | 'worker'): string {
  const admin = role === 'admin';
  return [
    `# Written by exactlyonce stack up --secure: the ${role}'s settings for every exactlyonce command.`,
    `# Load with: set -a; . ${admin ? s.adminEnv : s.workerEnv}; set +a`,
    `EXACTLYONCE_BROKERS=127.0.0.1:${o.kafkaPort}`,
    `EXACTLYONCE_CASSANDRA=127.0.0.1:${o.cassandraPort}`,
    `EXACTLYONCE_CASSANDRA_CA=${s.ca}`,
    `EXACTLYONCE_CASSANDRA_USERNAME=${admin ? CASSANDRA_ADMIN : CASSANDRA_WORKER}`,
    `EXACTLYONCE_CASSANDRA_PASSWORD_FILE=${admin ? s.cassandraAdminPassword : s.cassandraWorkerPassword}`,
    `EXACTLYONCE_KAFKA_CONFIG_FILE=${admin ? s.kafkaAdminProperties : s.kafkaWorkerProperties}`,
    '',
  ].join('\n');
}

async function writeClientSettings(o: StackOptions, s: SecureFiles): Promise<void> {
  await writePrivate(s.kafkaAdminProperties, kafkaProperties(s, KAFKA_ADMIN, s.kafkaAdminPassword));
  await writePrivate(s.kafkaWorkerProperties, kafkaProperties(s, KAFKA_WORKER, s.kafkaWorkerPassword));
  await writePrivate(s.adminEnv, envFile(o, s, 'admin'));
  await writePrivate(s.workerEnv, envFile(o, s, 'worker'));
}

// ---------------------------------------------------------------- Cassandra

/** cassandra.yaml lines for TLS-only clients and password authentication with grants. */
export function cassandraSecureYaml(o: StackOptions): string {
  const s = secureFiles(o);
  return `# --secure: clients must use TLS and log in; permissions are checked.
authenticator: PasswordAuthenticator
authorizer: CassandraAuthorizer
role_manager: CassandraRoleManager
client_encryption_options:
  enabled: true
  optional: false
  keystore: ${JSON.stringify(s.keystore)}
  keystore_password: ${JSON.stringify(secret(s.storePassword))}
  store_type: PKCS12
  require_client_auth: false
`;
}

/** JVM flags for a secured Cassandra: create the default superuser at once (default: 10 s after start). */
export const CASSANDRA_SECURE_JVM = ['-Dcassandra.superuser_setup_delay_ms=0'];

function cassandraClient(o: StackOptions, username: string, password: string, timeoutMs = 5000): cassandra.Client {
  return new cassandra.Client({
    contactPoints: [`127.0.0.1:${o.cassandraPort}`],
    localDataCenter: 'datacenter1',
    isMetadataSyncEnabled: false,
    credentials: { username, password },
    sslOptions: { ca: readFileSync(secureFiles(o).ca), rejectUnauthorized: true },
    socketOptions: { connectTimeout: timeoutMs, readTimeout: timeoutMs },
  });
}

/** Our admin's login once the roles exist, before that the default superuser's. */
function cassandraLogin(o: StackOptions): [string, string] {
  const s = secureFiles(o);
  return existsSync(s.cassandraDone) ? [CASSANDRA_ADMIN, secret(s.cassandraAdminPassword)] : ['cassandra', 'cassandra'];
}

/** Ready: a CQL query over TLS, logged in, succeeds (the default superuser appears just after the port opens). */
export async function secureCassandraReady(o: StackOptions): Promise<boolean> {
  const [user, password] = cassandraLogin(o);
  const client = cassandraClient(o, user, password);
  try {
    await client.connect();
    return (await client.execute('SELECT release_version FROM system.local')).rows.length === 1;
  } catch {
    return false;
  } finally {
    await client.shutdown().catch(() => undefined);
  }
}

/**
 * First start only: our admin replaces `cassandra` (whose password everyone knows), and the worker role
 * gets SELECT and MODIFY (read and write rows, TRUNCATE) on keyspaces — no CREATE, ALTER, DROP or
 * AUTHORIZE: `schema apply` runs as the admin. Passwords cannot be bind markers in CREATE ROLE; ours are
 * base64url, so they need no quoting.
 */
export async function setupCassandraRoles(o: StackOptions): Promise<void> {
  const s = secureFiles(o);
  if (existsSync(s.cassandraDone)) return;
  o.onProgress?.(`creating Cassandra roles ${CASSANDRA_ADMIN} and ${CASSANDRA_WORKER}…`);
  const first = cassandraClient(o, 'cassandra', 'cassandra', 15_000);
  try {
    await first.execute(`CREATE ROLE IF NOT EXISTS ${CASSANDRA_ADMIN} WITH SUPERUSER = true AND LOGIN = true AND PASSWORD = '${secret(s.cassandraAdminPassword)}'`);
  } finally {
    await first.shutdown().catch(() => undefined);
  }
  const admin = cassandraClient(o, CASSANDRA_ADMIN, secret(s.cassandraAdminPassword), 15_000);
  try {
    await admin.execute(`ALTER ROLE cassandra WITH SUPERUSER = false AND LOGIN = false AND PASSWORD = '${randomBytes(18).toString('base64url')}'`);
    await admin.execute(`CREATE ROLE IF NOT EXISTS ${CASSANDRA_WORKER} WITH LOGIN = true AND PASSWORD = '${secret(s.cassandraWorkerPassword)}'`);
    await admin.execute(`GRANT SELECT ON ALL KEYSPACES TO ${CASSANDRA_WORKER}`);
    await admin.execute(`GRANT MODIFY ON ALL KEYSPACES TO ${CASSANDRA_WORKER}`);
  } finally {
    await admin.shutdown().catch(() => undefined);
  }
  await writeFile(s.cassandraDone, `${new Date().toISOString()}\n`);
}

// ---------------------------------------------------------------- Kafka

/** server.properties lines replacing the plaintext listener (the rest of the file is unchanged). */
export function kafkaSecureProperties(o: StackOptions): string {
  const s = secureFiles(o);
  const port = o.kafkaPort;
  const controller = port + 1;
  const store = secret(s.storePassword);
  return `listeners=SASL_SSL://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controller}
advertised.listeners=SASL_SSL://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controller}
# --secure: clients use SASL_SSL (SCRAM-SHA-512). The controller listener stays plaintext on
# 127.0.0.1: the broker reaches its own controller through it (as ANONYMOUS, hence a super user).
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="${KAFKA_ADMIN}" password="${secret(s.kafkaAdminPassword)}";
ssl.keystore.type=PKCS12
ssl.keystore.location=${s.keystore}
ssl.keystore.password=${store}
ssl.truststore.type=PKCS12
ssl.truststore.location=${s.truststore}
ssl.truststore.password=${store}
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
allow.everyone.if.no.acl.found=false
super.users=User:${KAFKA_ADMIN};User:ANONYMOUS
`;
}

/**
 * Ready (TLS level): the SASL_SSL listener completes a TLS handshake with our CA and answers an
 * ApiVersions request, which Kafka serves before authentication (KIP-43). Registration with the
 * controller is then proven by the first start's set-up (describeCluster as the admin).
 */
export function kafkaTlsReady(o: StackOptions, timeoutMs = 3000): Promise<boolean> {
  const clientId = Buffer.from('exactlyonce-stack');
  // Request header v1: size, api_key 18 (ApiVersions), api_version 0, correlation_id, client_id.
  const request = Buffer.alloc(4 + 2 + 2 + 4 + 2 + clientId.length);
  let at = request.writeInt32BE(request.length - 4, 0);
  at = request.writeInt16BE(18, at);
  at = request.writeInt16BE(0, at);
  at = request.writeInt32BE(7, at);
  at = request.writeInt16BE(clientId.length, at);
  clientId.copy(request, at);
  let ca: Buffer;
  try {
    ca = readFileSync(secureFiles(o).ca);
  } catch {
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port: o.kafkaPort, ca, rejectUnauthorized: true }, () => socket.write(request));
    let received = Buffer.alloc(0);
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.on('error', () => done(false));
    socket.on('close', () => done(false));
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 10) return;
      // Response: size, correlation_id, error_code.
      done(received.readInt32BE(4) === 7 && received.readInt16BE(8) === 0);
    });
  });
}

/** How the helper stack/KafkaSecureSetup.java is run: the JDK's single-file source launcher on the broker's jars. */
function kafkaHelper(o: StackOptions, lib: string, args: string[]): Promise<void> {
  const p = serverPaths(o.dir, 'kafka');
  const s = secureFiles(o);
  const source = packageFile('stack', 'KafkaSecureSetup.java');
  const java = ['-Xmx256m', `-Djava.io.tmpdir=${p.tmp}`, `-Dlog4j2.configurationFile=${path.join(p.conf, 'log4j2.xml')}`, '-cp', `${lib}/*`, source, ...args];
  const env = { ...process.env, EO_KAFKA_ADMIN_PASSWORD: secret(s.kafkaAdminPassword), EO_KAFKA_WORKER_PASSWORD: secret(s.kafkaWorkerPassword) };
  return execFileP(javaCommand(), java, { env, maxBuffer: 16 * 1024 * 1024 }).then(
    () => undefined,
    (e: unknown) => {
      const err = e as { stdout?: string; stderr?: string };
      throw new ExactlyOnceError('EO_SERVER_EXITED', `${source} ${args[0]} failed`, { cause: e, details: lastLines(`${err.stdout ?? ''}${err.stderr ?? ''}`, 20) });
    },
  );
}

/** Formats the KRaft storage with the two SCRAM users (first start of a secured Kafka). */
export async function formatSecureKafka(o: StackOptions, lib: string, clusterId: string, properties: string): Promise<void> {
  await kafkaHelper(o, lib, ['format', clusterId, properties, KAFKA_ADMIN, KAFKA_WORKER]);
}

/** First start only: the worker's ACLs, created by the admin once the broker accepts its login. */
export async function setupKafka(o: StackOptions, lib: string, timeoutMs: number): Promise<void> {
  const s = secureFiles(o);
  if (existsSync(s.kafkaDone)) return;
  o.onProgress?.(`creating the Kafka ACLs of ${KAFKA_WORKER}…`);
  await kafkaHelper(o, lib, ['acls', `127.0.0.1:${o.kafkaPort}`, s.ca, KAFKA_ADMIN, KAFKA_WORKER, KAFKA_WORKER_PREFIX, String(timeoutMs)]);
  await writeFile(s.kafkaDone, `${new Date().toISOString()}\n`);
}

/** For `stack status`: what is secured and where the client settings are. */
export async function secureSummary(o: StackOptions): Promise<string[]> {
  const s = secureFiles(o);
  const ok = existsSync(s.cassandraDone) && existsSync(s.kafkaDone);
  return [
    `secured${ok ? '' : ' (set-up not finished: run stack up again)'}:`,
    `  Kafka      127.0.0.1:${o.kafkaPort}  SASL_SSL, SCRAM-SHA-512, ACLs (StandardAuthorizer); controller 127.0.0.1:${o.kafkaPort + 1} plaintext, loopback only`,
    `  Cassandra  127.0.0.1:${o.cassandraPort}  TLS only, PasswordAuthenticator, CassandraAuthorizer`,
    `  CA certificate: ${s.ca}`,
    `  admin (schema, topics, chaos):  set -a; . ${s.adminEnv}; set +a`,
    `  worker (run, verify):           set -a; . ${s.workerEnv}; set +a`,
    `  (Kafka settings alone: --kafka-config-file ${s.kafkaWorkerProperties}; worker topics and groups must start with '${KAFKA_WORKER_PREFIX}')`,
  ];
}
