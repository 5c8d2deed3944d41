// Declarative sinks under chaos, proven by `verify --job`: an upsert sink (orders keyed by order id,
// with updates, deletes and malformed records) through kills, a zombie and a Cassandra restart of the
// shared local stack, and a log-mode sink through kills and a zombie. Fixed seeds, as in chaos.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { KafkaAdmin } from '../../src/kafka/admin.js';
import { readTopic } from '../../src/kafka/log-reader.js';
import { loadConnectionConfig } from '../../src/config.js';
import { connect } from '../../src/cassandra/session.js';
import { BROKERS, CASSANDRA, ensureRegistry, REGISTRY_ENV, REGISTRY_PORT, runCli } from '../helpers.js';
import { runChaos, type ChaosFigures } from '../chaos-run.js';

async function chaos(t: import('node:test').TestContext, args: string[], env: Record<string, string> = {}): Promise<ChaosFigures> {
  const figures = await runChaos(t, ['--keep', ...args], env);
  // --keep: what the run made is removed here, once the test is done with it.
  t.after(async () => {
    const config = loadConnectionConfig({ brokers: BROKERS, cassandra: CASSANDRA, keyspace: figures.keyspace, topic: figures.topic }, {});
    const session = await connect(config);
    await session.execute(`DROP KEYSPACE IF EXISTS ${figures.keyspace}`).catch(() => undefined);
    await session.shutdown();
    const admin = new KafkaAdmin(config);
    await admin.deleteTopic(figures.topic).catch(() => undefined);
    await admin.deleteTopic(`${figures.topic}.alerts`).catch(() => undefined);
    await admin.deleteTopic(`${figures.topic}.closed`).catch(() => undefined);
    await admin.close();
  });
  // (With --transactional, a transaction whose commit a crash cut short could have gone either way: chaos checks the range.)
  if ((figures.transactions?.unknown ?? 0) === 0) assert.equal(figures.records, figures.events + figures.injected, 'every record produced was judged');
  assert.equal(figures.faults['zombies'], 1);
  assert.equal(figures.faults['skipped'], 0);
  return figures;
}

// chaos starts its workers with --startup-timeout 900, so a replacement started while the killed broker
// recovers (115 s once on a loaded 2-core machine) waits for it instead of exiting.
test('an upsert sink (orders: updates, deletes, malformed records) under kills, a zombie, a Cassandra and a Kafka crash: verify --job proves the table equals the last record per key', async (t) => {
  const f = await chaos(t, ['--job', 'examples/sinks/orders.yaml', '--events', '20000', '--duration', '60', '--workers', '3', '--partitions', '6', '--kills', '6', '--zombies', '1', '--cassandra-restarts', '1', '--kafka-restarts', '1', '--add-remove', '1', '--injections', '3', '--bad-ratio', '0.02', '--seed', '1101']);
  assert.ok(f.faults['kills']! >= 6);
  assert.equal(f.faults['zombiesThatLostPartitions'], 1, 'the zombie owned partitions when frozen and found them gone');
  assert.equal(f.faults['cassandraRestarts'], 1);
  assert.equal(f.faults['kafkaRestarts'], 1);

  // The same proof from the command line, on the kept keyspace (the run's config copy names its topic).
  const sink = path.join(f.runDir, 'sink.json');
  const args = ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', f.keyspace, '--job', sink, '--no-record', '--full'];
  const ok = await runCli(['verify', ...args, '--json']);
  assert.equal(ok.code, 0, ok.stderr);
  const report = JSON.parse(ok.stdout) as { ok: boolean; job: string; totals: { records: number; quarantined: number; stored: number } };
  assert.equal(report.job, 'orders');
  assert.equal(report.totals.records, f.records);
  assert.equal(report.totals.stored + report.totals.quarantined, f.records);
  assert.ok(report.totals.quarantined > 0, 'malformed records were quarantined');

  // The audit is not blind: another writer's wall-clock write, and a lost row, are both found.
  const config = loadConnectionConfig({ brokers: BROKERS, cassandra: CASSANDRA, keyspace: f.keyspace }, {});
  const session = await connect(config);
  let rewritten = '';
  let deleted = '';
  try {
    const rows = (await session.execute(`SELECT order_id, customer FROM ${f.keyspace}.orders LIMIT 2`)).rows;
    assert.equal(rows.length, 2);
    await session.execute(`UPDATE ${f.keyspace}.orders SET customer = ? WHERE order_id = ?`, [rows[0]!['customer'], rows[0]!['order_id']], { prepare: true });
    await session.execute(`DELETE FROM ${f.keyspace}.orders USING TIMESTAMP 9000000000000000 WHERE order_id = ?`, [rows[1]!['order_id']], { prepare: true });
    rewritten = String(rows[0]!['order_id']);
    deleted = String(rows[1]!['order_id']);
  } finally {
    await session.shutdown();
  }
  const bad = await runCli(['verify', ...args]);
  assert.equal(bad.code, 9, bad.stdout + bad.stderr);
  assert.match(bad.stderr, /^error EO_VERIFY_FAILED: 2 violation\(s\) of exactly-once \(missing 1, mismatch 1\)/);
  assert.ok(bad.stdout.includes(`orders key {"order_id":"${rewritten}"}: written at timestamp `), bad.stdout);
  assert.match(bad.stdout, /another writer touched the table/);
  assert.ok(bad.stdout.includes(`orders key {"order_id":"${deleted}"}: no row, though its last record`), bad.stdout);
});

test('a log-mode sink under kills and a zombie: verify --job proves every offset once, in the table or the quarantine', async (t) => {
  const f = await chaos(t, ['--job', 'examples/sinks/clicks.json', '--events', '10000', '--duration', '30', '--workers', '2', '--partitions', '4', '--kills', '3', '--zombies', '1', '--cassandra-restarts', '0', '--kafka-restarts', '0', '--add-remove', '0', '--injections', '2', '--bad-ratio', '0.02', '--seed', '1102']);
  assert.ok(f.faults['kills']! >= 3);
  assert.ok(readdirSync(f.runDir).includes('sink.json'));
  assert.ok(f.runDir.startsWith(os.tmpdir()));
});

// Avro keys and values through the local stack's Schema Registry (started here when it does not run),
// which is SIGKILLed and started again mid-run: workers retry it, never quarantine or skip for it, and
// the auditor decodes every record through the same registry.
test('an Avro upsert sink under kills, a zombie and a Schema Registry crash: verify --job proves the table equals the last record per key', async (t) => {
  await ensureRegistry();
  const env = { ...REGISTRY_ENV, EXACTLYONCE_REGISTRY_PORT: String(REGISTRY_PORT) };
  const f = await chaos(t, ['--job', 'examples/sinks/orders-avro.yaml', '--events', '8000', '--duration', '40', '--workers', '2', '--partitions', '4', '--kills', '4', '--zombies', '1', '--cassandra-restarts', '0', '--kafka-restarts', '0', '--registry-restarts', '1', '--add-remove', '0', '--injections', '2', '--bad-ratio', '0.02', '--seed', '2103'], env);
  assert.ok(f.faults['kills']! >= 4);
  assert.equal(f.faults['registryRestarts'], 1);
  assert.equal(f.faults['zombiesThatLostPartitions'], 1, 'the zombie owned partitions when frozen and found them gone');
  const sink = path.join(f.runDir, 'sink.json');
  const v = await runCli(['verify', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', f.keyspace, '--job', sink, '--full', '--no-record', '--json'], env);
  assert.equal(v.code, 0, v.stderr);
  const report = JSON.parse(v.stdout) as { job: string; totals: { records: number; quarantined: number; stored: number }; partitions: Array<{ reasons: Record<string, number> }> };
  assert.equal(report.job, 'orders_avro');
  assert.equal(report.totals.records, f.records);
  const reasons = new Set(report.partitions.flatMap((p) => Object.keys(p.reasons)));
  for (const r of ['bad_payload', 'missing_magic_byte', 'unknown_schema', 'missing_field']) assert.ok(reasons.has(r), `some records quarantined as ${r} (${[...reasons].join(', ')})`);
});

// Issue 24, for a sink: the upstream writes in transactions, a third of them aborted (the last one too).
// Aborted records must never reach the table — in upsert mode not even as a key's newest value — and the
// workers must drain past the markers through kills and a Kafka crash. The sink orders each key's records
// by a version (issue 37 item 6) that the samples draw at random, so a key's records come in no version
// order and sometimes tie: the row must be the record of the highest version through every fault.
test('an upsert sink ordered by a version, fed by a transactional producer (aborted records and markers) under kills, a zombie and a Kafka crash: verify --job proves the table', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sink-chaos-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const yaml = path.join(dir, 'orders.yaml');
  writeFileSync(yaml, `${readFileSync('examples/sinks/orders.yaml', 'utf8')}version: rev\n`);
  const f = await chaos(t, ['--job', yaml, '--transactional', '--events', '15000', '--duration', '45', '--workers', '3', '--partitions', '4', '--kills', '4', '--zombies', '1', '--cassandra-restarts', '0', '--kafka-restarts', '1', '--add-remove', '0', '--injections', '2', '--bad-ratio', '0.02', '--seed', '2425']);
  const txn = f.transactions!;
  assert.ok(txn.committed > 0 && txn.aborted > 1, `transactions ${JSON.stringify(txn)}`);
  assert.ok(f.events < 15000, 'records of aborted transactions are not counted as generated');
  assert.ok(f.faults['kills']! >= 4);
  assert.equal(f.faults['kafkaRestarts'], 1);
});

test('an aggregate sink (revenue per customer and minute, windows closed to a topic 5 min on) under kills, a zombie and a Cassandra crash that loses acknowledged writes: verify --job proves every partial, every row and the closed topic', async (t) => {
  // The example with closeAfter: the samples' times are spread over half an hour in random order, so
  // windows close early on every partition and most later records are late: each is published again.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-sink-chaos-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const yaml = path.join(dir, 'order-totals.yaml');
  writeFileSync(yaml, `${readFileSync('examples/sinks/order-totals.yaml', 'utf8')}closeAfter: 5m\n`);
  const f = await chaos(t, ['--job', yaml, '--events', '20000', '--duration', '60', '--workers', '3', '--partitions', '6', '--kills', '4', '--zombies', '1', '--cassandra-restarts', '1', '--kafka-restarts', '0', '--add-remove', '1', '--injections', '2', '--bad-ratio', '0.02', '--seed', '1201']);
  assert.ok(f.faults['kills']! >= 4);
  assert.equal(f.faults['cassandraRestarts'], 1);

  const sink = path.join(f.runDir, 'sink.json');
  const args = ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', f.keyspace, '--job', sink, '--no-record', '--full'];
  const ok = await runCli(['verify', ...args, '--json']);
  assert.equal(ok.code, 0, ok.stderr);
  const report = JSON.parse(ok.stdout) as { job: string; totals: { records: number; quarantined: number; stored: number } };
  assert.equal(report.job, 'order-totals');
  assert.equal(report.totals.stored + report.totals.quarantined, f.records);
  // The closed topic holds every window: each partition's watermark passed them all but the last few.
  const closedKeys = new Set<string>();
  await readTopic(loadConnectionConfig({ brokers: BROKERS, cassandra: CASSANDRA, keyspace: f.keyspace }, {}), `${f.topic}.closed`, (records) => {
    for (const r of records) closedKeys.add(r.key!.toString());
  });
  assert.ok(closedKeys.size > 100, `${closedKeys.size} windows published`);

  // The audit is not blind: a result row changed at a higher timestamp is no longer its partials' merge.
  const config = loadConnectionConfig({ brokers: BROKERS, cassandra: CASSANDRA, keyspace: f.keyspace }, {});
  const session = await connect(config);
  try {
    const row = (await session.execute(`SELECT customer, window_start, orders FROM ${f.keyspace}.order_totals LIMIT 1`)).first();
    await session.execute(`UPDATE ${f.keyspace}.order_totals USING TIMESTAMP 9000000000000000 SET orders = ? WHERE customer = ? AND window_start = ?`, [BigInt(String(row['orders'])) + 1n, row['customer'], row['window_start']], { prepare: true });
  } finally {
    await session.shutdown();
  }
  const bad = await runCli(['verify', ...args]);
  assert.equal(bad.code, 9, bad.stdout + bad.stderr);
  // Three: the row against its partials, its write time, and the closed window's latest message against the row.
  assert.match(bad.stderr, /^error EO_VERIFY_FAILED: 3 violation\(s\) of exactly-once \(mismatch 3\); first: the row of .* in order_totals: orders is \d+, its partials give \d+/);
  assert.match(bad.stdout, /the latest message of .* \(eo-chaos-[0-9a-f]+\.closed partition \d+ offset \d+\): orders is \d+, the row holds \d+/);
  assert.match(bad.stdout, /was written at 9000000000000000, not at its partials' merge timestamp \d+: written by a merge that read other partials, or by another writer/);
});

// Issue 37 item 6 (the envelope) under chaos: Debezium change events (Postgres-shaped: c, r and u with
// the row as `after`, d with it as `before` and then its tombstone) ordered by source.lsn, which the
// samples draw at random per change, so a key's changes come in no order. Whatever the kills and the
// zombie replay, each key's row must be its change of the highest LSN, or none after a delete.
test('a Debezium upsert sink ordered by source.lsn under kills and a zombie: verify --job proves the table, deletes and tombstones included', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sink-chaos-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const yaml = path.join(dir, 'customers.yaml');
  writeFileSync(yaml, ['name: customers', 'topic: pg.public.customers', 'table: customers', 'mode: upsert', 'envelope: debezium', 'key: [id]', 'version: source.lsn', 'columns:', '  id: bigint', '  email: text', '  city: text', '  visits: int', '  seen_at: timestamp', ''].join('\n'));
  const f = await chaos(t, ['--job', yaml, '--events', '8000', '--duration', '30', '--workers', '2', '--partitions', '4', '--kills', '3', '--zombies', '1', '--cassandra-restarts', '0', '--kafka-restarts', '0', '--add-remove', '0', '--injections', '1', '--bad-ratio', '0.02', '--seed', '3701']);
  assert.ok(f.faults['kills']! >= 3);
  const sink = path.join(f.runDir, 'sink.json');
  const v = await runCli(['verify', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', f.keyspace, '--job', sink, '--full', '--no-record', '--json']);
  assert.equal(v.code, 0, v.stderr);
  const report = JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number; missing: number; extra: number; mismatched: number }; partitions: Array<{ skipped?: Record<string, number> }> };
  assert.deepEqual([report.totals.records, report.totals.missing, report.totals.extra, report.totals.mismatched], [f.records, 0, 0, 0]);
  // Most changes are stored (rows and deletes), few quarantined (the 2 % broken ones and the injected burst).
  assert.ok(report.totals.stored > 0.8 * f.records && report.totals.quarantined < 0.05 * f.records, JSON.stringify(report.totals));
  // Deletes were among the changes: each left a tombstone, which writes nothing and is counted as such.
  assert.ok(report.partitions.reduce((n, p) => n + (p.skipped?.['tombstone'] ?? 0), 0) > 100, JSON.stringify(report.partitions.map((p) => p.skipped)));
});

// Issue 37 items 2-6 together under chaos: the key's fields from a key object (key.id, key.shop),
// columns from headers and Kafka's metadata, a filter, a TTL per record from a header (some of a few
// seconds, so rows expire while the run goes on) and a version from a header, which tombstones carry
// too. The samples draw each record's version at random, so a key's records come in no order. With
// offset timestamps instead of versions, this run fails with 938 violations.
test('an upsert sink reading the key object, headers and metadata, filtered, with a TTL and a version from headers, under kills and a zombie: verify --job proves every row, filter and expiry', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sink-chaos-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const yaml = path.join(dir, 'orders-headers.yaml');
  writeFileSync(
    yaml,
    [
      'name: orders_hdr', 'topic: shop.orders_hdr', 'table: orders_hdr', 'mode: upsert', 'key: [order_id, shop]', 'ttlField: header.ttl', 'version: header.v',
      'where: { any: [ { field: placedAt, exists: true }, { field: header.channel, in: [web] } ] }',
      'columns:', '  order_id: { type: bigint, field: key.id }', '  shop: { type: text, field: key.shop }', '  customer: { type: text, required: true }', '  total: { type: decimal, required: true }',
      '  placed_at: { type: timestamp, field: placedAt }', '  channel: { type: text, field: header.channel }', '  prio: { type: int, field: header.prio }', '  seen_at: { type: timestamp, field: header.seen }',
      '  part: { type: int, field: $partition }', '  at: { type: timestamp, field: $timestamp }', '',
    ].join('\n'),
  );
  const f = await chaos(t, ['--job', yaml, '--events', '8000', '--duration', '30', '--workers', '2', '--partitions', '4', '--kills', '3', '--zombies', '1', '--cassandra-restarts', '0', '--kafka-restarts', '0', '--add-remove', '0', '--injections', '1', '--bad-ratio', '0.02', '--seed', '3801']);
  assert.ok(f.faults['kills']! >= 3);
  const sink = path.join(f.runDir, 'sink.json');
  const v = await runCli(['verify', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', f.keyspace, '--job', sink, '--full', '--no-record', '--json']);
  assert.equal(v.code, 0, v.stderr);
  const report = JSON.parse(v.stdout) as { totals: { records: number; stored: number; quarantined: number; missing: number; extra: number; mismatched: number }; partitions: Array<{ reasons?: Record<string, number>; skipped?: Record<string, number> }> };
  assert.deepEqual([report.totals.records, report.totals.missing, report.totals.extra, report.totals.mismatched], [f.records, 0, 0, 0]);
  const sum = (of: (p: (typeof report.partitions)[number]) => number | undefined) => report.partitions.reduce((n, p) => n + (of(p) ?? 0), 0);
  const shown = JSON.stringify(report.partitions.map((p) => [p.reasons, p.skipped]));
  // Most are stored; about a fifth filtered (no placedAt); some rows expired by their header TTL; a header that does not decode is quarantined by its own reason.
  assert.ok(report.totals.stored > 0.7 * f.records, shown);
  assert.ok(sum((p) => p.skipped?.['filtered']) > 0.1 * f.records, shown);
  assert.ok(sum((p) => p.skipped?.['expired']) > 0, shown);
  assert.ok(sum((p) => p.reasons?.['bad_header']) > 0, shown);
});
