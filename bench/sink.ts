/**
 * The declarative sink on the events every throughput case reads (issue 38's cases): one real
 * `exactlyonce run --job <sink config>` worker drains the pre-produced topic into a table of the
 * `events` shape (the same five columns), in log mode (`sinkLog`: one row per record, like the events
 * job's rows) and in upsert mode (`sinkUpsert`: one row per record key; the workload keys its records
 * by `upsertKeys` distinct numbers, src/bench/workload.ts), and in aggregate mode (`sinkAggregate`: per
 * client and minute of event time a count, a sum and a max; compared with `sinkLog`, with the rows
 * it wrote per 1,000 records), and `sinkWide` (log mode with the record key and Kafka's metadata as
 * columns, a filter and a TTL: compared with `sinkLog`). Compared with `exactlyOnce1` (the events job on the same records; none
 * of them Critical by default, so its alerts cost nothing).
 */
import { rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ConnectionConfig } from '../src/config.js';
import { applyJobMigrations } from '../src/cassandra/migrate.js';
import { fromLong } from '../src/cassandra/session.js';
import { sinkConfig as parseSinkConfig } from '../src/jobs/sink/sink-config.js';
import { SinkJob } from '../src/jobs/sink/sink-job.js';
import type { BenchContext } from './context.js';
import { drainTarget, measureProcessDrain } from './drain.js';
import { startWorker, waitAssigned } from './processes.js';
import type { CaseResult } from './results.js';

export type SinkMode = 'log' | 'upsert' | 'aggregate' | 'aggregate-groups' | 'wide';

/** The sink config of a mode: the events' five fields as columns; upsert adds the record key as its key. */
export function sinkConfig(mode: SinkMode, topic: string): object {
  const columns = {
    id: { type: 'bigint', required: true },
    ts: { type: 'timestamp', required: true },
    source: { type: 'text', required: true },
    client: { type: 'text', required: true },
    health: { type: 'int', required: true },
  };
  if (mode === 'aggregate-groups') {
    // Many groups in one window: the workload's event time has 10,000 records a second, so its
    // milliseconds make ~100,000 groups per 1,000,000 records, all in one day's window.
    return { name: 'bench_events', topic, table: 'events_sink', mode: 'aggregate', groupBy: ['ts'], window: { time: 'ts', size: '1d' }, columns, aggregates: { events: 'count', health_sum: 'sum(health)' } };
  }
  if (mode === 'aggregate') {
    // The workload's 3 clients × 1-minute windows of event time: a count, a sum and a max (ids are random
    // 64-bit numbers: their sum would pass bigint's range and stop the partition, as it should).
    const aggregates = { events: 'count', health_sum: 'sum(health)', top_id: 'max(id)' };
    return { name: 'bench_events', topic, table: 'events_sink', mode, groupBy: ['client'], window: { time: 'ts', size: '1m' }, columns, aggregates };
  }
  if (mode === 'wide') {
    // Issue 37's sink on one topic: log mode with the record key and Kafka's metadata as columns, a
    // filter every record passes (its cost without fewer rows) and a TTL.
    const more = { k: { type: 'bigint', field: 'key' }, part: { type: 'int', field: '$partition' }, off: { type: 'bigint', field: '$offset' }, at: { type: 'timestamp', field: '$timestamp' } };
    return { name: 'bench_events', topic, table: 'events_sink', mode: 'log', ttl: '7d', where: { not: { field: 'health', equals: 99 } }, columns: { ...columns, ...more } };
  }
  return mode === 'log'
    ? { name: 'bench_events', topic, table: 'events_sink', mode, columns }
    : { name: 'bench_events', topic, table: 'events_sink', mode, key: ['k'], columns: { k: { type: 'bigint', field: 'key' }, ...columns } };
}

export async function runSink(ctx: BenchContext, name: string, topic: string, mode: SinkMode): Promise<CaseResult> {
  const config: ConnectionConfig = ctx.caseConfig(name, topic);
  await ctx.freshKeyspace(config);
  const file = path.join(os.tmpdir(), `${config.keyspace}.json`);
  const raw = sinkConfig(mode, topic);
  writeFileSync(file, JSON.stringify(raw));
  const job = new SinkJob(parseSinkConfig(raw, 'the bench sink'));
  await applyJobMigrations(ctx.session, config.keyspace, job.name, job.migrations);
  const proc = await startWorker(ctx, config, `${name} worker`, ['--job', file]);
  try {
    ctx.status(`${name}: starting the worker…`);
    await waitAssigned(ctx, proc);
    const result = await measureProcessDrain(ctx, {
      label: name,
      title: `the sink, ${mode} mode, 1 worker (bin/exactlyonce run --job)`,
      total: await drainTarget(ctx, topic),
      progress: async () => {
        const r = await ctx.session.execute(`SELECT next_offset FROM ${config.keyspace}.job_checkpoints WHERE job = ? AND topic = ?`, [job.name, topic], { prepare: true });
        return r.rows.reduce((n, row) => n + Number(fromLong(row['next_offset'])), 0);
      },
      processes: [{ role: 'worker 1', proc }],
    });
    if (mode !== 'aggregate' && mode !== 'aggregate-groups') return result;
    // Rows an aggregate sink wrote (its metric): they fall per 1,000 records as batches grow.
    const text = await (await fetch(`http://127.0.0.1:${proc.metricsPort}/metrics`)).text();
    const rows = [...text.matchAll(/^exactlyonce_sink_aggregate_writes_total\{table="(\w+)"\} (\S+)$/gm)].reduce((n, m) => n + Number(m[2]), 0);
    return { ...result, cassandraWritesPer1000Events: result.events > 0 ? Math.round((rows * 1000 * 100) / result.events) / 100 : null };
  } finally {
    await proc.stop();
    rmSync(file, { force: true });
    await ctx.dropKeyspace(config.keyspace);
  }
}
