/**
 * What an operator installs beside the package (monitoring/: a Grafana dashboard and Prometheus alert
 * rules) reads only what a worker serves: every metric and label their expressions use is checked
 * against a running worker's /metrics. The worker runs a job (test/fixtures/monitored-job.ts) that makes
 * it serve every series they read: stored and quarantined records, a stopped partition, a retried write.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { parsePrometheus, select, type Sample } from '../../src/dashboard/prometheus.js';
import { Producer } from '../../src/kafka/producer.js';
import { freshKeyspace, freshTopic, repoRoot, testConfig, waitFor } from '../helpers.js';
import { promqlUse, type PromqlUse } from '../promql.js';
import { freePort, startWorker } from '../pipeline.js';

/** Labels Prometheus adds to every series it scrapes (not served by the worker). */
const TARGET_LABELS = new Set(['job', 'instance']);

interface Query {
  where: string;
  expr: string;
  /** Labels the text around the query shows (`{{partition}}` in a legend, `$labels.server` in an annotation). */
  shows: string[];
}

function grafanaQueries(): { queries: Query[]; variables: Array<{ where: string; metric: string; label: string }> } {
  const dashboard = JSON.parse(readFileSync(join(repoRoot, 'monitoring', 'grafana-dashboard.json'), 'utf8')) as {
    panels: Array<{ id: number; title: string; targets: Array<{ expr: string; legendFormat?: string }> }>;
    templating: { list: Array<{ name: string; query: unknown }> };
  };
  assert.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length, 'panel ids are unique');
  const queries = dashboard.panels.flatMap((p) =>
    p.targets.map((t) => ({
      where: `dashboard panel "${p.title}"`,
      // Grafana's own variables become what Prometheus would be sent.
      expr: t.expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.+'),
      shows: [...(t.legendFormat ?? '').matchAll(/\{\{\s*(\w+)\s*\}\}/g)].map((m) => m[1]!),
    })),
  );
  const variables = dashboard.templating.list
    .filter((v) => typeof v.query === 'object')
    .map((v) => {
      const m = /^label_values\((\w+),\s*(\w+)\)$/.exec((v.query as { query: string }).query);
      assert.ok(m !== null, `variable ${v.name}: label_values(metric, label)`);
      return { where: `dashboard variable $${v.name}`, metric: m[1]!, label: m[2]! };
    });
  return { queries, variables };
}

function ruleQueries(): Query[] {
  const file = parseYaml(readFileSync(join(repoRoot, 'monitoring', 'prometheus-rules.yml'), 'utf8')) as {
    groups: Array<{ name: string; rules: Array<{ alert: string; expr: string; for?: string; labels?: { severity?: string }; annotations?: Record<string, string> }> }>;
  };
  return file.groups.flatMap((g) =>
    g.rules.map((r) => {
      assert.ok(r.for !== undefined && ['critical', 'warning'].includes(r.labels?.severity ?? ''), `rule ${r.alert}: a 'for' and a severity`);
      assert.ok((r.annotations?.['summary'] ?? '') !== '' && (r.annotations?.['description'] ?? '') !== '', `rule ${r.alert}: a summary and a description`);
      const text = Object.values(r.annotations ?? {}).join('\n');
      return { where: `alert ${r.alert}`, expr: r.expr, shows: [...text.matchAll(/\$labels\.(\w+)/g)].map((m) => m[1]!) };
    }),
  );
}

/** Served metric name → the label names its samples carry. */
function served(samples: Sample[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const s of samples) {
    const labels = out.get(s.name) ?? new Set<string>();
    for (const l of Object.keys(s.labels)) labels.add(l);
    out.set(s.name, labels);
  }
  return out;
}

test("the Grafana dashboard and the Prometheus alert rules use only metrics and labels a running worker's /metrics serves", async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  await freshTopic(t, config, 3);
  const port = await freePort();
  const worker = startWorker(t, config, ['--job', join(repoRoot, 'test', 'fixtures', 'monitored-job.ts'), '--metrics-port', String(port)]);
  const producer = new Producer(config);
  t.after(() => producer.close());
  await producer.connect();
  const good = (n: number, partition: number) => Array.from({ length: n }, (_, i) => ({ key: `k${i}`, partition, value: JSON.stringify({ n: i }) }));
  await producer.send(config.topic, [...good(10, 0), ...good(50, 1), ...good(50, 2), ...Array.from({ length: 5 }, () => ({ key: 'bad', partition: 2, value: 'not json' }))]);

  const scrape = async () => parsePrometheus(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
  const value = (s: Sample[], name: string, labels: Record<string, string>) => select(s, name, labels)[0]?.value;
  // Partition 0 stopped, partition 1 stored after one retried write, partition 2 stored with 5 quarantined;
  // none stalled.
  const samples = await waitFor(
    async () => {
      const s = await scrape();
      return value(s, 'exactlyonce_partition_stopped', { partition: '0' }) === 1 &&
        value(s, 'exactlyonce_checkpoint_offset', { partition: '1' }) === 50 &&
        value(s, 'exactlyonce_checkpoint_offset', { partition: '2' }) === 55
        ? s
        : undefined;
    },
    { timeoutMs: 180_000, intervalMs: 500, message: 'partition 0 stopped, 1 and 2 checkpointed at their log ends' },
  ).catch((e: Error) => assert.fail(`${e.message}\nthe worker said:\n${worker.output().slice(-3000)}`));
  // The retriable error the job threw (an ExactlyOnceError of the package it imports) was retried, not taken for a permanent one.
  // Every owned partition's flags are served, 0 unless set.
  assert.deepEqual([1, 2].map((p) => value(samples, 'exactlyonce_partition_stopped', { partition: String(p) })), [0, 0], 'partitions 1 and 2 are not stopped');
  assert.deepEqual([0, 1, 2].map((p) => value(samples, 'exactlyonce_partition_stalled', { partition: String(p) })), [0, 0, 0], 'none stalled');
  assert.equal(value(samples, 'exactlyonce_retries_total', { server: 'Cassandra' }), 1);
  assert.equal(value(samples, 'exactlyonce_errors_total', { server: 'Cassandra', error: 'EO_CASSANDRA_UNAVAILABLE' }), 1);
  assert.equal(value(samples, 'exactlyonce_partition_stops_total', { code: 'EO_PERMANENT_ERROR' }), 1);
  assert.equal(value(samples, 'exactlyonce_records_quarantined_total', { partition: '2', reason: 'bad_json' }), 5);

  const { queries, variables } = grafanaQueries();
  const all = [...queries, ...ruleQueries()];
  const have = served(samples);
  const problems: string[] = [];
  const used = new Set<string>();
  for (const q of all) {
    const use: PromqlUse = promqlUse(q.expr);
    for (const e of use.errors) problems.push(`${q.where}: does not parse (${e}): ${q.expr}`);
    for (const [metric, labels] of use.metrics) {
      used.add(metric);
      const serves = have.get(metric);
      if (serves === undefined) {
        problems.push(`${q.where}: ${metric} is not served`);
        continue;
      }
      for (const l of labels) if (!serves.has(l) && !TARGET_LABELS.has(l)) problems.push(`${q.where}: ${metric} has no label ${l} (it has ${[...serves].join(', ') || 'none'})`);
    }
    for (const l of q.shows) if (use.resultLabels !== undefined && !use.resultLabels.has(l)) problems.push(`${q.where}: shows {{${l}}}, which its result does not keep (by ${[...use.resultLabels].join(', ')})`);
  }
  for (const v of variables) {
    used.add(v.metric);
    if (!have.has(v.metric)) problems.push(`${v.where}: ${v.metric} is not served`);
    else if (!have.get(v.metric)!.has(v.label) && !TARGET_LABELS.has(v.label)) problems.push(`${v.where}: ${v.metric} has no label ${v.label}`);
  }
  assert.deepEqual(problems, []);
  // What the issue asks them to cover: lag, stalls, stopped partitions, retries, the quarantine rate.
  for (const m of ['exactlyonce_lag_records', 'exactlyonce_partition_stalled', 'exactlyonce_partition_stopped', 'exactlyonce_retries_total', 'exactlyonce_records_quarantined_total']) {
    assert.ok(used.has(m), `${m} is used`);
  }
  assert.ok(queries.length >= 10 && all.length - queries.length >= 5, `${queries.length} dashboard queries, ${all.length - queries.length} rules`);
  worker.kill('SIGTERM');
  await waitFor(() => worker.exitCode !== null, { timeoutMs: 60_000, message: 'the worker stops on SIGTERM' });
});
