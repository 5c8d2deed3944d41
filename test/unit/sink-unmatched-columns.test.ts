// A column path that matches nothing in a whole batch is reported (src/jobs/sink/unmatched-columns.ts);
// one absent in some records only (an optional field) is not.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec, type SinkRow } from '../../src/jobs/sink/sink-codec.js';
import { UnmatchedReporter, WARN_EVERY_MS } from '../../src/jobs/sink/unmatched-columns.js';

const config = sinkConfig({ topic: 't', table: 'x', mode: 'log', columns: { url: 'text', source: { type: 'text', field: 'headers.source' }, note: 'text' } });
const codec = new SinkCodec(config);
const rows = (...values: string[]): SinkRow[] =>
  values.map((v, i) => {
    const d = codec.decode({ topic: 't', partition: 0, offset: BigInt(i), key: null, value: Buffer.from(v), timestampMs: 0 });
    assert.ok(d.ok);
    return d.value;
  });

test('a path no record of the batch matches is warned once per column per minute and counted every batch; an optional field is not', () => {
  let now = 1_000;
  const warned: string[] = [];
  const counted: string[] = [];
  const r = new UnmatchedReporter(config.columns, (c, line) => warned.push(`${c}: ${line}`), (c) => counted.push(c), () => now);
  // `note` is present in one record: optional, fine. `headers.source` is in none: stored null for each.
  const batch = rows('{"url": "/a"}', '{"url": "/b", "note": "n"}', '{"url": "/c", "source": "s"}');
  r.batch(3, batch, 3);
  assert.deepEqual(warned, ['source: column source: field headers.source matched nothing in any of the 3 records of a batch of partition 3; it stores null for each (check the column\'s field path)']);
  assert.deepEqual(counted, ['source']);
  now += WARN_EVERY_MS - 1;
  r.batch(3, batch, 3);
  assert.deepEqual([warned.length, counted], [1, ['source', 'source']]);
  now += 1;
  r.batch(3, batch, 3);
  assert.deepEqual([warned.length, counted.length], [2, 3]);
  // A batch where one record has the path: nothing reported; a batch of tombstones/no rows: nothing.
  r.batch(3, rows('{"url": "/a", "headers": {"source": "s"}}', '{"url": "/b", "note": "n"}'), 2);
  r.batch(3, [], 0);
  assert.deepEqual([warned.length, counted.length], [2, 3]);
  // A field present as null matched: it is absent in value only.
  r.batch(3, rows('{"url": "/a", "headers": {"source": null}, "note": null}'), 1);
  assert.deepEqual([warned.length, counted.length], [2, 3]);
});
