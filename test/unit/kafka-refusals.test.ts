// Which Kafka client messages are refusals no retry can change (one coded line, the worker stops) and
// which are transient (retried): a broker restarting resets TLS handshakes, which is not a trust problem.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConnectionConfig } from '../../src/config.js';
import { kafkaSecurityError } from '../../src/kafka/client.js';

const config = loadConnectionConfig({ brokers: '127.0.0.1:19092' }, {});
const code = (message: string) => kafkaSecurityError(config, new Error(message))?.code ?? 'retried';

test('a certificate the client rejects is EO_TLS_UNTRUSTED', () => {
  assert.equal(
    code('GroupCoordinator: 127.0.0.1:19092: SSL handshake failed: error:0A000086:SSL routines::certificate verify failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured (after 5ms in state SSL_HANDSHAKE)'),
    'EO_TLS_UNTRUSTED',
  );
});

test('a handshake cut short while the broker restarts is retried, not a refusal', () => {
  assert.equal(code('GroupCoordinator: 127.0.0.1:19092: SSL handshake failed: Disconnected: connection reset by peer: connecting to a PLAINTEXT broker listener? (after 3ms in state SSL_HANDSHAKE)'), 'retried');
  assert.equal(code('127.0.0.1:19092/bootstrap: Connect to ipv4#127.0.0.1:19092 failed: Connection refused (after 0ms in state CONNECT)'), 'retried');
});

test('a refused login and a missing ACL are refusals', () => {
  assert.equal(code('SASL authentication error: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512'), 'EO_KAFKA_AUTH_FAILED');
  assert.equal(code('Broker: Group authorization failed'), 'EO_NOT_AUTHORIZED');
});
