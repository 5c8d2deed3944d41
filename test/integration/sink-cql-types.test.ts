// The CQL types a sink column can have, against the real Cassandra: for each type, records in, the rows
// out, equal (by canonical value, as the auditor compares them), and `verify --job` agrees, in upsert
// mode (key by key) and in log mode (offset by offset). Before the types were added, the config was
// refused (`columns.s.type: expected a CQL type`).
import assert from 'node:assert/strict';
import { test, type TestContext } from 'node:test';
import type { AuditReport } from '../../src/verify/report.js';
import { CheckpointStore } from '../../src/engine/checkpoint-store.js';
import { connectionArgs } from '../../src/harness/cli-process.js';
import { Producer } from '../../src/kafka/producer.js';
import { canonical } from '../../src/jobs/sink/cql-types.js';
import { applySinkSchema, freshKeyspace, freshTopic, runCli, sinkConfigFile, startCli, suffix, testConfig, waitFor } from '../helpers.js';

const COLUMNS = {
  s: 'smallint',
  ti: 'tinyint',
  f: 'float',
  d: 'date',
  tm: 'time',
  vc: 'varchar',
  b: 'blob',
  ip: 'inet',
  tu: 'timeuuid',
  st: 'set<int>',
  nested: 'list<frozen<map<text, set<text>>>>',
  ml: 'map<text, frozen<list<date>>>',
};
/** Each record's value (k is its key) and, per column, the canonical value the row must hold. */
const RECORDS: Array<{ value: Record<string, unknown>; row: Record<string, unknown> }> = [
  {
    value: { k: 'a', s: -32768, ti: 127, f: 1.1, d: '2024-02-29', tm: '23:59:59.123456789', vc: 'é ✓', b: 'AAEC/w==', ip: '10.0.0.1', tu: 'd2177dd0-eaa2-11de-a572-001b779c76e3', st: [3, 1, 3], nested: [{ x: ['b', 'a'] }, {}], ml: { q: ['2026-01-02', '1970-01-01'] } },
    row: { s: -32768, ti: 127, f: Math.fround(1.1), d: '2024-02-29', tm: '23:59:59.123456789', vc: 'é ✓', b: '000102ff', ip: '10.0.0.1', tu: 'd2177dd0-eaa2-11de-a572-001b779c76e3', st: [1, 3], nested: [{ x: ['a', 'b'] }, null], ml: { q: ['2026-01-02', '1970-01-01'] } },
  },
  {
    value: { k: 'b', s: 7, ti: -128, f: -0.5, d: '1900-01-01', tm: '00:00', vc: '', b: '', ip: '2001:db8::ff', tu: 'D2177DD0-EAA2-11DE-A572-001B779C76E4', st: [], nested: [], ml: {} },
    row: { s: 7, ti: -128, f: -0.5, d: '1900-01-01', tm: '00:00:00', vc: '', b: '', ip: '2001:db8::ff', tu: 'd2177dd0-eaa2-11de-a572-001b779c76e4', st: null, nested: null, ml: null },
  },
];

async function roundTrip(t: TestContext, mode: 'upsert' | 'log') {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 1);
  const name = `types_${suffix()}`;
  const columns = Object.entries({ k: 'text', ...COLUMNS }).map(([c, type]) => `  ${c}: '${type}'`).join('\n');
  const sink = sinkConfigFile(t, 'types.yaml', `name: ${name}\ntopic: ${config.topic}\ntable: typed\nmode: ${mode}\n${mode === 'upsert' ? 'key: [k]\n' : ''}columns:\n${columns}\n`);
  const args = connectionArgs(config);
  await applySinkSchema(config, sink);
  const producer = new Producer(config);
  await producer.connect();
  t.after(() => producer.close());
  for (const r of RECORDS) await producer.send(config.topic, [{ key: r.value['k'] as string, value: JSON.stringify(r.value), partition: 0 }]);
  const worker = startCli(t, ['sink', '--config', sink, ...args]);
  const store = new CheckpointStore(session, config.keyspace, config.topic, name);
  await waitFor(async () => ((await store.readAll()).get(0) === BigInt(RECORDS.length) ? true : undefined), {
    timeoutMs: 120_000,
    message: `the sink stores both records (${worker.output().slice(-2000)})`,
  });
  const cols = ['k', ...Object.keys(COLUMNS)];
  const rows = (await session.execute(`SELECT ${cols.join(', ')} FROM ${config.keyspace}.typed`)).rows
    .map((r) => Object.fromEntries(cols.map((c) => [c, canonical(r[c])])))
    .sort((a, b) => String(a['k']).localeCompare(String(b['k'])));
  assert.deepEqual(rows, RECORDS.map((r) => ({ k: r.value['k'], ...r.row })));
  const verify = await runCli(['verify', ...args, '--job', sink, '--full', '--json']);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  const report = JSON.parse(verify.stdout) as AuditReport;
  assert.deepEqual([report.totals.records, report.totals.quarantined, report.violationTotal], [2, 0, 0]);
}

test('upsert: every type round-trips through Cassandra, and verify --job agrees', (t) => roundTrip(t, 'upsert'));
test('log: every type round-trips through Cassandra, and verify --job agrees', (t) => roundTrip(t, 'log'));
