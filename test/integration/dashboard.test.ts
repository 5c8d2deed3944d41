import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import type { Page } from 'playwright-core';
import type { AuditReport } from '../../src/verify/report.js';
import { parsePrometheus, select, total, type Sample } from '../../src/dashboard/prometheus.js';
import { browserPage, ensureChromium } from '../browser.js';
import { freshKeyspace, freshTopic, repoRoot, runCli, startCli, testConfig, waitFor } from '../helpers.js';
import { connectionArgs, checkpoints, freePort, generate, startWorker, waitDrained, waitStarted } from '../pipeline.js';

const SCREENSHOT = join(repoRoot, 'test-artifacts', 'dashboard.png');

async function scrape(port: number): Promise<Sample[]> {
  return parsePrometheus(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
}

interface PageNumbers {
  stored: number;
  consumed: number;
  quarantined: number;
  lag: string;
  alerts: string;
  verify: string;
  rows: Array<{ partition: number; owner: string; checkpoint: string; logEnd: string; lag: string; quarantineRows: string }>;
  workers: Array<{ id: string; status: string; via: string }>;
  /** How far verify's proof reached: the tile (checkpoint − proved, summed) and each partition's proved offset. */
  proof: { behind: string; proved: string[] };
}

/**
 * The numbers the page shows (each element's data-value). Plain JavaScript in a string: a function
 * compiled by tsx would carry helpers (`__name`) that do not exist in the page.
 */
const PAGE_NUMBERS = `(() => {
  const v = (id) => document.getElementById(id).dataset.value;
  const rows = [...document.querySelectorAll('#partitions tbody tr')].map((tr) => {
    const c = (cls) => tr.querySelector('td.' + cls).dataset.value;
    return { partition: Number(c('partition')), owner: c('owner'), checkpoint: c('checkpoint'), logEnd: c('log-end'), lag: c('lag'), quarantineRows: c('quarantine-rows') };
  });
  const workers = [...document.querySelectorAll('#workers tbody tr')].map((tr) => ({
    id: tr.dataset.worker,
    status: tr.querySelector('td.status').dataset.value,
    via: tr.querySelector('td.via').textContent,
  }));
  return {
    stored: Number(v('total-stored')),
    consumed: Number(v('total-consumed')),
    quarantined: Number(v('total-quarantined')),
    lag: v('total-lag'),
    alerts: v('alerts-rows'),
    verify: v('verify-state'),
    rows,
    workers,
    proof: { behind: v('proof-lag'), proved: [...document.querySelectorAll('#partitions tbody tr td.proved')].map((td) => td.dataset.value) },
  };
})()`;

function pageNumbers(page: Page): Promise<PageNumbers> {
  return page.evaluate(PAGE_NUMBERS) as Promise<PageNumbers>;
}

interface VerifyPanel {
  /** The "last verify" tile. */
  tile: string;
  verdict: string;
  headline: string;
  /** [label, text] of each line of the summary. */
  facts: Array<[string, string]>;
  violationsShown: boolean;
  kinds: string[];
  messages: string[];
  more: string;
  /** Everything the panel shows. */
  text: string;
}

/** What the "Last verify" panel says, as a person reads it (visible text only). */
const VERIFY_PANEL = `(() => {
  const el = (id) => document.getElementById(id);
  const dl = [...el('verify-facts').children];
  const facts = [];
  for (let i = 0; i + 1 < dl.length; i += 2) facts.push([dl[i].textContent, dl[i + 1].textContent]);
  const items = (id) => [...el(id).querySelectorAll('li')].map((li) => li.textContent);
  return {
    tile: el('verify-state').textContent,
    verdict: el('verify-verdict').textContent,
    headline: el('verify-headline').textContent,
    facts,
    violationsShown: !el('verify-violations').hidden,
    kinds: items('verify-kinds'),
    messages: items('verify-messages'),
    more: el('verify-more').textContent,
    text: el('verify').innerText,
  };
})()`;

function verifyPanel(page: Page): Promise<VerifyPanel> {
  return page.evaluate(VERIFY_PANEL) as Promise<VerifyPanel>;
}

/** `exactlyonce verify --json`: its exit code and report (the run is recorded in audit_runs). */
async function runVerify(args: string[]): Promise<{ code: number | null; report: AuditReport }> {
  const r = await runCli(['verify', ...args, '--json']);
  assert.ok(r.stdout.trim().length > 0, `verify printed a report (stderr: ${r.stderr})`);
  return { code: r.code, report: JSON.parse(r.stdout) as AuditReport };
}

const n = (x: number) => x.toLocaleString('en-US');
/** The panel's "ran" line: local time, how long ago, how long it took. */
const RAN = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \((just now|\d+ s ago)\), took \d+\.\d s$/;

test("the dashboard in headless Chromium during a run: live numbers that move and equal the workers' /metrics, owners, lag, quarantine, alerts, verify", async (t) => {
  ensureChromium();
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const [port1, port2, dashboardPort] = [await freePort(), await freePort(), await freePort()];
  const workerArgs = (port: number) => ['--metrics-port', String(port)];
  const w1 = startWorker(t, config, workerArgs(port1));
  const w2 = startWorker(t, config, workerArgs(port2));
  // w1 is given with --worker-metrics; w2 is found only through the workers table.
  const dashboard = startCli(t, ['dashboard', ...connectionArgs(config), '--port', String(dashboardPort), '--worker-metrics', `127.0.0.1:${port1}`, '--interval-ms', '500']);
  const url = await waitFor(() => /dashboard: (http:\S+)/.exec(dashboard.output())?.[1], { timeoutMs: 60_000, message: 'the dashboard prints its URL' });
  assert.equal(url, `http://127.0.0.1:${dashboardPort}/`);
  await waitStarted(w1);
  await waitStarted(w2);
  const id1 = select(await scrape(port1), 'exactlyonce_worker_info')[0]!.labels['worker_id']!;
  const id2 = select(await scrape(port2), 'exactlyonce_worker_info')[0]!.labels['worker_id']!;

  const { page, pageErrors } = await browserPage(t);
  page.on('requestfailed', (r) => pageErrors.push(`request failed: ${r.url()}`));
  await page.goto(url);

  // Both workers, each found its own way, ready; no verify run yet.
  await waitFor(
    async () => {
      const n = await pageNumbers(page);
      const byId = Object.fromEntries(n.workers.map((w) => [w.id, w]));
      return n.workers.length === 2 && byId[id1]?.via === 'flag + registry' && byId[id2]?.via === 'registry' && n.workers.every((w) => w.status === 'ready') && n.verify === 'none';
    },
    { timeoutMs: 60_000, message: 'the page lists both workers as ready, and no verify run' },
  );

  // The original generator's events (3 clients, all Critical) with a few malformed ones, ~20 s long.
  const producing = generate(config, ['--count', '12000', '--rate', '600', '--bad-ratio', '0.01', '--seed', '11']);
  const first = await waitFor(async () => (await pageNumbers(page)).stored || undefined, { timeoutMs: 60_000, message: 'stored events appear on the page' });
  await waitFor(async () => (await pageNumbers(page)).stored > first, { timeoutMs: 30_000, message: `the stored count moves past ${first}` });
  await waitFor(async () => Number(await page.locator('#rate-stored').getAttribute('data-value')) > 0, { timeoutMs: 30_000, message: 'a non-zero rate' });
  await producing;
  await waitDrained(session, config);

  // Once drained, the page's numbers equal the workers' /metrics and Cassandra, exactly.
  const cps = await checkpoints(session, config);
  const quarantineRows = async (p: number) => Number((await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.quarantine WHERE partition = ?`, [p], { prepare: true })).first()['n']);
  const alertRows = Number((await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.alerts`)).first()['n']);
  let expected: unknown;
  await waitFor(
    async () => {
      const [m1, m2] = await Promise.all([scrape(port1), scrape(port2)]);
      const sum = (name: string) => total(m1, name) + total(m2, name);
      const ownerOf = (p: number) => [[id1, m1] as const, [id2, m2] as const].filter(([, m]) => select(m, 'exactlyonce_partition_owned', { partition: String(p) })[0]?.value === 1).map(([id]) => id).join(',');
      const rows = [];
      for (const p of [0, 1, 2]) {
        rows.push({ partition: p, owner: ownerOf(p), checkpoint: String(cps.get(p)), logEnd: String(cps.get(p)), lag: '0', quarantineRows: String(await quarantineRows(p)) });
      }
      expected = {
        stored: sum('exactlyonce_records_stored_total'),
        consumed: sum('exactlyonce_records_consumed_total'),
        quarantined: sum('exactlyonce_records_quarantined_total'),
        lag: '0',
        alerts: String(alertRows),
        rows,
      };
      const { workers: _w, verify: _v, proof: _p, ...shown } = await pageNumbers(page);
      try {
        assert.deepEqual(shown, expected);
        return true;
      } catch {
        return false;
      }
    },
    { timeoutMs: 30_000, message: `the page shows what /metrics and Cassandra say: ${JSON.stringify(expected)}` },
  );
  const shown = await pageNumbers(page);
  assert.deepEqual(shown.proof, { behind: '', proved: ['', '', ''] }, 'no proof before the first verify run');
  assert.equal(shown.stored + shown.quarantined, 12000, 'every record counted once');
  assert.equal(shown.consumed, 12000);
  assert.ok(shown.rows.every((r) => r.owner === id1 || r.owner === id2), 'each partition has one owner');
  assert.ok(alertRows > 0, 'the generator\'s Critical events raised alerts');
  assert.equal(await page.locator('#alerts tbody tr').count(), Math.min(10, alertRows));
  assert.equal(await page.locator('#alerts tbody tr').first().locator('td.source').textContent(), 'My Router');
  const peak = await page.evaluate('Math.max(...series.stored)');
  assert.ok(Number(peak) > 0, 'the throughput chart has the run in it');
  assert.equal(await page.locator('#chart-throughput canvas').count(), 1);

  // A real verify run on the drained pipeline: the panel says OK and what was checked, in words.
  const clean = await runVerify(connectionArgs(config));
  assert.equal(clean.code, 0, JSON.stringify(clean.report.violations));
  const a = clean.report.alerts!;
  assert.ok(a.settled && a.expected > 0);
  await waitFor(async () => (await pageNumbers(page)).verify === 'ok', { timeoutMs: 15_000, message: 'the verify result appears' });
  // The proof has reached the checkpoints: each partition proved to its checkpoint, nothing behind.
  await waitFor(async () => (await pageNumbers(page)).proof.behind === '0', { timeoutMs: 15_000, message: 'the proof appears' });
  assert.deepEqual((await pageNumbers(page)).proof.proved, shown.rows.map((r) => r.checkpoint));
  const ok = await verifyPanel(page);
  assert.deepEqual([ok.tile, ok.verdict, ok.headline], ['OK', 'OK', 'exactly once held: every record up to the checkpoints is stored once, with its values; the alerts equal their recount']);
  assert.equal(ok.facts[0]?.[0], 'ran');
  assert.match(ok.facts[0]![1], RAN);
  assert.deepEqual(ok.facts.slice(1), [
    ['topic', `${config.topic} (3 partitions)`],
    ['records checked', '12,000'],
    ['stored', n(shown.stored)],
    ['quarantined', n(shown.quarantined)],
    ['alerts checked', `${n(a.expected)} expected · ${n(a.expected)} in the table · ${n(a.expected)} on the topic`],
  ]);
  assert.deepEqual([ok.violationsShown, ok.kinds, ok.messages, ok.more], [false, [], [], '']);
  assert.doesNotMatch(ok.text, /aheadOfCheckpoint|gapOffsets|[{}"]/, 'no field names, no JSON');

  mkdirSync(join(repoRoot, 'test-artifacts'), { recursive: true });
  await page.screenshot({ path: SCREENSHOT, fullPage: true });
  t.diagnostic(`screenshot: ${SCREENSHOT}`);

  // Two events rows deleted: the next run fails, and the panel lists its violations in words.
  const ks = config.keyspace;
  const gone = [];
  for (const p of [0, 1]) {
    const row = (await session.execute(`SELECT * FROM ${ks}.events WHERE partition = ? LIMIT 1`, [p], { prepare: true })).first();
    await session.execute(`DELETE FROM ${ks}.events WHERE partition = ? AND offset = ?`, [p, row['offset']], { prepare: true });
    gone.push(row);
  }
  const failed = await runVerify([...connectionArgs(config), '--full']);
  assert.equal(failed.code, 9, 'EO_VERIFY_FAILED');
  assert.equal(failed.report.violationTotal, 2);
  await waitFor(async () => (await pageNumbers(page)).verify === 'failed', { timeoutMs: 15_000, message: 'the failed verify run appears' });
  const bad = await verifyPanel(page);
  assert.deepEqual([bad.tile, bad.verdict, bad.headline], ['2 violations', '2 violations', 'exactly once VIOLATED']);
  assert.match(bad.facts[0]![1], RAN);
  assert.deepEqual(bad.facts.slice(1), [
    ['topic', `${config.topic} (3 partitions)`],
    ['records checked', '12,000'],
    ['stored', n(shown.stored - 2)],
    ['quarantined', n(shown.quarantined)],
    ['alerts checked', `${n(a.expected)} expected · ${n(a.expected)} in the table · ${n(a.expected)} on the topic`],
  ]);
  assert.equal(bad.violationsShown, true);
  assert.deepEqual(bad.kinds, ['2 missing — offsets with no row in events or quarantine']);
  const messages = gone.map((row) => `partition ${row['partition']} offset ${row['offset']}: a valid event has no row in events (nor in quarantine)`);
  assert.deepEqual(bad.messages, [failed.report.violations[0]!.message]);
  assert.ok(messages.includes(bad.messages[0]!), `${bad.messages[0]} is one of ${messages.join(' | ')}`);
  assert.equal(bad.more, '… and 1 more: `exactlyonce verify` lists them');
  assert.doesNotMatch(bad.text, /[{}"]/, 'no JSON');
  await page.screenshot({ path: SCREENSHOT.replace(/\.png$/, '-violations.png'), fullPage: true });
  for (const row of gone) {
    const cols = Object.keys(row);
    await session.execute(`INSERT INTO ${ks}.events (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')})`, cols.map((c) => row[c]), { prepare: true });
  }

  // A worker killed: shown down at once, and its partitions move to the other within the session timeout.
  w2.kill('SIGKILL');
  await waitFor(async () => (await pageNumbers(page)).workers.find((w) => w.id === id2)?.status === 'down', { timeoutMs: 15_000, message: 'the killed worker is shown down' });
  await waitFor(async () => (await pageNumbers(page)).rows.every((r) => r.owner === id1), { timeoutMs: 60_000, message: `every partition is owned by ${id1}` });
  assert.deepEqual(pageErrors, []);

  for (const p of [dashboard, w1]) p.kill('SIGTERM');
  for (const p of [dashboard, w1]) {
    const [code] = p.exitCode === null && p.signalCode === null ? await once(p, 'exit') : [p.exitCode];
    assert.equal(code, 0, p.output());
  }
});
