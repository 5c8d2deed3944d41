// The status module's one gatherer (src/operate/status.ts readStatus), which `exactlyonce status` and
// the dashboard share, over a fake session and admin client: a given admin client is used and left
// open; the quarantine counts are read page by page, every row without a limit, and with the
// dashboard's limit each read stops there and says so (quarantineCapped); the JSON form (both print
// it) keeps offsets exact as strings.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { toLong, type Client } from '../../src/cassandra/session.js';
import { loadConnectionConfig } from '../../src/config.js';
import type { KafkaAdmin } from '../../src/kafka/admin.js';
import { jobStatusJson, readStatus } from '../../src/operate/status.js';

const config = loadConnectionConfig({ keyspace: 'ks', topic: 'unused' }, {});

/** Quarantine reasons of job `pages`, per partition of its topic. */
const QUARANTINE: Record<number, string[]> = {
  0: ['bad_json', 'bad_json', 'bad_value'],
  1: ['bad_json', 'bad_json', 'bad_json', 'missing_field', 'missing_field', 'bad_json', 'bad_json'],
};

function fakeSession(): { session: Client; statements: string[] } {
  const statements: string[] = [];
  const result = (rows: Array<Record<string, unknown>>, pageState?: string) => ({ rows, pageState, first: () => rows[0] ?? null });
  const session = {
    async execute(query: string, params: unknown[] = [], options: { pageState?: string } = {}) {
      statements.push(query);
      if (/FROM ks\.job$/.test(query)) return result([{ name: 'pages', input_topic: 'shop.pages', input_topic_id: 'id-1' }]);
      if (query.includes('FROM ks.job_checkpoints')) return result([{ partition: 1, next_offset: toLong(5n), epoch: 0, replay: null }]);
      if (query.includes('FROM ks.job_partition_state')) {
        return result([
          { partition: 0, owner: 'w1', stopped_code: null },
          { partition: 1, owner: 'w1', stopped_code: 'EO_CHECKPOINT_OUT_OF_RANGE', stopped_message: 'below the log start', stopped_at: new Date(Date.UTC(2026, 0, 2)), stopped_epoch: 0, stopped_by: 'w1' },
        ]);
      }
      if (query.includes('FROM ks.job_quarantine')) {
        assert.deepEqual(params.slice(0, 1), ['pages']);
        const limit = /LIMIT (\d+)$/.exec(query);
        const all = QUARANTINE[params[1] as number]!.slice(0, limit === null ? undefined : Number(limit[1]));
        // Two rows a page, as a server paging at fetchSize would.
        const from = Number(options.pageState ?? 0);
        return result(all.slice(from, from + 2).map((reason) => ({ reason })), from + 2 < all.length ? String(from + 2) : undefined);
      }
      if (query.includes('FROM ks.audit_latest')) return result([]);
      throw new Error(`unexpected statement: ${query}`);
    },
  } as unknown as Client;
  return { session, statements };
}

function fakeAdmin(): { admin: KafkaAdmin; closed: () => boolean } {
  let closed = false;
  const admin = {
    partitionCount: async () => 2,
    topicId: async () => 'id-1',
    watermarks: async () => [
      { partition: 0, low: 0n, high: 100n, stable: 100n },
      { partition: 1, low: 20n, high: 9_007_199_254_740_993n, stable: 9_007_199_254_740_993n },
    ],
    close: async () => {
      closed = true;
    },
  } as unknown as KafkaAdmin;
  return { admin, closed: () => closed };
}

test("status reads every quarantine row; the dashboard's limit stops each read there and says so; the given admin client stays open", async () => {
  const { session } = fakeSession();
  const { admin, closed } = fakeAdmin();
  const [all] = await readStatus(config, session, { admin });
  assert.deepEqual([all!.quarantine, all!.quarantineCapped], [{ bad_json: 7, bad_value: 1, missing_field: 2 }, false]);
  assert.equal(closed(), false, 'an admin client given is the caller’s to close');

  const { session: bounded, statements } = fakeSession();
  const [capped] = await readStatus(config, bounded, { admin, quarantineLimit: 4 });
  // Partition 0: its 3 rows; partition 1: 4 of its 7 (read as LIMIT 5: one more tells it was cut).
  assert.deepEqual([capped!.quarantine, capped!.quarantineCapped], [{ bad_json: 5, bad_value: 1, missing_field: 1 }, true]);
  assert.ok(statements.filter((s) => s.includes('job_quarantine')).every((s) => s.endsWith(' LIMIT 5')));

  const [exact] = await readStatus(config, fakeSession().session, { admin, quarantineLimit: 3 });
  assert.equal(exact!.quarantineCapped, true, 'partition 1 has more than 3');
  const [enough] = await readStatus(config, fakeSession().session, { admin, quarantineLimit: 7 });
  assert.deepEqual([enough!.quarantine, enough!.quarantineCapped], [all!.quarantine, false], 'a limit no partition reaches counts everything');
});

test('the JSON form status prints and the dashboard sends: offsets as exact strings, the stop with its fix', async () => {
  const { admin } = fakeAdmin();
  const [s] = await readStatus(config, fakeSession().session, { admin });
  const json = jobStatusJson(s!);
  assert.deepEqual(JSON.parse(JSON.stringify(json)), json, 'plain JSON');
  assert.deepEqual(
    { name: json.name, topic: json.topic, lag: json.lag, workers: json.workers, stopped: json.stopped, partitions: json.partitions },
    {
      name: 'pages',
      topic: 'shop.pages',
      lag: '9007199254741088',
      workers: ['w1'],
      stopped: [{ partition: 1, code: 'EO_CHECKPOINT_OUT_OF_RANGE', message: 'below the log start', fix: 'exactlyonce checkpoints reset --job pages --partition 1 --to earliest' }],
      partitions: [
        { partition: 0, checkpoint: null, epoch: null, logStart: '0', logEnd: '100', lag: '100', held: '0', owner: 'w1', stopped: null },
        {
          partition: 1,
          checkpoint: '5',
          epoch: 0,
          logStart: '20',
          logEnd: '9007199254740993',
          lag: '9007199254740988',
          held: '0',
          owner: 'w1',
          stopped: { code: 'EO_CHECKPOINT_OUT_OF_RANGE', message: 'below the log start', epoch: 0, at: '2026-01-02T00:00:00.000Z', by: 'w1' },
        },
      ],
    },
  );
});
