// The keyed merge's external sort (src/verify/external-sort.ts): lines come back in order whether
// they fit the budget or were spilled to many runs (merged more than FAN_IN at a time), and its files go.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { ExternalSort } from '../../src/verify/external-sort.js';
import { packKey, unpack } from '../../src/verify/upsert-audit.js';
import { types } from '../../src/cassandra/session.js';

async function sortAll(lines: string[], budget: number, dir: string): Promise<{ out: string[]; runs: number }> {
  const s = new ExternalSort(budget, dir);
  try {
    for (const l of lines) await s.add(l);
    const out: string[] = [];
    for await (const l of s.sorted()) out.push(l);
    return { out, runs: s.spilledRuns };
  } finally {
    await s.close();
  }
}

test('in memory and spilled (more runs than one merge takes), the order is the same, and no file is left', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-sort-test-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  let x = 7;
  const lines = Array.from({ length: 20_000 }, (_, i) => {
    x = (x * 48271) % 2147483647;
    return `${JSON.stringify(`key-${x % 5000}`)}\u0000${String(i % 7).padStart(10, '0')}\u0000${i}\u0000{"v":"é ü ${i}"}`;
  });
  const want = [...lines].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const inMemory = await sortAll(lines, 1 << 30, dir);
  assert.equal(inMemory.runs, 0);
  assert.deepEqual(inMemory.out, want);
  const spilled = await sortAll(lines, 8 * 1024, dir);
  assert.ok(spilled.runs > 64, `spilled ${spilled.runs} runs`);
  assert.deepEqual(spilled.out, want);
  assert.deepEqual(readdirSync(dir), [], 'the runs are removed');
  assert.ok(existsSync(dir));
});

test("a key's driver values survive the spill's JSON", () => {
  const key = {
    id: types.Long.fromString('-9223372036854775808'),
    amount: types.BigDecimal.fromString('1.50'),
    u: types.Uuid.fromString('6f1e3a5c-1b2d-4e8f-9a0b-1c2d3e4f5a6b'),
    at: new Date(1_700_000_000_123),
    n: 42,
    s: 'x',
    b: 12345678901234567890n,
    raw: Buffer.from([0, 255]),
    list: ['a', 'b'],
  };
  const back = unpack(JSON.parse(JSON.stringify(packKey(key)))) as typeof key;
  assert.equal(back.id.toString(), '-9223372036854775808');
  assert.ok(back.id instanceof types.Long);
  assert.equal(back.amount.toString(), '1.50');
  assert.ok(back.u instanceof types.Uuid);
  assert.equal(back.u.toString(), key.u.toString());
  assert.equal(back.at.getTime(), key.at.getTime());
  assert.deepEqual([back.n, back.s, back.b, back.raw.toString('hex'), back.list], [42, 'x', 12345678901234567890n, '00ff', ['a', 'b']]);
});
