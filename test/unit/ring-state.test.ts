// ringState (src/cassandra/session.ts): the nodes held down and the last node start; a gossip_info that
// cannot be read leaves the start unknown and says why (the runner warns once), a retriable error is thrown.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ringState, type Client } from '../../src/cassandra/session.js';

const host = (address: string, up: boolean) => ({ address, isUp: () => up });
const client = (execute: () => Promise<unknown>) => ({ hosts: { values: () => [host('10.0.0.1:9042', true), host('10.0.0.2:9042', false)] }, execute }) as unknown as Client;

test('ringState: the down nodes and the latest gossip generation, as epoch ms rounded up to the second', async () => {
  const r = await ringState(client(async () => ({ rows: [{ generation: 1_700_000_000 }, { generation: 1_700_000_123 }, { generation: null }] })));
  assert.deepEqual(r, { down: ['10.0.0.2:9042'], lastStart: 1_700_000_124_000 });
});

test('ringState: gossip_info unreadable (older server, no permission): the start is unknown and the cause is handed over; retriable errors are thrown', async () => {
  const causes: unknown[] = [];
  const refused = Object.assign(new Error('User x has no SELECT permission on <table system_views.gossip_info>'), { name: 'ResponseError', code: 0x2100 });
  const r = await ringState(client(async () => Promise.reject(refused)), (e) => causes.push(e));
  assert.deepEqual(r, { down: ['10.0.0.2:9042'], lastStart: null });
  assert.equal(causes.length, 1);
  assert.equal(causes[0], refused);
  const timeout = Object.assign(new Error('timed out'), { name: 'OperationTimedOutError' });
  await assert.rejects(ringState(client(async () => Promise.reject(timeout)), (e) => causes.push(e)), /timed out/);
  assert.equal(causes.length, 1);
});
