// The auditor's offset ledger (src/verify/compare-rows.ts): topic records merged with events and
// quarantine rows, every offset judged once, gaps explained, each violation named by partition/offset.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { PartitionLedger, type EventRow, type QuarantineRowView } from '../../src/verify/compare-rows.js';
import { ViolationLog } from '../../src/verify/report.js';
import { decodeEvent, encodeEvent, type Event } from '../../src/jobs/events/event.js';
import type { SourceRecord } from '../../src/engine/job.js';

const TOPIC = 't';
const ev = (offset: number, health: 0 | 1 | 2 = 2): Event => ({ id: -(2n ** 62n) - BigInt(offset), ts: 1_700_000_000_000 + offset, source: 's', client: 'c', health });
const rec = (offset: number, value: Buffer | string | null): SourceRecord => ({
  topic: TOPIC,
  partition: 0,
  offset: BigInt(offset),
  key: null,
  value: typeof value === 'string' ? Buffer.from(value) : value,
  timestampMs: 0,
});
const good = (offset: number) => rec(offset, encodeEvent(ev(offset)));
const row = (offset: number, e: Event = ev(offset)): EventRow => ({ offset: BigInt(offset), id: e.id, ts: e.ts, source: e.source, client: e.client, health: e.health });
const qrow = (offset: number, raw: string, reason = 'invalid_json'): QuarantineRowView => ({
  offset: BigInt(offset),
  topic: TOPIC,
  reason,
  rawLength: Buffer.byteLength(raw),
  rawSha256: createHash('sha256').update(raw).digest('hex'),
});

/** Rows as the ledger takes them: in pages (of two, so that rows of one offset range span pages). */
async function* iter<T>(xs: T[]): AsyncGenerator<T[]> {
  for (let i = 0; i < xs.length; i += 2) yield xs.slice(i, i + 2);
}

function ledger(from = 0n) {
  const violations = new ViolationLog();
  const events: Event[] = [];
  const l = new PartitionLedger(0, from, { topic: TOPIC, decode: (v) => decodeEvent(v), violations, onEvent: (e) => events.push(e) });
  return { l, violations, events };
}

test('a whole ledger: every record stored or quarantined once, nothing else, is clean', async () => {
  const { l, violations, events } = ledger();
  await l.check([good(0), good(1), rec(2, '{bad'), good(3)], 4n, iter([row(0), row(1), row(3)]), iter([qrow(2, '{bad')]));
  assert.equal(violations.total, 0, JSON.stringify(violations.kept));
  assert.deepEqual([l.records, l.stored, l.quarantined, l.missing, l.extra, l.mismatched], [4, 3, 1, 0, 0, 0]);
  assert.deepEqual(events.map((e) => e.id), [ev(0).id, ev(1).id, ev(3).id]);
  assert.equal(l.position, 4n);
});

test('a missing row is reported with its partition and offset', async () => {
  const { l, violations } = ledger();
  await l.check([good(0), good(1), rec(2, '{bad')], 3n, iter([row(0)]), iter([]));
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['missing', '1'], ['missing', '2']]);
  assert.match(violations.kept[0]!.message, /^partition 0 offset 1: /);
  assert.equal(l.missing, 2);
});

test('offset gaps are counted and explained, never a loss; a row in a gap is extra', async () => {
  const { l, violations } = ledger(10n);
  // 10, 11 present; 12 is a transaction marker; 13 present; 14..16 compacted; the checkpoint is 18.
  await l.check([good(10), good(11), good(13)], 14n, iter([row(10), row(11), row(12), row(13)]), iter([]));
  await l.check([good(17)], 18n, iter([row(17)]), iter([qrow(15, 'x')]));
  assert.deepEqual(l.gaps, { offsets: 4, ranges: 2, examples: ['12', '14..16'] });
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['extra', '12'], ['extra', '15']]);
  assert.match(violations.kept[0]!.message, /extra events row — the topic has no record at this offset/);
  assert.match(violations.kept[1]!.message, /extra quarantine row/);
  assert.equal(l.stored, 4);
  assert.equal(l.missing, 0);
});

test('a trailing range with no record up to the chunk end is a gap, and rows there are extra', async () => {
  const { l, violations } = ledger();
  await l.check([good(0)], 3n, iter([row(0), row(2)]), iter([]));
  assert.deepEqual(l.gaps.examples, ['1..2']);
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['extra', '2']]);
  assert.equal(l.position, 3n);
});

test('every events column is compared, the 64-bit id exactly', async () => {
  const { l, violations } = ledger();
  const e = ev(0);
  await l.check(
    [good(0), good(1), good(2)],
    3n,
    iter([row(0, { ...e, id: e.id + 1n }), row(1, { ...ev(1), health: 0 }), { ...row(2), source: null }]),
    iter([]),
  );
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['mismatch', '0'], ['mismatch', '1'], ['mismatch', '2']]);
  assert.match(violations.kept[0]!.message, new RegExp(`id ${e.id + 1n} ≠ ${e.id}`));
  assert.match(violations.kept[1]!.message, /health 0 ≠ 2/);
  assert.match(violations.kept[2]!.message, /source null ≠ "s"/);
  assert.equal(l.mismatched, 3);
  assert.equal(l.stored, 0);
});

test('a valid record quarantined, and a malformed record stored, are reported', async () => {
  const { l, violations } = ledger();
  await l.check([good(0), rec(1, 'nope')], 2n, iter([row(1, ev(1))]), iter([qrow(0, encodeEvent(ev(0)), 'invalid_json')]));
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['quarantined_valid', '0'], ['stored_malformed', '1']]);
  assert.equal(l.missing, 0, 'each is stored somewhere, wrongly');
  assert.equal(l.mismatched, 2);
});

test('a quarantine row must carry the codec reason, the topic, the full length and hash of the record', async () => {
  const { l, violations } = ledger();
  const big = 'x'.repeat(100);
  await l.check(
    [rec(0, '{bad'), rec(1, big), rec(2, '[1]'), rec(3, null)],
    4n,
    iter([]),
    iter([qrow(0, '{bad', 'not_object'), { ...qrow(1, big), rawLength: 50 }, { ...qrow(2, '[1]', 'not_object'), topic: 'other' }, qrow(3, '', 'empty')]),
  );
  assert.deepEqual(violations.kept.map((v) => [v.kind, v.offset]), [['mismatch', '0'], ['mismatch', '1'], ['mismatch', '2']]);
  assert.match(violations.kept[0]!.message, /reason "not_object" ≠ "invalid_json"/);
  assert.match(violations.kept[1]!.message, /raw_length 50 ≠ 100/);
  assert.match(violations.kept[2]!.message, /topic "other" ≠ "t"/);
  assert.equal(l.quarantined, 1);
});

test('records re-delivered before the position are ignored, rows before the first record are extra', async () => {
  const { l, violations } = ledger(5n);
  await l.check([good(5), good(6)], 7n, iter([row(5), row(6)]), iter([]));
  await l.check([good(6), good(7)], 8n, iter([row(7)]), iter([]));
  assert.equal(violations.total, 0);
  assert.equal(l.records, 3);
  const second = ledger(5n);
  await second.l.check([good(6)], 7n, iter([row(5), row(6)]), iter([]));
  assert.deepEqual(second.violations.kept.map((v) => [v.kind, v.offset]), [['extra', '5']]);
});

test('the violation log counts everything and keeps only the first ones', () => {
  const log = new ViolationLog(2);
  for (let i = 0; i < 5; i++) log.add({ kind: 'missing', partition: 0, offset: String(i), message: String(i) });
  log.add({ kind: 'extra', message: 'x' });
  assert.equal(log.total, 6);
  assert.equal(log.counts.missing, 5);
  assert.equal(log.counts.extra, 1);
  assert.deepEqual(log.kept.map((v) => v.message), ['0', '1']);
});
