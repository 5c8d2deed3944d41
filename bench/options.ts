/**
 * What one `exactlyonce bench` run measures and how big it is. Every size is a flag (src/cli/bench.ts);
 * the defaults are the ones issue 6 asks for (500,000 events over 6 partitions, a worker starting
 * 1,000,000 events behind), sized so that the whole run stays under ~15 minutes on 2 cores.
 */
import { defaultRunnerOptions } from '../src/engine/runner.js';
import { ROWS_PER_BATCH } from '../src/cassandra/batches.js';

/** The groups of cases `--cases` can select; each group yields one or more result cases. */
export const CASE_GROUPS = ['ceiling', 'client', 'baseline', 'eo1', 'eoN', 'alerts', 'sink', 'latency', 'memory'] as const;
export type CaseGroup = (typeof CASE_GROUPS)[number];

export interface BenchOptions {
  /** Events pre-produced once and read by the ceiling, baseline and exactly-once cases. */
  events: number;
  partitions: number;
  /**
   * Relative weights of health 0, 1, 2 in the events of every case but `alerts`. By default none is
   * Critical, so that EventJob writes exactly the `events` rows the baseline and the ceiling write;
   * the alerts' own cost is the `alerts` case.
   */
  healthMix: [number, number, number];
  /** Events of the `alerts` case: the original generator's mix (all Critical, one source). */
  alertsEvents: number;
  /** Events per second of event time in pre-produced topics (what a 5 s alert window holds). */
  eventTimeRate: number;
  /**
   * Runs of the baseline and the 1-worker exactly-once case, alternated; the best of each is kept
   * (on a shared machine interference only ever slows a run down).
   */
  repeat: number;
  /** Worker processes of the multi-worker exactly-once case. */
  workers: number;
  /** Passed to `exactlyonce run` and used by the baseline: records per batch. */
  maxBatch: number;
  /** Passed to `exactlyonce run` and used by the baseline: partitions processed at once. */
  concurrency: number;
  /** Passed to `exactlyonce run` and used by the baseline: prefetch bound, MiB. */
  maxBufferMb: number;
  /** In-flight batches the ceiling tries; the fastest is used for the measured run. */
  ceilingConcurrency: number[];
  /** Rows written per level of the ceiling's concurrency sweep. */
  ceilingSweepEvents: number;
  /** Rows per unlogged batch in the ceiling (default EventJob's ROWS_PER_BATCH, so that the two stay comparable). */
  ceilingBatchRows: number;
  /** Rates of the latency cases, in percent of the measured 1-worker exactly-once throughput. */
  latencyPercents: number[];
  /** Measured seconds per latency rate (after the warm-up). */
  latencySeconds: number;
  /** Seconds produced at the rate before measuring starts (not counted). */
  latencyWarmupSeconds: number;
  /** How often the latency watcher reads new rows back, ms (the resolution of the figures). */
  latencyPollMs: number;
  /** Events/s that 100 % stands for, when the 1-worker case is not run (or to override it). */
  latencyMaxRate: number | undefined;
  /**
   * Distinct record keys of the pre-produced events (the upsert sink's rows); rounded up to a multiple
   * of the partitions, so that each key's records share a partition as an upsert sink requires.
   */
  upsertKeys: number;
  /** Events the memory case's worker starts behind. */
  behindEvents: number;
  /** Case groups to run (all by default). */
  cases: ReadonlySet<CaseGroup>;
  /** Folder of the JSON and SVG results. */
  outDir: string;
  /** Seed of the generated events (ids, sources): the same seed gives the same rows. */
  seed: number;
  /** Give up on a case that has not finished after this many seconds. */
  caseTimeoutSeconds: number;
  /** Keep the bench topics and keyspaces (for inspection) instead of deleting them. */
  keep: boolean;
  /** NODE_OPTIONS for the workers and the baseline consumer (to measure V8 flags, e.g. --max-semi-space-size=64). */
  workerNodeOptions: string | undefined;
  /** Write a V8 CPU profile of every exactly-once worker into this folder (node --cpu-prof). */
  profileDir: string | undefined;
  /** The events layout of the exactly-once workers (`run --layout`: original or bucketed[:N]). */
  layout: string;
}

export const defaultBenchOptions: BenchOptions = {
  events: 500_000,
  partitions: 6,
  healthMix: [90, 10, 0],
  alertsEvents: 200_000,
  eventTimeRate: 10_000,
  workers: 3,
  repeat: 3,
  maxBatch: defaultRunnerOptions.maxBatchSize,
  concurrency: defaultRunnerOptions.concurrency,
  maxBufferMb: defaultRunnerOptions.maxBufferKb / 1024,
  ceilingConcurrency: [16, 64, 128, 256, 512],
  ceilingSweepEvents: 60_000,
  ceilingBatchRows: ROWS_PER_BATCH,
  latencyPercents: [25, 50, 75],
  latencySeconds: 30,
  latencyWarmupSeconds: 5,
  latencyPollMs: 20,
  latencyMaxRate: undefined,
  behindEvents: 1_000_000,
  upsertKeys: 400_000,
  cases: new Set(CASE_GROUPS),
  outDir: 'bench/results',
  seed: 20240601,
  caseTimeoutSeconds: 900,
  keep: false,
  workerNodeOptions: undefined,
  profileDir: undefined,
  layout: 'original',
};
