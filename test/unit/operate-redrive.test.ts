// What redrive makes of a quarantine row (src/operate/redrive.ts, rebuild): the record from the row when
// its raw bytes are whole; re-read from the log when they were cut, and only if the log's record hashes
// as the row says; otherwise one line saying why it stays quarantined.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import type { SourceRecord } from '../../src/engine/job.js';
import { rebuild, type QRow, type RedriveReport } from '../../src/operate/redrive.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
const value = Buffer.from('0123456789abcdefghij');
const row = (o: Partial<QRow> = {}): QRow => ({ offset: 42n, reason: 'unknown_schema', detail: 'd', key: Buffer.from('k'), raw: value, rawLength: value.length, rawSha256: sha(value), kafkaTs: new Date(1700000000123), ...o });
const fresh = (): RedriveReport => ({ redriven: new Map(), stay: new Map(), lost: new Map(), reread: 0, inFlight: 0, moved: [] });

/** A log holding `records`; counts the reads. */
function log(records: SourceRecord[]) {
  const calls: Array<[bigint, bigint]> = [];
  return {
    calls,
    reader: async () => ({
      async *read(_topic: string, _p: number, from: bigint, until: bigint) {
        calls.push([from, until]);
        const found = records.filter((r) => r.offset >= from && r.offset < until);
        if (found.length > 0) yield { records: found };
      },
    }),
  };
}

test('a whole row is the record, as Kafka held it, without reading the log', async () => {
  const l = log([]);
  const report = fresh();
  const r = await rebuild('t', 3, row(), 0n, l.reader, report);
  assert.deepEqual(r, { topic: 't', partition: 3, offset: 42n, key: Buffer.from('k'), value, timestampMs: 1700000000123 });
  assert.deepEqual(l.calls, []);
  assert.equal(report.reread, 0);
  // A tombstone: no raw bytes, length 0.
  const empty = sha(Buffer.alloc(0));
  assert.equal((await rebuild('t', 3, row({ raw: null, rawLength: 0, rawSha256: empty }), 0n, l.reader, report))?.value, null);
});

test('a cut row is re-read from the log when it still holds that very record; else one line says why it stays', async () => {
  const cut = row({ raw: value.subarray(0, 5) });
  const inLog: SourceRecord = { topic: 't', partition: 3, offset: 42n, key: Buffer.from('k'), value, timestampMs: 5 };
  let report = fresh();
  const l = log([inLog]);
  assert.equal(await rebuild('t', 3, cut, 10n, l.reader, report), inLog);
  assert.deepEqual(l.calls, [[42n, 43n]]);
  assert.equal(report.reread, 1);

  const lines: string[] = [];
  report = fresh();
  assert.equal(await rebuild('t', 3, cut, 50n, log([inLog]).reader, report, (x) => lines.push(x)), null);
  assert.equal(await rebuild('t', 3, cut, 10n, log([]).reader, report, (x) => lines.push(x)), null);
  assert.equal(await rebuild('t', 3, cut, 10n, log([{ ...inLog, value: Buffer.from('another record') }]).reader, report, (x) => lines.push(x)), null);
  assert.deepEqual(lines, [
    'partition 3 offset 42: cannot be redriven: its raw bytes were cut at 5 of 20 (--max-quarantine-bytes), and the log no longer holds it (log start 50); it stays quarantined (unknown_schema)',
    'partition 3 offset 42: cannot be redriven: its raw bytes were cut at 5 of 20 (--max-quarantine-bytes), and the log has no record at that offset now; it stays quarantined (unknown_schema)',
    'partition 3 offset 42: cannot be redriven: its raw bytes were cut at 5 of 20 (--max-quarantine-bytes), and the record the log holds there is another one (its SHA-256 differs: was the topic re-created?); it stays quarantined (unknown_schema)',
  ]);
  assert.deepEqual(report.lost, new Map([[3, [42n, 42n, 42n]]]));
  assert.equal(report.reread, 0);
});
