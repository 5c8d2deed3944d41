import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { tlsOptions } from '../../src/cassandra/session.js';
import { loadConnectionConfig } from '../../src/config.js';
import { configError } from './config-error.js';
import { connectionArgs, connectionEnv } from '../../src/harness/cli-process.js';
import { isSecretProperty, parseKafkaProperties, redact, redactKafkaConfig } from '../../src/secrets.js';

function tempDir(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'eo-secrets-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('properties text: comments and blank lines skipped, values kept whole (commas, =, quotes, spaces inside)', () => {
  const text = [
    '# a comment',
    '! another',
    '',
    'security.protocol=SASL_SSL',
    '  sasl.mechanisms = SCRAM-SHA-512',
    'sasl.jaas.config=org.x.ScramLoginModule required username="u" password="a,b=c";',
    'sasl.password=p,a=s s',
    'ssl.ca.location=/certs/ca.pem\r',
  ].join('\n');
  assert.deepEqual(parseKafkaProperties(text, 'f'), {
    'security.protocol': 'SASL_SSL',
    'sasl.mechanisms': 'SCRAM-SHA-512',
    'sasl.jaas.config': 'org.x.ScramLoginModule required username="u" password="a,b=c";',
    'sasl.password': 'p,a=s s',
    'ssl.ca.location': '/certs/ca.pem',
  });
});

test('properties as a JSON object; numbers and booleans become strings', () => {
  assert.deepEqual(parseKafkaProperties(' {"sasl.password": "a,b\\nc", "socket.timeout.ms": 5000, "enable.ssl.certificate.verification": true}', 'env'), {
    'sasl.password': 'a,b\nc',
    'socket.timeout.ms': '5000',
    'enable.ssl.certificate.verification': 'true',
  });
});

test('a bad properties line is named by its number, never shown (it may hold a secret)', () => {
  assert.equal(configError(() => parseKafkaProperties('a=1\nhunter2secret', 'EXACTLYONCE_KAFKA_CONFIG')), 'EXACTLYONCE_KAFKA_CONFIG: line 2: expected key=value');
  assert.equal(configError(() => parseKafkaProperties('{"a": [1]}', 'x')), 'x: property a: expected a string, number or boolean');
  assert.equal(configError(() => parseKafkaProperties('{"a": ', 'x')), 'x: expected a JSON object of librdkafka properties or key=value lines (the JSON does not parse)');
  assert.equal(configError(() => parseKafkaProperties('Bad Key=1', 'x')), "x: line 1: 'Bad Key' is not a librdkafka property name");
});

test('secret properties are recognised and redacted; others are kept', () => {
  for (const k of ['sasl.password', 'sasl.jaas.config', 'ssl.key.password', 'ssl.keystore.password', 'ssl.key.pem', 'sasl.oauthbearer.client.secret', 'sasl.oauthbearer.config']) assert.ok(isSecretProperty(k), k);
  for (const k of ['sasl.username', 'security.protocol', 'ssl.ca.location', 'ssl.key.location', 'sasl.mechanisms']) assert.ok(!isSecretProperty(k), k);
  assert.deepEqual(redactKafkaConfig({ 'sasl.username': 'w', 'sasl.password': 'pw' }), { 'sasl.username': 'w', 'sasl.password': '[redacted]' });
  assert.equal(redact('login of s3cret-pw failed (s3cret-pw)', ['s3cret-pw', undefined, 'ab']), 'login of [redacted] failed ([redacted])');
});

test('--kafka-config-file is read, and --kafka-config / the environment override its keys', (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'client.properties');
  writeFileSync(file, 'security.protocol=SASL_SSL\nsasl.username=worker\nsasl.password=a,b\n');
  const c = loadConnectionConfig({ kafkaConfigFile: file, kafkaConfig: ['sasl.username=other'] }, {});
  assert.deepEqual(c.kafkaConfig, { 'security.protocol': 'SASL_SSL', 'sasl.username': 'other', 'sasl.password': 'a,b' });
  const fromEnv = loadConnectionConfig({}, { EXACTLYONCE_KAFKA_CONFIG_FILE: file, EXACTLYONCE_KAFKA_CONFIG: '{"sasl.password":"x,y"}' });
  assert.equal(fromEnv.kafkaConfig['sasl.password'], 'x,y');
  assert.equal(configError(() => loadConnectionConfig({ kafkaConfigFile: path.join(dir, 'none') }, {})), `--kafka-config-file: ${path.join(dir, 'none')} does not exist`);
});

test('the Cassandra password comes from a file (first line), never together with --cassandra-password', (t) => {
  const dir = tempDir(t);
  const file = path.join(dir, 'pw');
  writeFileSync(file, 'p,ss=w0rd\n', { mode: 0o600 });
  const c = loadConnectionConfig({ cassandraUsername: 'worker', cassandraPasswordFile: file }, {});
  assert.equal(c.cassandraPassword, 'p,ss=w0rd');
  assert.equal(loadConnectionConfig({}, { EXACTLYONCE_CASSANDRA_PASSWORD_FILE: file }).cassandraPassword, 'p,ss=w0rd');
  assert.equal(
    configError(() => loadConnectionConfig({ cassandraPassword: 'topsecret', cassandraPasswordFile: file }, {})),
    `--cassandra-password-file: expected a password or a password file, not both (got '${file}')`,
  );
  writeFileSync(file, '\n');
  assert.equal(configError(() => loadConnectionConfig({ cassandraPasswordFile: file }, {})), `--cassandra-password-file: ${file} is empty; put the password on its first line`);
  chmodSync(file, 0o000);
  if (process.getuid?.() !== 0) assert.equal(configError(() => loadConnectionConfig({ cassandraPasswordFile: file }, {})), `--cassandra-password-file: ${file} cannot be read (EACCES)`);
});

test('a secret in a bad value is never echoed in the error', () => {
  const msg = configError(() => loadConnectionConfig({ kafkaConfig: ['sasl.password=hunter2', 'novalue'] }, {}));
  assert.ok(!msg.includes('hunter2'), msg);
  assert.match(msg, /sasl\.password=\[redacted\]/);
});

test('Cassandra TLS: on with a CA (hostname checked), no-hostname-check, off; cert and key together', (t) => {
  const dir = tempDir(t);
  const ca = path.join(dir, 'ca.pem');
  writeFileSync(ca, 'CA');
  assert.deepEqual(loadConnectionConfig({ cassandraCa: ca }, {}).cassandraTls, { ca, cert: undefined, key: undefined, verifyHostname: true });
  assert.deepEqual(loadConnectionConfig({ cassandraTls: 'no-hostname-check' }, {}).cassandraTls, { ca: undefined, cert: undefined, key: undefined, verifyHostname: false });
  assert.equal(loadConnectionConfig({ cassandraTls: 'off', cassandraCa: ca }, {}).cassandraTls, undefined);
  assert.equal(configError(() => loadConnectionConfig({ cassandraTls: 'yes' }, {})), "--cassandra-tls: expected on, off or no-hostname-check (got 'yes')");
  assert.equal(configError(() => loadConnectionConfig({ cassandraCert: ca }, {})), '--cassandra-key: expected --cassandra-cert and --cassandra-key together');
  const o = tlsOptions({ ca, cert: undefined, key: undefined, verifyHostname: true });
  assert.equal(o.rejectUnauthorized, true);
  assert.equal(String(o.ca), 'CA');
  assert.equal(o.checkServerIdentity, undefined);
  assert.equal(typeof tlsOptions({ ca, cert: undefined, key: undefined, verifyHostname: false }).checkServerIdentity, 'function');
  assert.equal(configError(() => tlsOptions({ ca: path.join(dir, 'x'), cert: undefined, key: undefined, verifyHostname: true })), `--cassandra-ca: ${path.join(dir, 'x')} cannot be read (ENOENT)`);
});

test('a child gets secrets through its environment, never its command line', (t) => {
  const dir = tempDir(t);
  const ca = path.join(dir, 'ca.pem');
  const c = loadConnectionConfig(
    { cassandraUsername: 'worker', cassandraPassword: 'cass-secret', cassandraCa: ca, kafkaConfig: ['sasl.password=kafka,secret', 'sasl.username=worker'], schemaRegistryUrl: 'https://sr.example:8443', schemaRegistryUsername: 'key', schemaRegistryPassword: 'sr-secret' },
    {},
  );
  const args = connectionArgs(c);
  assert.ok(!args.join(' ').includes('cass-secret') && !args.join(' ').includes('kafka,secret') && !args.join(' ').includes('sr-secret'), args.join(' '));
  assert.deepEqual(args.slice(-6), ['--cassandra-username', 'worker', '--cassandra-tls', 'on', '--cassandra-ca', ca]);
  const env = connectionEnv(c);
  assert.deepEqual(env, {
    EXACTLYONCE_CASSANDRA_PASSWORD: 'cass-secret',
    EXACTLYONCE_CASSANDRA_PASSWORD_FILE: '',
    EXACTLYONCE_KAFKA_CONFIG: '{"sasl.password":"kafka,secret","sasl.username":"worker"}',
    EXACTLYONCE_KAFKA_CONFIG_FILE: '',
    EXACTLYONCE_SCHEMA_REGISTRY_URL: 'https://sr.example:8443',
    EXACTLYONCE_SCHEMA_REGISTRY_USERNAME: 'key',
    EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD: 'sr-secret',
    EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD_FILE: '',
  });
  // What the child makes of it: the same connection.
  const child = loadConnectionConfig({ cassandraUsername: 'worker', cassandraCa: ca }, env);
  assert.deepEqual(child, c);
});
