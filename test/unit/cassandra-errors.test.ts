import assert from 'node:assert/strict';
import { test } from 'node:test';
import cassandra from 'cassandra-driver';
import { isRetriableCassandraError } from '../../src/cassandra/session.js';

const { NoHostAvailableError, ResponseError, OperationTimedOutError, DriverError } = cassandra.errors;
const response = (code: number) => new ResponseError(code, `server said ${code}`);

test('transient Cassandra errors are retried, definite refusals are not', () => {
  assert.equal(isRetriableCassandraError(new OperationTimedOutError('timed out', '127.0.0.1:9042')), true);
  for (const code of [0x1000, 0x1001, 0x1002, 0x1100, 0x1200]) assert.equal(isRetriableCassandraError(response(code)), true, `code ${code}`);
  // Invalid request, unauthorized, write failure, read failure, unprepared, syntax error.
  for (const code of [0x2200, 0x2100, 0x1500, 0x1300, 0x2500, 0x2000]) assert.equal(isRetriableCassandraError(response(code)), false, `code ${code}`);
  assert.equal(isRetriableCassandraError(new Error('a bug')), false);
  assert.equal(isRetriableCassandraError(new TypeError("Cannot read properties of undefined (reading 'x')")), false);
});

test('a connection that failed under a request is retried: the server never answered', () => {
  // What the driver throws for a request in flight when a node shuts down or is killed.
  // (Typed abstract; the driver itself constructs it: lib/connection.js.)
  const closed = new (DriverError as unknown as new (message: string) => Error)('Socket was closed');
  assert.equal(closed.name, 'DriverError');
  assert.equal(isRetriableCassandraError(closed), true);
  const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
  assert.equal(isRetriableCassandraError(reset), true);
  const pipe = Object.assign(new Error('write EPIPE'), { code: 'EPIPE' });
  assert.equal(isRetriableCassandraError(pipe), true);
});

test('NoHostAvailable: retried when a host could not be reached, not when every host refused for good', () => {
  const refused = new NoHostAvailableError({ '127.0.0.1:9042': response(0x2500), '127.0.0.2:9042': response(0x2200) });
  assert.equal(isRetriableCassandraError(refused), false);
  const unreachable = new NoHostAvailableError({ '127.0.0.1:9042': new Error('connect ECONNREFUSED 127.0.0.1:9042') });
  assert.equal(isRetriableCassandraError(unreachable), true);
  const mixed = new NoHostAvailableError({ '127.0.0.1:9042': response(0x2200), '127.0.0.2:9042': response(0x1001) });
  assert.equal(isRetriableCassandraError(mixed), true);
  assert.equal(isRetriableCassandraError(new NoHostAvailableError({})), true);
});
