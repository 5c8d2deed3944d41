import assert from 'node:assert/strict';
import { test } from 'node:test';
import { intOption } from '../../src/cli/flags.js';
import { loadConnectionConfig } from '../../src/config.js';
import { ExactlyOnceError } from '../../src/errors.js';
import { configError } from './config-error.js';

test('defaults are the original system\'s', () => {
  const c = loadConnectionConfig({}, {});
  assert.deepEqual(
    { ...c },
    {
      brokers: ['localhost:9092'],
      cassandra: ['localhost'],
      datacenter: 'datacenter1',
      keyspace: 'exactlyonce',
      topic: 'exactlyonce.events',
      alertsTopic: 'exactlyonce.alerts',
      group: 'EventStreamingApp',
      cassandraUsername: undefined,
      cassandraPassword: undefined,
      cassandraTls: undefined,
      kafkaConfig: {},
      schemaRegistry: { url: 'http://127.0.0.1:8081/apis/ccompat/v7', username: undefined, password: undefined },
    },
  );
  assert.ok(Object.isFrozen(c));
  assert.ok(Object.isFrozen(c.brokers));
});

test('a flag wins over its environment variable, which wins over the default', () => {
  const env = { EXACTLYONCE_BROKERS: 'a:1,b:2', EXACTLYONCE_KEYSPACE: 'fromenv', EXACTLYONCE_KAFKA_CONFIG: 'security.protocol=SSL\nsasl.mechanism=PLAIN' };
  const c = loadConnectionConfig({ keyspace: 'fromflag' }, env);
  assert.deepEqual(c.brokers, ['a:1', 'b:2']);
  assert.equal(c.keyspace, 'fromflag');
  assert.deepEqual(c.kafkaConfig, { 'security.protocol': 'SSL', 'sasl.mechanism': 'PLAIN' });
});

test('repeated --kafka-config values pass through, values may contain =', () => {
  const c = loadConnectionConfig({ kafkaConfig: ['sasl.jaas.config=a=b', 'ssl.ca.location=/x'] }, {});
  assert.deepEqual(c.kafkaConfig, { 'sasl.jaas.config': 'a=b', 'ssl.ca.location': '/x' });
});

test('cassandra contact points take an optional port', () => {
  assert.deepEqual(loadConnectionConfig({ cassandra: 'h1, h2:9043' }, {}).cassandra, ['h1', 'h2:9043']);
});

test('every bad value is named by its flag with the expected form', () => {
  assert.equal(
    configError(() => loadConnectionConfig({ brokers: 'nohostport' }, {})),
    "--brokers: expected host:port[,host:port…] (got 'nohostport')",
  );
  assert.equal(
    configError(() => loadConnectionConfig({ brokers: 'h:99999' }, {})),
    "--brokers: expected host:port[,host:port…] (got 'h:99999')",
  );
  const both = configError(() => loadConnectionConfig({ keyspace: '1bad-name', topic: 'bad topic!' }, {}));
  assert.equal(
    both,
    "--keyspace: expected a letter then letters, digits or _ (at most 48) (got '1bad-name'); --topic: expected 1-249 characters of [A-Za-z0-9._-] (got 'bad topic!')",
  );
  assert.match(configError(() => loadConnectionConfig({ kafkaConfig: ['novalue'] }, {})), /^--kafka-config: expected key=value/);
});

test('a bad environment value is reported under its flag', () => {
  assert.equal(
    configError(() => loadConnectionConfig({}, { EXACTLYONCE_CASSANDRA: 'a b' })),
    "--cassandra: expected host[:port][,host[:port]…] (got 'a b')",
  );
});

test('intOption accepts whole numbers in range only', () => {
  const p = intOption('--partitions', 1, 100);
  assert.equal(p('3'), 3);
  for (const bad of ['0', '101', '1.5', 'x', '', '3e2']) {
    assert.throws(() => p(bad), (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_CONFIG_INVALID' && e.message === `--partitions: expected a whole number from 1 to 100 (got '${bad}')`);
  }
});
