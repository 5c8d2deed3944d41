// A Kafka client given up while connecting is closed in the background, and a worker's exit waits for
// it (src/kafka/client.ts): exiting under a client's live threads crashed the process (a SIGSEGV).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { closeInBackground, kafkaClientsClosed } from '../../src/kafka/client.js';

test('the exit waits for every client closing in the background, a failed close included', async () => {
  const closed: string[] = [];
  closeInBackground(new Promise((r) => setTimeout(r, 50)).then(() => closed.push('a')));
  closeInBackground(new Promise((_, reject) => setTimeout(() => reject(new Error('the disconnect failed')), 80)).finally(() => closed.push('b')));
  await kafkaClientsClosed(60_000);
  assert.deepEqual(closed, ['a', 'b']);
  // Nothing left: resolves at once.
  await kafkaClientsClosed(60_000);
});

test('a close that never ends holds the exit only until the deadline', async () => {
  let settled = false;
  closeInBackground(new Promise(() => undefined));
  const waited = kafkaClientsClosed(30).then(() => (settled = true));
  await new Promise((r) => setTimeout(r, 5));
  assert.equal(settled, false);
  await waited;
  assert.equal(settled, true);
});
