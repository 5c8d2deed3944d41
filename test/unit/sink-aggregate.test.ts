// Issue 39: a sink's mode aggregate — its config refused key by key, the windows a time falls in, the
// exact arithmetic of its aggregates (decimals as decimals, 64-bit sums that stop rather than wrap) and
// the two tables it creates.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { types } from 'cassandra-driver';
import { windowStarts } from '../../src/jobs/sink/aggregate-config.js';
import { aggregateFold, resultValues, valueText, type AggState } from '../../src/jobs/sink/aggregate-values.js';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { createTableCql } from '../../src/jobs/sink/sink-table.js';
import { ExactlyOnceError } from '../../src/errors.js';
import { configProblem } from './sink-fakes.js';

const base = {
  topic: 't',
  table: 'totals',
  mode: 'aggregate',
  groupBy: ['customer'],
  window: { time: 'at', size: '1m' },
  columns: { customer: 'text', at: 'timestamp', total: 'decimal', n: 'bigint', label: 'text' },
  aggregates: { orders: 'count', revenue: 'sum(total)' },
};

test('mode aggregate: each mistake is refused naming its key', () => {
  const problem = (patch: Record<string, unknown>) => configProblem({ ...base, ...patch });
  assert.equal(problem({ groupBy: undefined }), 's.yaml: groupBy: mode aggregate needs the group columns, e.g. groupBy: [customer]');
  assert.equal(problem({ aggregates: undefined }), 's.yaml: aggregates: mode aggregate needs at least one, e.g. aggregates: { orders: count, revenue: sum(total) }');
  assert.equal(problem({ groupBy: ['shop'] }), 's.yaml: groupBy.0: shop is not one of the columns');
  assert.equal(problem({ window: { time: 'label', size: '1m' } }), 's.yaml: window.time: label is a text; the window\'s time is a timestamp column');
  assert.equal(problem({ window: { time: 'at', size: '1m', slide: '45s' } }), 's.yaml: window.slide: 45s must divide the size 1m (a record then falls in size/slide windows)');
  assert.equal(problem({ window: { time: 'at', sise: '1m' } }), "s.yaml: window.size: missing (a required key); window.sise: unknown key (did you mean size?)");
  assert.equal(problem({ window: { time: 'at', size: '1 minute' } }), 's.yaml: window.size: expected a whole number and a unit: 500ms, 30s, 1m, 12h or 1d');
  assert.equal(problem({ aggregates: { revenue: 'total(total)' } }), 's.yaml: aggregates.revenue: expected count, sum(<column>), min(<column>), max(<column>) or avg(<column>), got "total(total)"');
  assert.equal(problem({ aggregates: { x: 'sum(label)' } }), 's.yaml: aggregates.x: sum of label, a text; sum and avg take int, bigint, smallint, tinyint, decimal, double or float');
  assert.equal(problem({ aggregates: { x: 'max(label)' } }), 's.yaml: aggregates.x: max of label, a text; min and max take numbers and timestamps');
  assert.equal(problem({ aggregates: { customer: 'count' } }), 's.yaml: aggregates.customer: the name is taken by a group column or the window\'s (window_start, window_end)');
  assert.equal(problem({ key: ['customer'] }), 's.yaml: key: an aggregate table is keyed by its groupBy columns (and window); key is for mode upsert');
  assert.equal(problem({ ttl: '7d' }), 's.yaml: ttl: not for mode aggregate (an aggregate row holds many records; a TTL would drop their partials one by one)');
  assert.equal(configProblem({ ...base, mode: 'log', aggregates: undefined, window: undefined }), 's.yaml: groupBy: only for mode aggregate');
  assert.throws(() => sinkConfig(base, 's.yaml', true), /^ExactlyOnceError: s\.yaml: columns: mode aggregate needs its columns listed \(groupBy, window and aggregates name them; columns derived from the registered schema would grow under them\)$/);
});

test('the group and time columns are required (a record without them belongs to no row); the others are not', () => {
  const c = sinkConfig(base);
  assert.deepEqual(
    c.columns.map((x) => [x.name, x.required]),
    [['customer', true], ['at', true], ['total', false], ['n', false], ['label', false]],
  );
});

test('windowStarts: tumbling and hopping, negative times too', () => {
  assert.deepEqual(windowStarts(125_000, { sizeMs: 60_000, slideMs: 60_000 }), [120_000]);
  assert.deepEqual(windowStarts(120_000, { sizeMs: 60_000, slideMs: 60_000 }), [120_000], 'a window includes its start');
  assert.deepEqual(windowStarts(125_000, { sizeMs: 60_000, slideMs: 30_000 }), [90_000, 120_000]);
  assert.deepEqual(windowStarts(-1, { sizeMs: 60_000, slideMs: 20_000 }), [-60_000, -40_000, -20_000]);
});

test('the arithmetic is exact: decimal sums by value, integer sums in 64 bits (beyond: a coded stop), min, max and avg', () => {
  const c = sinkConfig({ ...base, aggregates: { orders: 'count', revenue: 'sum(total)', n: 'sum(n)', top: 'max(total)', low: 'min(at)', mean: 'avg(total)' } });
  const fold = aggregateFold(c.aggregate!, (at) => `offset ${at.offset}`);
  const dec = (s: string) => types.BigDecimal.fromString(s);
  const row = (total: string | null, n: bigint | null, at: number) => ['c', new Date(at), total === null ? null : dec(total), n === null ? null : types.Long.fromString(String(n)), 'x'];
  let s: AggState = fold.empty();
  s = fold.add(s, row('0.1', 1n, 5000), { partition: 0, offset: 0n });
  s = fold.add(s, row('0.20', 2n, 3000), { partition: 0, offset: 1n });
  s = fold.add(s, row(null, null, 9000), { partition: 0, offset: 2n });
  const other = fold.add(fold.empty(), row('-0.05', 3n, 4000), { partition: 1, offset: 0n });
  const merged = fold.merge(s, other);
  assert.deepEqual(
    resultValues(c.aggregate!, merged).map(valueText),
    ['4', '0.25', '6', '0.2', '3000', String(0.25 / 3)],
    'count counts every record; the others skip the null; 0.1 + 0.20 - 0.05 is 0.25 exactly',
  );
  const big = fold.add(fold.empty(), row(null, (1n << 63n) - 1n, 0), { partition: 2, offset: 7n });
  assert.throws(
    () => fold.add(big, row(null, 1n, 0), { partition: 2, offset: 8n }),
    (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_PERMANENT_ERROR' && /aggregate n at offset 8: the sum 9223372036854775808 is beyond bigint's 64 bits/.test(e.message),
  );
});

test('the two tables: results keyed by group and window start, partials by group, window and Kafka partition', () => {
  const cql = createTableCql(sinkConfig({ ...base, aggregates: { orders: 'count', revenue: 'sum(total)', mean: 'avg(n)' } }), 'ks');
  assert.match(cql, /CREATE TABLE IF NOT EXISTS ks\.totals \(\n {4}customer text,\n {4}window_start timestamp,\n {4}window_end timestamp,\n {4}orders bigint,\n {4}revenue decimal,\n {4}mean double,\n {4}PRIMARY KEY \(\(customer\), window_start\)\n\);/);
  assert.match(cql, /CREATE TABLE IF NOT EXISTS ks\.totals_partials \(\n {4}customer text,\n {4}window_start timestamp,\n {4}partition int,\n {4}through_offset bigint,\n {4}records bigint,\n {4}revenue decimal,\n {4}mean_sum bigint,\n {4}mean_n bigint,\n {4}PRIMARY KEY \(\(customer, window_start\), partition\)\n\);/);
  const running = createTableCql(sinkConfig({ ...base, window: undefined }), 'ks');
  assert.match(running, /PRIMARY KEY \(\(customer\)\)\n/);
  assert.match(running, /PRIMARY KEY \(\(customer\), partition\)\n/);
});

test('closeAfter: only with a window, closedTopic only with it; the topic defaults to <name>.closed, and a third table holds each partition\'s watermark and open windows', () => {
  const problem = (patch: Record<string, unknown>) => configProblem({ ...base, ...patch });
  assert.equal(problem({ closeAfter: '5m', window: undefined }), 's.yaml: closeAfter: only with a window (a running total never closes)');
  assert.equal(problem({ closedTopic: 'x.closed' }), 's.yaml: closedTopic: only with closeAfter');
  assert.equal(problem({ closeAfter: '5 min' }), 's.yaml: closeAfter: expected a whole number and a unit: 500ms, 30s, 1m, 12h or 1d');
  assert.equal(configProblem({ ...base, mode: 'log', groupBy: undefined, aggregates: undefined, window: undefined, closeAfter: '5m' }), 's.yaml: closeAfter: only for mode aggregate');
  assert.deepEqual(sinkConfig({ ...base, closeAfter: '5m' }).aggregate?.close, { afterMs: 300_000, topic: 'totals.closed' });
  assert.deepEqual(sinkConfig({ ...base, name: 'orders', closeAfter: '90s', closedTopic: 'shop.orders.closed' }).aggregate?.close, { afterMs: 90_000, topic: 'shop.orders.closed' });
  const cql = createTableCql(sinkConfig({ ...base, closeAfter: '5m' }), 'ks');
  assert.match(cql, /CREATE TABLE IF NOT EXISTS ks\.totals_closing \(\n {4}partition int,\n {4}close_at timestamp,\n {4}customer text,\n {4}window_start timestamp,\n {4}watermark timestamp STATIC,\n {4}through_offset bigint STATIC,\n {4}PRIMARY KEY \(\(partition\), close_at, customer, window_start\)\n\);/);
  assert.doesNotMatch(createTableCql(sinkConfig(base), 'ks'), /_closing/);
});
