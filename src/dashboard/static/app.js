// The dashboard page: one EventSource (/api/events) feeds every number and both charts. Plain DOM,
// uPlot for the charts (served by the dashboard from node_modules). Every number element carries its
// raw value in data-value, so tests and scripts read exact numbers, not formatted text.
/* global uPlot */
'use strict';

const $ = (id) => document.getElementById(id);
const fmt = (n) => (n === null || n === undefined ? '–' : Number(n).toLocaleString('en-US', { maximumFractionDigits: Math.abs(n) < 10 ? 1 : 0 }));
const COLORS = ['#2f6fde', '#1f9d55', '#c27c0e', '#cf3b3b', '#7b4fd6', '#0f9fb5', '#d6508f', '#5d6b82', '#8a9a1b', '#b5651d'];

function setNum(el, value, text) {
  el.dataset.value = value === null || value === undefined ? '' : String(value);
  el.textContent = text ?? fmt(value);
}

function cell(tr, text, cls, value) {
  const td = document.createElement('td');
  if (cls) td.className = cls;
  if (value !== undefined) td.dataset.value = value === null ? '' : String(value);
  if (text instanceof Node) td.appendChild(text);
  else td.textContent = text;
  tr.appendChild(td);
  return td;
}

function badge(text, kind) {
  const b = document.createElement('span');
  b.className = `badge ${kind}`;
  b.textContent = text;
  return b;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function bytes(n) {
  if (n === null || n === undefined) return '–';
  return `${(n / 1048576).toFixed(0)} MiB`;
}

// ---- charts ----

const charts = { throughput: null, lag: null, lagKeys: [] };
const series = { t: [], consumed: [], stored: [], quarantined: [], checkpointed: [], lag: {} };

function chartWidth(el) {
  return Math.max(300, el.clientWidth - 4);
}

function makeThroughput() {
  const el = $('chart-throughput');
  const opts = {
    width: chartWidth(el),
    height: 240,
    cursor: { drag: { x: false, y: false } },
    scales: { y: { range: (u, min, max) => [0, Math.max(10, max * 1.1)] } },
    series: [
      {},
      { label: 'consumed/s', stroke: COLORS[0], width: 1.5 },
      { label: 'stored/s', stroke: COLORS[1], width: 2 },
      { label: 'quarantined/s', stroke: COLORS[3], width: 1.5 },
      { label: 'checkpointed/s', stroke: COLORS[2], width: 1.5, dash: [4, 4] },
    ],
    axes: [{}, { size: 60 }],
  };
  charts.throughput = new uPlot(opts, [series.t, series.consumed, series.stored, series.quarantined, series.checkpointed], el);
}

function makeLag(keys) {
  const el = $('chart-lag');
  charts.lag?.destroy();
  charts.lagKeys = keys;
  const opts = {
    width: chartWidth(el),
    height: 240,
    cursor: { drag: { x: false, y: false } },
    scales: { y: { range: (u, min, max) => [0, Math.max(10, max * 1.1)] } },
    series: [{}, ...keys.map((k, i) => ({ label: `partition ${k}`, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
    axes: [{}, { size: 60 }],
  };
  charts.lag = new uPlot(opts, lagData(), el);
}

function lagData() {
  return [series.t, ...charts.lagKeys.map((k) => series.lag[k])];
}

function addPoint(p) {
  series.t.push(p.t);
  for (const k of ['consumed', 'stored', 'quarantined', 'checkpointed']) series[k].push(p[k]);
  const n = series.t.length;
  for (const k of Object.keys(p.lagByPartition)) {
    if (series.lag[k] === undefined) series.lag[k] = new Array(n - 1).fill(null);
  }
  for (const k of Object.keys(series.lag)) series.lag[k].push(p.lagByPartition[k] ?? null);
  const max = 600;
  if (n > max) {
    const cut = n - max;
    for (const a of [series.t, series.consumed, series.stored, series.quarantined, series.checkpointed, ...Object.values(series.lag)]) a.splice(0, cut);
  }
}

function redraw() {
  if (charts.throughput === null) makeThroughput();
  charts.throughput.setData([series.t, series.consumed, series.stored, series.quarantined, series.checkpointed]);
  const keys = Object.keys(series.lag).sort((a, b) => Number(a) - Number(b));
  if (charts.lag === null || keys.join() !== charts.lagKeys.join()) makeLag(keys);
  else charts.lag.setData(lagData());
}

window.addEventListener('resize', () => {
  charts.throughput?.setSize({ width: chartWidth($('chart-throughput')), height: 240 });
  charts.lag?.setSize({ width: chartWidth($('chart-lag')), height: 240 });
});

// ---- numbers and tables ----

function renderTiles(s) {
  $('scope').textContent = `keyspace ${s.keyspace} · topic ${s.topic} · group ${s.group}`;
  setNum($('rate-stored'), s.rates.stored);
  $('rate-detail').textContent = `consumed ${fmt(s.rates.consumed)}/s · checkpointed ${fmt(s.rates.checkpointed)}/s`;
  setNum($('total-lag'), s.totals.lag);
  setNum($('proof-lag'), s.totals.proofLag);
  setNum($('total-stored'), s.totals.stored);
  setNum($('total-consumed'), s.totals.consumed);
  setNum($('total-quarantined'), s.totals.quarantined);
  $('quarantine-rows').textContent = s.quarantine ? `${fmt(s.quarantine.total)}${s.quarantine.capped ? '+' : ''} rows in Cassandra` : '';
  setNum($('workers-ready'), s.totals.workersReady, `${s.totals.workersReady} / ${s.totals.workers}`);
  $('workers-detail').textContent = `${s.totals.workersUp} answering · ${s.totals.partitions} partitions`;
  const a = s.alerts;
  setNum($('alerts-rows'), a ? a.rows : null);
  const raised = s.totals.alertsRaised === null ? '' : ` · raised ${fmt(s.totals.alertsRaised)}, revised ${fmt(s.totals.alertsRevised)}`;
  $('alerts-detail').textContent = a ? `${a.sources} source${a.sources === 1 ? '' : 's'}${raised}` : '';
  const v = $('verify-state');
  const run = s.verify.run;
  v.className = s.verify.state === 'ok' ? 'ok' : s.verify.state === 'failed' ? 'bad' : '';
  v.dataset.value = s.verify.state;
  v.textContent = run === null ? { none: 'none yet', unknown: '–' }[s.verify.state] ?? '–' : verdict(run).text;
  $('verify-when').textContent = run?.finishedAt ? ago(run.finishedAt) : '';
}

function renderProblems(s) {
  fill(
    $('problems'),
    s.problems.map((p) => {
      const li = document.createElement('li');
      li.textContent = p;
      return li;
    }),
  );
}

function partitionState(p) {
  if (p.stopped) return badge('stopped', 'bad');
  if (p.owners.length === 0) return badge('unowned', 'warn');
  if (p.owners.length > 1) return badge('handing over', 'warn');
  if (p.stalled) return badge('stalled', 'bad');
  if ((p.lag ?? 0) === 0 && (p.held ?? 0) > 0) return badge('waiting on an open transaction', 'warn');
  if ((p.lag ?? 0) === 0) return badge('caught up', 'ok');
  return badge('catching up', '');
}

function renderPartitions(s) {
  fill(
    $('partitions').tBodies[0],
    s.partitions.map((p) => {
      const tr = document.createElement('tr');
      tr.dataset.partition = String(p.partition);
      cell(tr, String(p.partition), 'partition', p.partition);
      cell(tr, p.owners.join(', ') || '—', 'owner', p.owners.join(','));
      cell(tr, fmt(p.checkpoint), 'n checkpoint', p.checkpoint);
      cell(tr, fmt(p.logEnd), 'n log-end', p.logEnd);
      cell(tr, fmt(p.lag), 'n lag', p.lag);
      cell(tr, fmt(p.held), 'n held', p.held);
      cell(tr, fmt(p.proved), 'n proved', p.proved);
      cell(tr, fmt(p.proofLag), 'n proof-lag', p.proofLag);
      cell(tr, fmt(p.consumed), 'n consumed', p.consumed);
      cell(tr, fmt(p.stored), 'n stored', p.stored);
      cell(tr, fmt(p.quarantined), 'n quarantined', p.quarantined);
      cell(tr, fmt(p.quarantineRows), 'n quarantine-rows', p.quarantineRows);
      cell(tr, partitionState(p), 'state');
      return tr;
    }),
  );
}

function renderWorkers(s) {
  fill(
    $('workers').tBodies[0],
    s.workers.map((w) => {
      const tr = document.createElement('tr');
      tr.dataset.worker = w.id;
      tr.dataset.address = w.address;
      cell(tr, w.id, 'id');
      cell(tr, w.address, 'address');
      cell(tr, w.via.join(' + '), 'via');
      const status = !w.up ? badge('down', 'bad') : w.ready ? badge('ready', 'ok') : badge('not ready', 'warn');
      status.title = w.error ?? w.readyDetail ?? '';
      cell(tr, status, 'status', !w.up ? 'down' : w.ready ? 'ready' : 'not-ready');
      cell(tr, w.owned.join(', ') || '—', 'owned', w.owned.join(','));
      cell(tr, fmt(w.consumed), 'n consumed', w.consumed);
      cell(tr, fmt(w.stored), 'n stored', w.stored);
      cell(tr, fmt(w.quarantined), 'n quarantined', w.quarantined);
      cell(tr, w.batchP50Ms === null ? '–' : `${fmt(w.batchP50Ms)} / ${fmt(w.batchP95Ms)}`, 'n batch');
      cell(tr, fmt(w.retries), 'n retries', w.retries);
      cell(tr, fmt(w.errors), 'n errors', w.errors);
      cell(tr, bytes(w.rssBytes), 'n rss', w.rssBytes);
      return tr;
    }),
  );
}

function renderAlerts(s) {
  const rows = s.alerts?.latest ?? [];
  fill(
    $('alerts').tBodies[0],
    rows.map((a) => {
      const tr = document.createElement('tr');
      cell(tr, new Date(a.ts).toLocaleString(), 'ts', a.ts);
      cell(tr, a.source, 'source');
      cell(tr, fmt(a.eventCount), 'n count', a.eventCount);
      return tr;
    }),
  );
  $('alerts-empty').textContent = s.alerts === null ? 'reading the alerts table…' : rows.length === 0 ? 'no alerts yet' : '';
}

function renderQuarantine(s) {
  const q = s.quarantine;
  const entries = q ? Object.entries(q.byReason).sort((a, b) => b[1] - a[1]) : [];
  fill(
    $('quarantine').tBodies[0],
    entries.map(([reason, n]) => {
      const tr = document.createElement('tr');
      tr.dataset.reason = reason;
      cell(tr, reason, 'reason');
      cell(tr, fmt(n), 'n count', n);
      return tr;
    }),
  );
  $('quarantine-empty').textContent = q === null ? 'counting…' : entries.length === 0 ? 'nothing quarantined' : q.capped ? 'counts are lower bounds (large quarantine)' : '';
}

// ---- jobs: what `exactlyonce status` shows, per job (snapshot.jobs is its --json form) ----

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

/** A value shown as text, its exact value (offsets are strings: exact beyond 2^53) in data-value. */
function valued(tag, cls, value, text) {
  const e = el(tag, cls, text ?? (value === null || value === undefined ? '–' : String(value)));
  e.dataset.value = value === null || value === undefined ? '' : String(value);
  return e;
}

const big = (v) => (v === null || v === undefined ? '–' : /^\d{1,15}$/.test(v) ? fmt(Number(v)) : v);

function jobVerify(j) {
  const v = j.lastVerify;
  if (v === null) return valued('span', 'verify-line', 'none', `none recorded (run \`exactlyonce verify${j.name === 'events' ? '' : ' --job <its module or sink config>'}\`)`);
  const violations = Object.entries(v.summary?.violations ?? {}).map(([k, n]) => `${n} ${k}`);
  const text = `${v.ok ? 'held' : 'FAILED'}${v.at === null ? '' : ` at ${when(Date.parse(v.at))} (${ago(Date.parse(v.at))})`}, ${v.summary?.records ?? '?'} records${violations.length === 0 ? '' : `; ${violations.join(', ')}`}`;
  const span = valued('span', `verify-line ${v.ok ? '' : 'problem'}`, v.ok ? 'held' : 'failed', text);
  return span;
}

function jobCard(j) {
  const card = el('div', 'job');
  card.dataset.job = j.name;
  card.appendChild(el('h3', 'name', `job ${j.name}`));

  const head = el('p', 'summary');
  const n = j.partitions.length;
  head.append(
    'topic ',
    valued('b', 'topic', j.topic),
    ` · ${n} partition${n === 1 ? '' : 's'} · lag `,
    valued('b', 'lag', j.lag, big(j.lag)),
    ' · ',
    valued('b', 'stopped-count', j.stopped.length),
    ' stopped · workers ',
    valued('b', 'workers', j.workers.join(','), j.workers.length === 0 ? 'none' : j.workers.join(', ')),
  );
  card.appendChild(head);
  if (j.topicProblem !== null) card.appendChild(el('p', 'problem topic-problem', j.topicProblem));

  const table = el('table', 'partitions');
  const hr = el('tr');
  for (const [h, c] of [['partition'], ['checkpoint', 'n'], ['log end', 'n'], ['lag', 'n'], ['epoch', 'n'], ['owner'], ['stopped']]) hr.appendChild(el('th', c, h));
  table.appendChild(el('thead')).appendChild(hr);
  const body = table.appendChild(el('tbody'));
  for (const p of j.partitions) {
    const tr = el('tr');
    tr.dataset.partition = String(p.partition);
    cell(tr, String(p.partition), 'partition', p.partition);
    cell(tr, big(p.checkpoint), 'n checkpoint', p.checkpoint);
    cell(tr, big(p.logEnd), 'n log-end', p.logEnd);
    cell(tr, big(p.lag), 'n lag', p.lag);
    cell(tr, p.epoch === null ? '–' : String(p.epoch), 'n epoch', p.epoch);
    cell(tr, p.owner ?? '—', 'owner', p.owner);
    cell(tr, p.stopped === null ? '—' : badge(p.stopped.code, 'bad'), 'stopped', p.stopped?.code ?? null);
    body.appendChild(tr);
  }
  card.appendChild(table);

  if (j.stopped.length > 0) {
    const list = el('ul', 'stopped');
    for (const s of j.stopped) {
      const li = el('li');
      li.dataset.partition = String(s.partition);
      li.dataset.code = s.code;
      li.append(`partition ${s.partition} stopped, `, el('b', 'code', s.code), ': ', el('span', 'message', s.message));
      const fix = el('div', '', 'to get it going: ');
      fix.appendChild(el('code', 'fix', s.fix));
      li.appendChild(fix);
      list.appendChild(li);
    }
    card.appendChild(list);
  }

  const q = el('p', 'quarantine');
  const reasons = Object.entries(j.quarantine).sort(([a], [b]) => a.localeCompare(b));
  q.append('quarantine: ');
  if (reasons.length === 0) q.append('empty');
  reasons.forEach(([reason, count], i) => {
    if (i > 0) q.append(', ');
    const r = valued('span', 'reason', count, `${fmt(count)} ${reason}`);
    r.dataset.reason = reason;
    q.appendChild(r);
  });
  if (j.quarantineCapped) q.append(' (at least: a large quarantine is counted up to a bound)');
  card.appendChild(q);

  const v = el('p', 'last-verify');
  v.append('last verify: ', jobVerify(j));
  card.appendChild(v);
  return card;
}

function renderJobs(s) {
  const jobs = s.jobs ?? null;
  $('jobs-empty').textContent = jobs === null ? 'reading…' : jobs.length === 0 ? 'no job has run in this keyspace yet' : '';
  $('jobs-empty').hidden = jobs !== null && jobs.length > 0;
  fill($('jobs'), (jobs ?? []).map(jobCard));
}

// ---- last verify ----

const pad = (n) => String(n).padStart(2, '0');

/** Local time, `YYYY-MM-DD HH:MM:SS`. */
function when(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 5) return 'just now';
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

const plural = (n, one, many) => `${fmt(n)} ${n === 1 ? one : many}`;

/** The verdict: OK, N violations, or FAILED (a failed run whose summary does not count them). */
function verdict(run) {
  if (run.ok === true) return { text: 'OK', kind: 'ok' };
  const n = run.summary?.violationTotal ?? 0;
  if (run.ok === false) return { text: n > 0 ? plural(n, 'violation', 'violations') : 'FAILED', kind: 'bad' };
  return { text: 'unknown', kind: 'warn' };
}

function fact(dl, label, text, value) {
  const dt = document.createElement('dt');
  dt.textContent = label;
  const dd = document.createElement('dd');
  dd.textContent = text;
  if (value !== undefined) dd.dataset.value = value === null ? '' : String(value);
  dl.append(dt, dd);
}

function listItems(el, items) {
  fill(
    el,
    items.map((text) => {
      const li = document.createElement('li');
      li.textContent = text;
      return li;
    }),
  );
}

function renderVerify(s) {
  const run = s.verify.run;
  $('verify-run').hidden = run === null;
  $('verify-empty').hidden = run !== null;
  if (run === null) {
    $('verify-empty').textContent = s.verify.state === 'unknown' ? 'reading…' : 'no verify run yet — run `exactlyonce verify`';
    return;
  }
  const sum = run.summary;
  const v = verdict(run);
  const badgeEl = $('verify-verdict');
  badgeEl.className = `badge ${v.kind}`;
  badgeEl.textContent = v.text;
  const incremental = sum?.mode === 'incremental';
  const alertsHeld = sum?.alerts?.settled ? (incremental ? '; the alerts of the windows it judged equal their recount' : '; the alerts equal their recount') : '';
  const scope = incremental ? 'every record after the last proof, up to the checkpoints,' : 'every record up to the checkpoints';
  $('verify-headline').textContent = run.ok === true ? `exactly once held: ${scope} is stored once, with its values${alertsHeld}` : run.ok === false ? 'exactly once VIOLATED' : '';

  const dl = $('verify-facts');
  dl.replaceChildren();
  const ran = run.finishedAt === null ? 'unknown' : `${when(run.finishedAt)} (${ago(run.finishedAt)})`;
  fact(dl, 'ran', sum?.durationMs == null ? ran : `${ran}, took ${(sum.durationMs / 1000).toFixed(1)} s`, run.finishedAt);
  if (sum !== null) {
    if (sum.topic !== null) fact(dl, 'topic', sum.partitions === null ? sum.topic : `${sum.topic} (${plural(sum.partitions, 'partition', 'partitions')})`);
    fact(dl, 'records checked', incremental ? `${fmt(sum.records)} (incremental: from where the last proof ended; earlier records not checked again)` : fmt(sum.records), sum.records);
    fact(dl, 'stored', fmt(sum.stored), sum.stored);
    fact(dl, 'quarantined', fmt(sum.quarantined), sum.quarantined);
    if ((sum.notYetChecked ?? 0) > 0) fact(dl, 'not yet checked', `${fmt(sum.notYetChecked)} beyond the checkpoints (the pipeline was running)`, sum.notYetChecked);
    const a = sum.alerts;
    let alerts = 'not checked (--skip-alerts)';
    if (a !== null) {
      alerts = `${fmt(a.expected)} expected · ${fmt(a.table)} in the table · ${fmt(a.topic)} on the topic`;
      if (!a.settled) alerts += ` · not settled (the pipeline was moving): ${plural(a.unsettled, 'difference', 'differences')} not judged`;
    }
    fact(dl, 'alerts checked', alerts, a === null ? null : a.expected);
  }

  const violations = sum?.violations ?? [];
  $('verify-violations').hidden = violations.length === 0;
  listItems($('verify-kinds'), violations.map((k) => `${fmt(k.count)} ${k.name}${k.what ? ` — ${k.what}` : ''}`));
  const first = sum?.firstViolations ?? [];
  listItems($('verify-messages'), first);
  const more = (sum?.violationTotal ?? 0) - first.length;
  $('verify-more').textContent = more > 0 ? `… and ${fmt(more)} more: \`exactlyonce verify\` lists them` : '';
  const raw = $('verify-unreadable');
  raw.hidden = run.unreadable === null || run.unreadable === undefined;
  raw.textContent = raw.hidden ? '' : `summary (not in the format this dashboard reads): ${run.unreadable}`;
}

function render(s) {
  if (!s) return;
  renderTiles(s);
  renderProblems(s);
  renderJobs(s);
  $('partitions-scope').textContent = `the events job on ${s.topic}, with the counts of its workers' /metrics`;
  renderPartitions(s);
  renderWorkers(s);
  renderAlerts(s);
  renderQuarantine(s);
  renderVerify(s);
  document.body.dataset.updated = String(s.at);
}

// ---- live updates ----

let lastUpdate = 0;
function markLive() {
  lastUpdate = Date.now();
  $('live').classList.remove('stale');
  $('live-text').textContent = `live · ${new Date().toLocaleTimeString()}`;
}
setInterval(() => {
  if (Date.now() - lastUpdate > 5000) {
    $('live').classList.add('stale');
    $('live-text').textContent = lastUpdate === 0 ? 'connecting' : 'no updates — is the dashboard running?';
  }
}, 1000);

const events = new EventSource('/api/events');
events.addEventListener('hello', (e) => {
  const { snapshot, history } = JSON.parse(e.data);
  for (const k of Object.keys(series)) series[k] = k === 'lag' ? {} : [];
  for (const p of history) addPoint(p);
  redraw();
  render(snapshot);
  if (snapshot) markLive();
});
events.addEventListener('tick', (e) => {
  const { snapshot, point } = JSON.parse(e.data);
  addPoint(point);
  redraw();
  render(snapshot);
  markLive();
});
