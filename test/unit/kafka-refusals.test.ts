// Kafka errors are judged by their librdkafka code, never by their wording: one test per code we act
// on (a refusal no retry changes stops the worker with one coded line; an unreachable broker is
// retried and said once; a position outside the log stops its partition), and a wording alone,
// however alarming, changes nothing.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConnectionConfig } from '../../src/config.js';
import { KAFKA_ERROR_CODES, kafkaErrorCode, kafkaErrorKind, kafkaJS, kafkaSecurityError, kafkaUnavailable, noteClientError } from '../../src/kafka/client.js';

const config = loadConnectionConfig({ brokers: '127.0.0.1:19092' }, {});
/** An error as the client gives it: a KafkaJSError (from a call) carrying the librdkafka code. */
const clientError = (code: number, message = 'the client says something') => new (kafkaJS().KafkaJSError)(message, { code });
const verdict = (code: number, message?: string) => kafkaSecurityError(config, clientError(code, message))?.code ?? 'retried';

test("our codes are the client's own (an upgrade that renumbered one would show here)", () => {
  const theirs = kafkaJS().ErrorCodes as unknown as Record<string, number>;
  for (const [name, code] of Object.entries(KAFKA_ERROR_CODES)) assert.equal(theirs[name], code, name);
});

test('ERR__AUTHENTICATION (-169) is EO_KAFKA_AUTH_FAILED', () => assert.equal(verdict(-169), 'EO_KAFKA_AUTH_FAILED'));
test('ERR_SASL_AUTHENTICATION_FAILED (58) is EO_KAFKA_AUTH_FAILED', () => assert.equal(verdict(58), 'EO_KAFKA_AUTH_FAILED'));
test('ERR__SSL (-181), a certificate the client rejects, is EO_TLS_UNTRUSTED', () => assert.equal(verdict(-181), 'EO_TLS_UNTRUSTED'));
test('ERR_TOPIC_AUTHORIZATION_FAILED (29) is EO_NOT_AUTHORIZED naming the topic', () => {
  const e = kafkaSecurityError(config, clientError(29, 'Broker: Topic authorization failed'));
  assert.equal(e?.code, 'EO_NOT_AUTHORIZED');
  assert.match(e!.message, new RegExp(`access to the topic ${config.topic} \\(Broker: Topic authorization failed\\)`));
});
test('ERR_GROUP_AUTHORIZATION_FAILED (30) is EO_NOT_AUTHORIZED naming the group', () => {
  assert.match(kafkaSecurityError(config, clientError(30))!.message, new RegExp(`access to the group ${config.group} `));
});
test('ERR_CLUSTER_AUTHORIZATION_FAILED (31) is EO_NOT_AUTHORIZED', () => assert.equal(verdict(31), 'EO_NOT_AUTHORIZED'));
test('ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) is EO_NOT_AUTHORIZED', () => assert.equal(verdict(53), 'EO_NOT_AUTHORIZED'));

test('ERR__TRANSPORT (-195), also a TLS handshake cut short while a broker restarts, is retried and means unreachable', () => {
  // librdkafka itself reports a disconnect during the handshake as ERR__TRANSPORT, not ERR__SSL
  // (rdkafka_ssl.c rd_kafka_transport_ssl_handshake), whatever its words say.
  assert.equal(verdict(-195, 'SSL handshake failed: Disconnected: connection reset by peer: certificate'), 'retried');
  assert.deepEqual(kafkaErrorKind(-195), { kind: 'unreachable' });
});
test('ERR__ALL_BROKERS_DOWN (-187) is retried and means unreachable', () => {
  assert.equal(verdict(-187), 'retried');
  assert.deepEqual(kafkaErrorKind(-187), { kind: 'unreachable' });
});
test('ERR__RESOLVE (-193) is retried and means unreachable', () => assert.deepEqual(kafkaErrorKind(-193), { kind: 'unreachable' }));
test('ERR__AUTO_OFFSET_RESET (-140) and ERR_OFFSET_OUT_OF_RANGE (1) mean the position left the log', () => {
  assert.deepEqual(kafkaErrorKind(-140), { kind: 'out-of-range' });
  assert.deepEqual(kafkaErrorKind(1), { kind: 'out-of-range' });
  assert.equal(verdict(-140), 'retried');
});

test('words alone decide nothing: a refusal in the text with another code (or none) is retried', () => {
  assert.equal(verdict(-185, 'SASL authentication error: Authentication failed; Broker: Group authorization failed; certificate verify failed'), 'retried');
  assert.equal(kafkaSecurityError(config, new Error('SASL authentication error: Authentication failed'))?.code ?? 'retried', 'retried');
  assert.equal(kafkaErrorKind(undefined), undefined);
});

test("the code is found on the error's cause too (an error wrapped by a call)", () => {
  assert.equal(kafkaErrorCode(new Error('outer', { cause: clientError(58) })), 58);
  assert.equal(kafkaSecurityError(config, new Error('outer', { cause: clientError(58) }))?.code, 'EO_KAFKA_AUTH_FAILED');
});

test('a refusal reported by an error event explains the transport failure of a later call', () => {
  noteClientError(Object.assign(new Error('SASL authentication error: invalid credentials'), { code: -169 }));
  const e = kafkaUnavailable(config, clientError(-195, 'Broker transport failure'));
  assert.equal(e.code, 'EO_KAFKA_AUTH_FAILED');
  assert.match(e.message, /refused the login \(SASL authentication error: invalid credentials\)/);
});

test("an event.error, whose number the client drops (it hands over only the code's own description), is known by that description", async () => {
  const { createRequire } = await import('node:module');
  // Built the way the client builds it (lib/client.js: LibrdKafkaError.create(new Error(err2str(code)))).
  const LibrdKafkaError = createRequire(import.meta.url)('@confluentinc/kafka-javascript/lib/error') as new (e: number | Error) => Error & { code: number };
  const event = (code: number) => new LibrdKafkaError(new Error(new LibrdKafkaError(code).message));
  assert.equal(event(-169).code, -1, 'the client gives no code');
  assert.equal(kafkaErrorCode(event(-169)), -169);
  assert.equal(kafkaSecurityError(config, event(-169))?.code, 'EO_KAFKA_AUTH_FAILED');
  assert.equal(kafkaSecurityError(config, event(-181))?.code, 'EO_TLS_UNTRUSTED');
  assert.deepEqual(kafkaErrorKind(kafkaErrorCode(event(-187))), { kind: 'unreachable' });
  assert.equal(kafkaErrorCode(event(-185)), -1, 'a code we do not act on stays unknown');
});
