// A column whose field path matches nothing (issue 43 item 4: `field: headers.source` where no value has
// `headers`) stores null for every record; the sink says so, per batch, in
// exactlyonce_sink_unmatched_columns_total{column} and a rate-limited warning, and `verify --job` says
// so under its report — never in silence.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connectedProducer, freshKeyspaceAndTopic, runCli, sinkConfigFile, startSinkJob, waitFor, waitSinkDrained } from '../helpers.js';
import { freePort } from '../pipeline.js';

/** The sum of a metric's series on a worker's /metrics, by its label set (`column="source"`). */
async function metric(port: number, name: string): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{([^}]*)\\})? (\\S+)$`, 'gm'))) out.set(m[1] ?? '', (out.get(m[1] ?? '') ?? 0) + Number(m[2]));
  return out;
}

test('a column whose field path matches no record of a batch is counted per batch (exactlyonce_sink_unmatched_columns_total), warned about and named by verify --job; one that matches some records is not', async (t) => {
  const { config, session, admin } = await freshKeyspaceAndTopic(t, 2);
  const sinkFile = sinkConfigFile(
    t,
    'readings.json',
    JSON.stringify({
      name: 'readings',
      topic: config.topic,
      table: 'readings',
      mode: 'log',
      // `source` names a path no record has; `note` one that every other record of each partition has (optional).
      columns: { n: { type: 'int', required: true }, source: { type: 'text', field: 'headers.source' }, note: { type: 'text' } },
    }),
  );
  const producer = await connectedProducer(t, config);
  const N = 40;
  await producer.send(
    config.topic,
    Array.from({ length: N }, (_, i) => ({ key: null, value: JSON.stringify({ n: i, source: 'sensor', ...((i >> 1) % 2 === 0 ? { note: `n${i}` } : {}) }), partition: i % 2 })),
  );
  const port = await freePort();
  const { args, worker } = await startSinkJob(t, config, sinkFile, ['--metrics-port', String(port)]);
  await waitSinkDrained(session, config, admin);
  // Every batch matched nothing for `source`: one count per batch stored, none for `note`.
  const counted = await waitFor(
    async () => {
      const [unmatched, batches] = await Promise.all([metric(port, 'exactlyonce_sink_unmatched_columns_total'), metric(port, 'exactlyonce_batches_total')]);
      const total = [...batches.values()].reduce((a, b) => a + b, 0);
      return total > 0 && unmatched.get('column="source"') === total ? { unmatched, total } : undefined;
    },
    { timeoutMs: 30_000, message: 'one count of the unmatched column per batch' },
  );
  assert.deepEqual([...counted.unmatched.keys()], ['column="source"'], 'only the column that matched nothing');
  const warnings = worker.output().split('\n').filter((l) => l.includes('"column":"source"'));
  assert.equal(warnings.length, 1, 'one warning per column per minute');
  assert.match(warnings[0]!, /column source: field headers\.source matched nothing in any of the \d+ records of a batch of partition \d; it stores null for each \(check the column's field path\)/);
  const rows = await session.execute(`SELECT n, source, note FROM ${config.keyspace}.readings`);
  assert.equal(rows.rowLength, N);
  assert.deepEqual(rows.rows.filter((r) => r['source'] !== null), [], 'stored null, as the warning says');
  assert.equal(rows.rows.filter((r) => r['note'] !== null).length, N / 2);
  // verify --job passes (null is what the records say) and says so under its report; the JSON has it too.
  const verify = await runCli(['verify', ...args, '--no-record']);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);
  assert.deepEqual(
    verify.stdout.split('\n').filter((l) => l.startsWith('column ')),
    [`column source: field headers.source matched none of the ${N} records checked; every row stores null for it (check the column's field path)`],
  );
  const json = await runCli(['verify', ...args, '--no-record', '--json']);
  assert.deepEqual((JSON.parse(json.stdout) as { notes?: string[] }).notes, [
    `column source: field headers.source matched none of the ${N} records checked; every row stores null for it (check the column's field path)`,
  ]);
});
