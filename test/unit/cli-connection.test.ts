import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from '@commander-js/extra-typings';
import { connection, withConnection } from '../../src/cli/common.js';
import type { ConnectionKey } from '../../src/config.js';
import { ExactlyOnceError } from '../../src/errors.js';

/** Parses `argv` with the connection flags under `env`, as a command using `used` would. */
function parsed(argv: string[], env: Record<string, string>, used?: readonly ConnectionKey[]) {
  const saved = { ...process.env };
  Object.assign(process.env, env);
  try {
    const cmd = withConnection(new Command('x'), used).exitOverride();
    cmd.parse(argv, { from: 'user' });
    return connection(cmd);
  } finally {
    for (const k of Object.keys(env)) delete process.env[k];
    Object.assign(process.env, saved);
  }
}

test('through Commander a flag wins over its environment variable, which wins over the default', () => {
  const env = { EXACTLYONCE_BROKERS: 'a:1,b:2', EXACTLYONCE_KEYSPACE: 'fromenv', EXACTLYONCE_KAFKA_CONFIG: '{"security.protocol":"SSL","sasl.mechanism":"PLAIN"}' };
  const c = parsed(['--keyspace', 'fromflag'], env);
  assert.deepEqual(c.brokers, ['a:1', 'b:2']);
  assert.equal(c.keyspace, 'fromflag');
  assert.equal(c.topic, 'exactlyonce.events');
  assert.deepEqual(c.kafkaConfig, { 'security.protocol': 'SSL', 'sasl.mechanism': 'PLAIN' });
  assert.ok(Object.isFrozen(c));
});

test('repeated --kafka-config flags are not split on commas; an empty variable counts as unset', () => {
  const c = parsed(['--kafka-config', 'sasl.jaas.config=a=b,c', '--kafka-config', 'ssl.ca.location=/x'], { EXACTLYONCE_BROKERS: '', EXACTLYONCE_KAFKA_CONFIG: 'x=1' });
  assert.deepEqual(c.kafkaConfig, { 'sasl.jaas.config': 'a=b,c', 'ssl.ca.location': '/x' });
  assert.deepEqual(c.brokers, ['localhost:9092']);
});

test('a command validates only the settings it uses; a bad one it uses is named by its flag', () => {
  const c = parsed(['--brokers', 'nohost'], { EXACTLYONCE_TOPIC: 'bad topic!' }, ['cassandra', 'keyspace']);
  assert.deepEqual(c.brokers, ['localhost:9092']);
  assert.equal(c.topic, 'exactlyonce.events');
  assert.throws(
    () => parsed([], { EXACTLYONCE_CASSANDRA: 'a b' }, ['cassandra', 'keyspace']),
    (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_CONFIG_INVALID' && e.message === "--cassandra: expected host[:port][,host[:port]…] (got 'a b')",
  );
});

test('a command that connects to Cassandra takes its TLS and password-file flags, and shows them in --help', () => {
  const cmd = withConnection(new Command('x'), ['cassandra', 'cassandraUsername', 'cassandraPassword']);
  const help = cmd.helpInformation();
  for (const flag of ['--cassandra-password-file', '--cassandra-tls', '--cassandra-ca', '--cassandra-cert', '--cassandra-key']) assert.ok(help.includes(flag), flag);
  assert.ok(!help.includes('--kafka-config-file'));
  const kafka = withConnection(new Command('y'), ['brokers', 'kafkaConfig']).helpInformation();
  assert.ok(kafka.includes('--kafka-config-file') && kafka.includes('EXACTLYONCE_KAFKA_CONFIG_FILE'));
});

test('EXACTLYONCE_KAFKA_CONFIG as key=value lines keeps commas in values', () => {
  const c = parsed([], { EXACTLYONCE_KAFKA_CONFIG: 'sasl.jaas.config=a required x="1,2";\nsasl.password=p,w=d' });
  assert.deepEqual(c.kafkaConfig, { 'sasl.jaas.config': 'a required x="1,2";', 'sasl.password': 'p,w=d' });
});
