import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTable } from '../../src/text-table.js';

test('a set column prints as cqlsh writes it; lists, maps and bytes as before', () => {
  assert.equal(
    formatTable(['s', 'l', 'm', 'b'], [[new Set([1, 3]), ['a', 'b'], { k: 1 }, Buffer.from([0, 255])], [new Set(), null, {}, Buffer.alloc(0)]]),
    [' s      | l    | m       | b     ', '--------+------+---------+-------', ' {1, 3} | a,b  | {"k":1} | 0x00ff', ' {}     | null | {}      | 0x    '].join('\n'),
  );
});
