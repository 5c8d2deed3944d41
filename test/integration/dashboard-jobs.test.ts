// The dashboard shows, per job of the keyspace, what `exactlyonce status` shows (issue 40): a keyspace
// with the events job (drained, malformed events quarantined, a verify recorded) and one sink job whose
// partition 1 is stopped (its checkpoint below the log start). The dashboard's snapshot carries the
// jobs exactly as `status --json` prints them (one gatherer: src/operate/status.ts), and the page, in
// headless Chromium, shows each job's partitions, stop code and the command that gets it going, its
// quarantine by reason, its workers and its last verify.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { hostname } from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { startDashboard } from '../../src/dashboard/dashboard.js';
import type { JobStatusJson } from '../../src/operate/status.js';
import { browserPage, ensureChromium } from '../browser.js';
import { BROKERS, CASSANDRA, freshKeyspace, freshTopic, repoRoot, runCli, startCli, testConfig, topicsAdmin, waitFor } from '../helpers.js';
import { stoppedPagesSink } from '../pages-sink.js';
import { connectionArgs, generate, startWorker, waitDrained, waitStarted } from '../pipeline.js';

interface PageJob {
  name: string;
  topic: string;
  lag: string;
  stoppedCount: string;
  workers: string;
  topicProblem: string | null;
  partitions: Array<{ partition: string; checkpoint: string; logEnd: string; lag: string; epoch: string; owner: string; stopped: string }>;
  stopped: Array<{ partition: string; code: string; message: string; fix: string }>;
  quarantine: Record<string, string>;
  verify: string;
}

/** What the page's Jobs section shows (each value from its element's data-value, the fix as written). Plain JavaScript: it runs in the page. */
const PAGE_JOBS = `(() => [...document.querySelectorAll('#jobs [data-job]')].map((card) => {
  const v = (sel) => card.querySelector(sel).dataset.value;
  return {
    name: card.dataset.job,
    topic: v('.summary .topic'),
    lag: v('.summary .lag'),
    stoppedCount: v('.summary .stopped-count'),
    workers: v('.summary .workers'),
    topicProblem: card.querySelector('.topic-problem')?.textContent ?? null,
    partitions: [...card.querySelectorAll('table.partitions tbody tr')].map((tr) => {
      const c = (cls) => tr.querySelector('td.' + cls).dataset.value;
      return { partition: c('partition'), checkpoint: c('checkpoint'), logEnd: c('log-end'), lag: c('lag'), epoch: c('epoch'), owner: c('owner'), stopped: c('stopped') };
    }),
    stopped: [...card.querySelectorAll('ul.stopped li')].map((li) => ({ partition: li.dataset.partition, code: li.dataset.code, message: li.querySelector('.message').textContent, fix: li.querySelector('code.fix').textContent })),
    quarantine: Object.fromEntries([...card.querySelectorAll('.quarantine [data-reason]')].map((s) => [s.dataset.reason, s.dataset.value])),
    verify: v('.last-verify .verify-line'),
  };
}))()`;

/** What the page should show of the jobs `status --json` printed. */
function expectedPage(jobs: JobStatusJson[]): PageJob[] {
  const s = (v: string | number | null) => (v === null ? '' : String(v));
  return jobs.map((j) => ({
    name: j.name,
    topic: j.topic,
    lag: j.lag,
    stoppedCount: String(j.stopped.length),
    workers: j.workers.join(','),
    topicProblem: j.topicProblem,
    partitions: j.partitions.map((p) => ({ partition: s(p.partition), checkpoint: s(p.checkpoint), logEnd: s(p.logEnd), lag: s(p.lag), epoch: s(p.epoch), owner: s(p.owner), stopped: s(p.stopped?.code ?? null) })),
    stopped: j.stopped.map((p) => ({ partition: String(p.partition), code: p.code, message: p.message, fix: p.fix })),
    quarantine: Object.fromEntries(Object.entries(j.quarantine).map(([r, n]) => [r, String(n)])),
    verify: j.lastVerify === null ? 'none' : j.lastVerify.ok ? 'held' : 'failed',
  }));
}

test('the dashboard shows per job what `exactlyonce status` shows: the events job and a sink job with a stopped partition', async (t) => {
  ensureChromium();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const admin = await freshTopic(t, config, 2);
  const conn = ['--brokers', BROKERS, '--cassandra', CASSANDRA, '--keyspace', config.keyspace];

  // The sink job `pages` on a topic of its own, 100 records per partition, one not JSON in each.
  const sinkTopic = `${config.topic}-pages`;
  const cleanup = topicsAdmin(t, config, [sinkTopic]);
  await admin.ensureTopic({ topic: sinkTopic, partitions: 2, replicationFactor: 1 });
  const job = 'pages';
  // Partition 1 resumes at 5, but its log now starts at 20: the worker stops it rather than skip.
  const file = await stoppedPagesSink(t, config, session, admin, job, sinkTopic);

  // The events job: the generator's events, some malformed (quarantined).
  await generate(config, ['--count', '400', '--rate', '2000', '--bad-ratio', '0.05', '--seed', '5']);
  const events = startWorker(t, config);
  const sink = startCli(t, ['sink', ...conn, '--config', file]);
  await waitStarted(events);
  await waitDrained(session, config);

  const status = async (): Promise<JobStatusJson[]> => {
    const r = await runCli(['status', ...conn, '--json']);
    assert.equal(r.code, 0, r.stderr);
    const parsed = JSON.parse(r.stdout) as { keyspace: string; jobs: JobStatusJson[] };
    assert.equal(parsed.keyspace, config.keyspace);
    return parsed.jobs;
  };
  await waitFor(async () => {
    const jobs = await status();
    const pages = jobs.find((j) => j.name === job);
    return pages?.stopped.length === 1 && pages.lag === '95' && pages.workers.length === 1 && jobs.find((j) => j.name === 'events')?.workers.length === 1;
  }, { timeoutMs: 120_000, message: 'pages: partition 1 stopped, partition 0 drained; events: owned' });
  const verify = await runCli(['verify', ...connectionArgs(config)]);
  assert.equal(verify.code, 0, verify.stdout + verify.stderr);

  const dashboard = await startDashboard(config, { port: 0, host: '127.0.0.1', workerMetrics: [], intervalMs: 500 });
  t.after(() => dashboard.close());
  const snapshotJobs = async () => ((await (await fetch(new URL('/api/snapshot', dashboard.url))).json()) as { snapshot: { jobs: JobStatusJson[] | null } | null }).snapshot?.jobs ?? null;

  // The dashboard's jobs are status's, field for field, once both read the same state.
  let expected: JobStatusJson[] = [];
  let shown: JobStatusJson[] | null = null;
  await waitFor(
    async () => {
      expected = await status();
      shown = await snapshotJobs();
      try {
        assert.deepEqual(shown, expected);
        return true;
      } catch {
        return false;
      }
    },
    { timeoutMs: 60_000, message: `the dashboard's jobs equal status --json's: ${JSON.stringify(shown)} vs ${JSON.stringify(expected)}` },
  );

  // And status's are what the keyspace holds.
  const eventsOwner = `${hostname()}-${events.pid}`;
  const sinkOwner = `${hostname()}-${sink.pid}`;
  const quarantined: Record<string, number> = {};
  for (const row of (await session.execute(`SELECT reason FROM ${config.keyspace}.quarantine`)).rows) quarantined[row['reason'] as string] = (quarantined[row['reason'] as string] ?? 0) + 1;
  assert.ok(Object.keys(quarantined).length > 0, 'the generator made malformed events');
  const fix = `exactlyonce checkpoints reset --job ${job} --partition 1 --to earliest`;
  assert.deepEqual(
    expected.map((j) => ({
      name: j.name,
      topic: j.topic,
      topicProblem: j.topicProblem,
      lag: j.lag,
      workers: j.workers,
      partitions: j.partitions.map((p) => ({ partition: p.partition, lag: p.lag, logStart: p.logStart, logEnd: p.logEnd, owner: p.owner, stopped: p.stopped?.code ?? null })),
      stopped: j.stopped.map((p) => ({ partition: p.partition, code: p.code, fix: p.fix })),
      quarantine: j.quarantine,
      quarantineCapped: j.quarantineCapped,
      verified: j.lastVerify?.ok ?? null,
    })),
    [
      {
        name: 'events',
        topic: config.topic,
        topicProblem: null,
        lag: '0',
        workers: [eventsOwner],
        partitions: [0, 1].map((p) => ({ partition: p, lag: '0', logStart: '0', logEnd: expected[0]!.partitions[p]!.checkpoint, owner: eventsOwner, stopped: null })),
        stopped: [],
        quarantine: quarantined,
        quarantineCapped: false,
        verified: true,
      },
      {
        name: job,
        topic: sinkTopic,
        topicProblem: null,
        lag: '95',
        workers: [sinkOwner],
        partitions: [
          { partition: 0, lag: '0', logStart: '0', logEnd: '100', owner: sinkOwner, stopped: null },
          { partition: 1, lag: '95', logStart: '20', logEnd: '100', owner: sinkOwner, stopped: 'EO_CHECKPOINT_OUT_OF_RANGE' },
        ],
        stopped: [{ partition: 1, code: 'EO_CHECKPOINT_OUT_OF_RANGE', fix }],
        quarantine: { bad_json: 1 },
        quarantineCapped: false,
        verified: null,
      },
    ],
  );
  assert.deepEqual(expected[1]!.partitions.map((p) => p.checkpoint), ['100', '5']);
  assert.equal(Number(expected[0]!.lastVerify!.summary['records']), 400, 'the verify recorded covers the 400 events');

  // The page shows it: each job, its partitions, the stop's code, message and command, the quarantine, the verify.
  const { page, pageErrors } = await browserPage(t);
  await page.goto(dashboard.url);
  let onPage: unknown;
  await waitFor(
    async () => {
      onPage = await page.evaluate(PAGE_JOBS);
      try {
        assert.deepEqual(onPage, expectedPage(expected));
        return true;
      } catch {
        return false;
      }
    },
    { timeoutMs: 30_000, message: `the page shows status's jobs: ${JSON.stringify(onPage)} vs ${JSON.stringify(expectedPage(expected))}` },
  );
  const card = page.locator('#jobs [data-job="pages"]');
  assert.match(await card.locator('ul.stopped li').innerText(), new RegExp(`^partition 1 stopped, EO_CHECKPOINT_OUT_OF_RANGE: .+\\nto get it going: ${fix}$`));
  assert.equal(await card.locator('.quarantine').innerText(), 'quarantine: 1 bad_json');
  assert.equal(await page.locator('#jobs [data-job="events"] .last-verify').innerText().then((s) => /^last verify: held at .+, 400 records$/.test(s)), true);
  assert.deepEqual(pageErrors, []);
  mkdirSync(path.join(repoRoot, 'test-artifacts'), { recursive: true });
  const screenshot = path.join(repoRoot, 'test-artifacts', 'dashboard-jobs.png');
  await page.screenshot({ path: screenshot, fullPage: true });
  t.diagnostic(`screenshot: ${screenshot}; the page's jobs: ${JSON.stringify(onPage)}`);

  // The command the page names, as named: the partition goes again, and the page says so.
  const run = await runCli([...fix.split(' ').slice(1), ...conn]);
  assert.equal(run.code, 0, run.stderr);
  await waitFor(
    async () => {
      const jobs = (await page.evaluate(PAGE_JOBS)) as PageJob[];
      const pages = jobs.find((j) => j.name === job);
      return pages?.stoppedCount === '0' && pages.lag === '0' && pages.partitions.every((p) => p.stopped === '') ? true : undefined;
    },
    { timeoutMs: 120_000, message: 'the page shows pages going again and drained' },
  );
  for (const p of [events, sink]) p.kill('SIGTERM');
});
