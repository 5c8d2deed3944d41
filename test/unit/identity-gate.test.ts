// IdentityGate (src/engine/identity-gate.ts) with a fake admin: a batch goes on only after a
// topic-identity check that started after it arrived; one check in flight serves every batch before it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ExactlyOnceError } from '../../src/errors.js';
import { IdentityGate } from '../../src/engine/identity-gate.js';

function fakeAdmin(initial: string) {
  let id: string | null = initial;
  const pending: Array<() => void> = [];
  return {
    calls: 0,
    set(next: string | null) {
      id = next;
    },
    /** Completes the oldest check in flight, with the ID the topic has at that moment. */
    answer() {
      pending.shift()?.();
    },
    topicId(): Promise<string | null> {
      this.calls++;
      return new Promise((resolve) => pending.push(() => resolve(id)));
    },
  };
}

const tick = () => new Promise((r) => setImmediate(r));

test('a batch that arrived while a check was in flight waits for the next check, which sees the re-created topic', async () => {
  const admin = fakeAdmin('old');
  const stops: ExactlyOnceError[] = [];
  const gate = new IdentityGate({ topic: 't', admin, binding: { topicId: 'old', settingsChanged: undefined }, onRecreated: (e) => stops.push(e), retrying: (fn) => fn() });
  const first = gate.confirm(gate.ticket()); // batch 1 arrives: check 1 starts
  await tick();
  assert.equal(admin.calls, 1);
  admin.set('new'); // the topic is re-created while check 1 is in flight…
  const secondTicket = gate.ticket(); // …and batch 2 (read from the new topic) arrives
  let secondDone = false;
  const second = gate.confirm(secondTicket).then(() => (secondDone = true));
  const third = gate.confirm(gate.ticket()); // batch 3 shares the same wait
  admin.answer(); // check 1 answers with what the topic is now: 'new'
  await first;
  await tick();
  assert.equal(secondDone, false, 'check 1 started before batch 2 arrived: it does not vouch for it');
  assert.equal(admin.calls, 2, 'one more check serves batches 2 and 3');
  admin.answer();
  await Promise.all([second, third]);
  assert.equal(admin.calls, 2);
  assert.equal(stops.length, 2, 'each check saw the new ID and stopped the partitions');
  assert.equal(stops[0]!.code, 'EO_TOPIC_RECREATED');
  assert.match(stops[0]!.message, /topic ID old, the topic now has ID new/);
});

test('an unchanged topic lets batches through; a topic gone for now stops nothing', async () => {
  const admin = fakeAdmin('same');
  const stops: ExactlyOnceError[] = [];
  const gate = new IdentityGate({ topic: 't', admin, binding: { topicId: 'same', settingsChanged: undefined }, onRecreated: (e) => stops.push(e), retrying: (fn) => fn() });
  const a = gate.confirm(gate.ticket());
  await tick();
  admin.answer();
  await a;
  admin.set(null);
  const b = gate.confirm(gate.ticket());
  await tick();
  admin.answer();
  await b;
  assert.deepEqual(stops, []);
  assert.equal(admin.calls, 2);
});

test('records fetched before a check started are vouched for by it: their batch, handed over later, needs no check of its own', async () => {
  const admin = fakeAdmin('same');
  const stops: ExactlyOnceError[] = [];
  let counted = 0;
  const gate = new IdentityGate({
    topic: 't',
    admin,
    binding: { topicId: 'same', settingsChanged: undefined },
    onRecreated: (e) => stops.push(e),
    retrying: (fn) => fn(),
    onCheck: () => counted++,
  });
  const fetchedAt = gate.ticket(); // records fetched…
  const early = gate.confirm(fetchedAt); // …and their check started at once (the consumer's onFetched)
  await tick();
  admin.answer();
  await early;
  // The batch waited behind its partition's batch in flight; handed over now, it goes on at once.
  let handedOver = false;
  const later = gate.confirm(fetchedAt).then(() => (handedOver = true));
  await tick();
  assert.equal(handedOver, true);
  await later;
  assert.equal(admin.calls, 1);
  // Records fetched after that check started are not: they wait for a check of their own.
  const next = gate.confirm(gate.ticket());
  await tick();
  assert.equal(admin.calls, 2);
  admin.answer();
  await next;
  assert.deepEqual(stops, []);
  assert.equal(counted, 2, 'exactlyonce_identity_checks_total counts the checks started');
});
