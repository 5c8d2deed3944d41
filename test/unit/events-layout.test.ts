// The events job's layouts (src/jobs/events/events-layout.ts) and how they are stored with the job.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { EventJob, parseSettings, storedSettings, DEFAULT_EVENT_JOB_SETTINGS } from '../../src/jobs/events/event-job.js';
import { bucketOf, formatLayout, parseLayout, sameCassandraPartition } from '../../src/jobs/events/events-layout.js';

test('--layout: original, bucketed (100,000 offsets a bucket) or bucketed:N; anything else names the flag', () => {
  assert.deepEqual(parseLayout('original'), { kind: 'original' });
  assert.deepEqual(parseLayout('bucketed'), { kind: 'bucketed', bucketOffsets: 100_000 });
  assert.deepEqual(parseLayout('bucketed:50'), { kind: 'bucketed', bucketOffsets: 50 });
  for (const bad of ['', 'bucket', 'bucketed:0', 'bucketed:x', 'ORIGINAL']) {
    assert.throws(() => parseLayout(bad), { code: 'EO_CONFIG_INVALID', message: new RegExp(`^--layout: expected original, bucketed or bucketed:N .*\\(got '${bad}'\\)$`) });
  }
  assert.equal(formatLayout(parseLayout('bucketed')), 'bucketed:100000');
});

test('a batch never spans two buckets; the original layout keeps one run', () => {
  const l = parseLayout('bucketed:10');
  const offsets = [7n, 8n, 9n, 10n, 11n, 25n, 29n, 30n];
  assert.deepEqual(sameCassandraPartition(l, offsets, (o) => o), [[7n, 8n, 9n], [10n, 11n], [25n, 29n], [30n]]);
  assert.deepEqual(sameCassandraPartition(parseLayout('original'), offsets, (o) => o), [offsets]);
  assert.deepEqual(sameCassandraPartition(l, [], (o: bigint) => o), []);
  assert.equal(bucketOf({ kind: 'bucketed', bucketOffsets: 10 }, 99n), 9n);
});

test('the layout is stored with the job only when bucketed, so jobs stored before layouts existed still match', () => {
  assert.equal('layout' in storedSettings(DEFAULT_EVENT_JOB_SETTINGS), false);
  const bucketed = { ...DEFAULT_EVENT_JOB_SETTINGS, layout: parseLayout('bucketed:500') };
  assert.equal(storedSettings(bucketed)['layout'], 'bucketed:500');
  assert.deepEqual(parseSettings(storedSettings(bucketed)), bucketed);
  assert.deepEqual(new EventJob({ layout: parseLayout('bucketed') }).settings['layout'], 'bucketed:100000');
  assert.throws(() => parseSettings({ ...storedSettings(DEFAULT_EVENT_JOB_SETTINGS), layout: 'sideways' }, '; the job stored in keyspace k'), {
    code: 'EO_CONFIG_INVALID',
    message: "--layout: expected original, bucketed or bucketed:N with N offsets per bucket from 1 to 1e9 (got 'sideways'; the job stored in keyspace k)",
  });
});
