// The one retry classification (src/engine/retry.ts isRetriable): read from the error's class, for
// our errors, the Kafka client's and the Cassandra driver's alike.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import cassandra from 'cassandra-driver';
import { ExactlyOnceError, ErrorCodes, type ErrorCode } from '../../src/errors.js';
import { abortedBy, AbortedError, isRetriable, retry } from '../../src/engine/retry.js';

test("our errors are retried exactly when their code says so (ErrorCodes' retriable flag)", () => {
  for (const code of Object.keys(ErrorCodes) as ErrorCode[]) {
    assert.equal(isRetriable(new ExactlyOnceError(code, 'x')), ErrorCodes[code].retriable, code);
  }
  assert.equal(isRetriable(new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', 'x')), true);
  assert.equal(isRetriable(new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', 'x')), true);
  assert.equal(isRetriable(new ExactlyOnceError('EO_PRODUCE_FAILED', 'x')), true);
  assert.equal(isRetriable(new ExactlyOnceError('EO_PERMANENT_ERROR', 'x')), false);
});

test("the Kafka client's errors carry their own verdict", () => {
  // The shape of @confluentinc/kafka-javascript's KafkaJSError (lib/kafkajs/_error.js), without
  // loading its native addon.
  const kafkaError = (name: string, retriable: boolean) => Object.assign(new Error('broker said no'), { name, retriable, code: 7 });
  assert.equal(isRetriable(kafkaError('KafkaJSConnectionError', true)), true);
  assert.equal(isRetriable(kafkaError('KafkaJSProtocolError', false)), false);
});

test("the Cassandra driver's errors are judged by name and server code; a bug is never retried", () => {
  assert.equal(isRetriable(new cassandra.errors.OperationTimedOutError('timed out', '127.0.0.1:9042')), true);
  assert.equal(isRetriable(new cassandra.errors.ResponseError(0x1000, 'unavailable')), true);
  assert.equal(isRetriable(new cassandra.errors.ResponseError(0x2200, 'invalid')), false);
  assert.equal(isRetriable(new TypeError("Cannot read properties of undefined (reading 'x')")), false);
  assert.equal(isRetriable('a string'), false);
});

test('retry() reads the classification by default: a retriable error is retried, a permanent one thrown at once', async () => {
  let calls = 0;
  const value = await retry(
    async () => {
      if (++calls < 3) throw new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', 'down');
      return 'ok';
    },
    { server: 'test-retriable', initialDelayMs: 1 },
  );
  assert.deepEqual([value, calls], ['ok', 3]);
  calls = 0;
  await assert.rejects(
    retry(async () => {
      calls++;
      throw new ExactlyOnceError('EO_PERMANENT_ERROR', 'no');
    }, { server: 'test-permanent', initialDelayMs: 1 }),
    (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_PERMANENT_ERROR',
  );
  assert.equal(calls, 1);
  const abort = new AbortController();
  abort.abort();
  await assert.rejects(
    retry(async () => {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', 'down');
    }, { server: 'test-aborted', initialDelayMs: 1, signal: abort.signal }),
    AbortedError,
  );
});

test('abandonOnAbort: an attempt still running when the signal aborts ends the call at once with AbortedError; without it the attempt is awaited', async () => {
  const hanging = () => new Promise<string>(() => undefined); // a call to brokers that are down
  const abort = new AbortController();
  const abandoned = retry(hanging, { server: 'Kafka', signal: abort.signal, abandonOnAbort: true });
  const started = Date.now();
  setTimeout(() => abort.abort(), 50);
  await assert.rejects(abandoned, AbortedError);
  assert.ok(Date.now() - started < 5_000);

  // Aborted before the call: it is not even started (its answer would be of no use).
  let attempts = 0;
  await assert.rejects(
    retry(
      () => {
        attempts++;
        return hanging();
      },
      { server: 'Kafka', signal: abort.signal, abandonOnAbort: true },
    ),
    AbortedError,
  );
  assert.equal(attempts, 0);

  // Without abandonOnAbort, a first attempt runs to its end, abort or not (a healthy batch finishes
  // during shutdown); its failure then ends the call, aborted, without a retry.
  let release: (v: string) => void = () => undefined;
  const slow = new Promise<string>((resolve) => (release = resolve));
  const awaited = retry(() => slow, { server: 'Cassandra', signal: abort.signal });
  let settled = false;
  void awaited.then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(settled, false);
  release('stored');
  assert.equal(await awaited, 'stored');
});

test("abortedBy: AbortedError, or any failure once the shutdown's signal has aborted (a job's own AbortError), is the shutdown's doing", () => {
  const abort = new AbortController();
  assert.equal(abortedBy(new AbortedError(), undefined), true);
  assert.equal(abortedBy(new Error('refused'), abort.signal), false);
  assert.equal(abortedBy(new Error('refused'), undefined), false);
  abort.abort();
  assert.equal(abortedBy(new DOMException('This operation was aborted', 'AbortError'), abort.signal), true);
  assert.equal(abortedBy(new Error('refused'), abort.signal), true);
});
