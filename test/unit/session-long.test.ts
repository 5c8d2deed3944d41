import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fromLong, Long, toLong } from '../../src/cassandra/session.js';

test('toLong/fromLong are exact over the whole int64 range, and agree with the driver\'s own parsing', () => {
  const edges = [0n, 1n, -1n, 2n ** 31n - 1n, 2n ** 31n, -(2n ** 31n), -(2n ** 31n) - 1n, 2n ** 32n - 1n, 2n ** 32n, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n)];
  let x = 0x9e3779b97f4a7c15n;
  const random = Array.from({ length: 2000 }, () => (x = BigInt.asIntN(64, x * 6364136223846793005n + 1442695040888963407n)));
  for (const v of [...edges, ...random]) {
    const l = toLong(v);
    assert.equal(l.toString(), v.toString());
    assert.ok(l.equals(Long.fromString(v.toString())));
    assert.equal(fromLong(l), v);
    assert.equal(fromLong(Long.fromString(v.toString())), v);
  }
});
