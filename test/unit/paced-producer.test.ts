import assert from 'node:assert/strict';
import { test } from 'node:test';
import { producePaced } from '../../src/harness/paced-producer.js';
import type { OutgoingRecord } from '../../src/kafka/producer.js';

/** A producer whose sends resolve when the test says so (or at once), recording each send. */
function fakeProducer(o: { auto?: boolean; fail?: number } = {}) {
  const sends: Array<{ topic: string; records: OutgoingRecord[]; at: number; resolve: () => void }> = [];
  let open = 0;
  let maxOpen = 0;
  return {
    sends,
    maxOpen: () => maxOpen,
    send(topic: string, records: OutgoingRecord[]): Promise<void> {
      open++;
      maxOpen = Math.max(maxOpen, open);
      const index = sends.length;
      return new Promise<void>((resolve, reject) => {
        const done = () => {
          open--;
          if (index === o.fail) reject(new Error('broker said no'));
          else resolve();
        };
        sends.push({ topic, records, at: Date.now(), resolve: done });
        if (o.auto !== false) setImmediate(done);
      });
    },
  };
}

const records = (n: number): OutgoingRecord[] => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, value: `v${i}` }));

test('every record is sent once, in order, in chunks of at most `chunk`; the result counts the acknowledged ones', async () => {
  const p = fakeProducer();
  const acked: number[] = [];
  const n = await producePaced(p, records(1050), { topic: 't', chunk: 500, inFlight: 4, onAcked: (a) => acked.push(a) });
  assert.equal(n, 1050);
  assert.deepEqual(p.sends.map((s) => s.records.length), [500, 500, 50]);
  assert.deepEqual(p.sends.flatMap((s) => s.records.map((r) => r.key)), records(1050).map((r) => r.key));
  assert.deepEqual(p.sends.map((s) => s.topic), ['t', 't', 't']);
  assert.deepEqual(acked, [500, 1000, 1050]);
});

test('no more than `inFlight` sends are open at once', async () => {
  const p = fakeProducer({ auto: false });
  const run = producePaced(p, records(100), { topic: 't', chunk: 10, inFlight: 3 });
  for (let i = 0; i < 10; i++) {
    while (p.sends.length <= i) await new Promise((r) => setImmediate(r));
    p.sends[i]!.resolve();
  }
  assert.equal(await run, 100);
  assert.equal(p.maxOpen(), 3);
});

test('a rate spreads the records over time: 50 records at 500/s take about 100 ms', async () => {
  const p = fakeProducer();
  const started = Date.now();
  assert.equal(await producePaced(p, records(50), { topic: 't', rate: 500, chunk: 500, inFlight: 8 }), 50);
  const took = Date.now() - started;
  assert.ok(took >= 80 && took < 2000, `took ${took} ms`);
  assert.ok(p.sends.length >= 5, `${p.sends.length} sends`);
});

test('records are taken from the iterable only when due', async () => {
  const p = fakeProducer();
  const started = Date.now();
  const takenAt: number[] = [];
  const lazy = function* () {
    for (let i = 0; i < 20; i++) {
      takenAt.push(Date.now() - started);
      yield { key: null, value: String(i) };
    }
  };
  await producePaced(p, lazy(), { topic: 't', rate: 200, chunk: 500, inFlight: 8 });
  // Record i is due at 5·i ms; it is taken at most one pacing step (10 ms) early.
  for (const [i, at] of takenAt.entries()) assert.ok(at >= 5 * i - 11, `record ${i} taken at ${at} ms`);
});

test('pauseAfter pauses after the given records, with what came before already sent', async () => {
  const p = fakeProducer();
  const started = Date.now();
  await producePaced(p, records(9), { topic: 't', chunk: 500, inFlight: 4, pauseAfter: (i) => (i % 3 === 0 ? 30 : 0) });
  assert.deepEqual(p.sends.map((s) => s.records.length), [3, 3, 3]);
  assert.ok(Date.now() - started >= 85);
});

test('a failed send stops the stream and is thrown once the others settled', async () => {
  const p = fakeProducer({ fail: 1 });
  await assert.rejects(producePaced(p, records(5000), { topic: 't', chunk: 100, inFlight: 1 }), /broker said no/);
  assert.equal(p.sends.length, 2);
});

test('an abort stops taking records; what was taken is still sent and counted', async () => {
  const p = fakeProducer();
  const abort = new AbortController();
  setTimeout(() => abort.abort(), 50);
  const n = await producePaced(p, records(10_000), { topic: 't', rate: 200, chunk: 500, inFlight: 8, signal: abort.signal });
  assert.ok(n > 0 && n < 1000, `${n} acknowledged`);
  assert.equal(p.sends.reduce((a, s) => a + s.records.length, 0), n);
});
