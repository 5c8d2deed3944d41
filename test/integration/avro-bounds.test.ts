// One 11-byte Avro record whose array claims 2^31−1 items (and one whose map claims 2^60 entries),
// against the real stack and Schema Registry: each is quarantined with its reason and offset, the
// records after them are stored, and the sink worker stays up (issue 42: it died of heap exhaustion,
// and so did every next owner of the partition).
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { avroType, encodeAvro } from '../../src/formats/avro.js';
import { withWireHeader } from '../../src/formats/wire.js';
import { Producer } from '../../src/kafka/producer.js';
import { zigzag } from '../fixtures/varint.js';
import { SchemaRegistry } from '../../src/registry/schema-registry.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { CASSANDRA, BROKERS, cassandraSession, ensureRegistry, freshTopic, REGISTRY_ENV, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import type { ConnectionConfig } from '../../src/config.js';

const conn = (c: ConnectionConfig) => ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', c.keyspace];

const SCHEMA = {
  type: 'record',
  name: 'Tagged',
  fields: [
    { name: 'id', type: 'long' },
    { name: 'tags', type: { type: 'array', items: 'string' } },
    { name: 'counts', type: { type: 'map', values: 'long' } },
  ],
};

test('an Avro record claiming 2^31−1 array items (11 bytes) or 2^60 map entries is quarantined as bad_payload; the records after it are stored; the worker lives', async (t) => {
  await ensureRegistry();
  const config = testConfig();
  await freshTopic(t, config, 1);
  const session = await cassandraSession(t, config);
  const id = await new SchemaRegistry(config.schemaRegistry).register(`${config.topic}-value`, 'AVRO', JSON.stringify(SCHEMA));
  const type = avroType(JSON.stringify(SCHEMA));
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'eo-avro-bounds-')), 'sink.json');
  writeFileSync(file, JSON.stringify({ name: 'tagged', topic: config.topic, format: 'avro', table: 'tagged', mode: 'log' }));
  const applied = await runCli(['schema', 'apply', ...conn(config), '--job', file], REGISTRY_ENV);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);

  // id 1, then an array block of 2^31−1 items and nothing behind it.
  const hugeArray = withWireHeader(id, Buffer.from([...zigzag(1n), ...zigzag(2n ** 31n - 1n)]));
  assert.equal(hugeArray.length, 11);
  // id 2, an empty array, then a map block of 2^60 entries.
  const hugeMap = withWireHeader(id, Buffer.from([...zigzag(2n), 0, ...zigzag(2n ** 60n)]));
  const good = (n: bigint) => withWireHeader(id, encodeAvro(type, { id: n, tags: [`t${n}`], counts: { k: n } }));
  const p = new Producer(config);
  try {
    await p.connect();
    await p.send(config.topic, [good(0n), hugeArray, hugeMap, good(3n), good(4n)].map((value) => ({ key: null, value, partition: 0 })));
  } finally {
    await p.close();
  }

  // A small heap: before the bound, the first bad record took the worker down within seconds.
  const worker = startCli(t, ['sink', ...conn(config), '--config', file, '--max-batch', '1'], { ...REGISTRY_ENV, NODE_OPTIONS: '--max-old-space-size=256' });
  const quarantined = await waitFor(async () => {
    assert.equal(worker.exitCode, null, `the worker exited (${worker.exitCode}): ${worker.output().slice(-2000)}`);
    const q = await runCli(['quarantine', 'list', '--cassandra', CASSANDRA, '--keyspace', config.keyspace, '--job', 'tagged', '--json']);
    const l = q.stdout.trim().split('\n').filter((x) => x !== '').map((x) => JSON.parse(x) as { offset: string; reason: string; detail: string });
    return l.length === 2 ? l.sort((a, b) => Number(a.offset) - Number(b.offset)) : undefined;
  }, { timeoutMs: 120_000, message: 'the two records quarantined' });
  t.diagnostic(quarantined.map((q) => `offset ${q.offset}: ${q.reason}: ${q.detail}`).join('\n'));
  assert.deepEqual(quarantined.map((q) => [q.offset, q.reason, q.detail]), [
    ['1', 'bad_payload', `schema id ${id} (AVRO): an array block at byte 1 claims 2147483647 items; 0 bytes are left`],
    ['2', 'bad_payload', `schema id ${id} (AVRO): a map block at byte 2 claims ${2 ** 60} items; 0 bytes are left`],
  ]);
  const rows = await waitFor(async () => {
    const r = await session.execute(`SELECT offset, id, tags, counts FROM ${config.keyspace}.tagged WHERE partition = 0`);
    return r.rowLength === 3 ? r.rows.map((row) => canonical({ ...row })) : undefined;
  }, { timeoutMs: 120_000, message: 'the records around them stored' });
  assert.deepEqual(rows.reverse(), [
    { offset: '0', id: '0', tags: ['t0'], counts: { k: '0' } },
    { offset: '3', id: '3', tags: ['t3'], counts: { k: '3' } },
    { offset: '4', id: '4', tags: ['t4'], counts: { k: '4' } },
  ]);
  assert.equal(worker.exitCode, null, 'the worker is still running');
});
