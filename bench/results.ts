/** The shape of `bench/results/*.json`: what each case measured, plus the run's versions and machine. */
import type { PauseShare } from './gc-pauses.js';
import type { StageBreakdown, WorkerLoop } from './stages.js';

/** One process of a case: its peak RSS (VmHWM) and the CPU it used while the case was measured. */
export interface ProcessFacts {
  role: string;
  pid: number;
  peakRssMiB: number | null;
  /** User + system CPU seconds while the case was measured (from its first progress to its end). */
  cpuSeconds: number | null;
}

export interface CaseResult {
  /** What the case is, in one line (shown in the table). */
  title: string;
  /** Throughput; for a latency case the rate actually produced, for the memory case its drain rate. */
  eventsPerSec: number;
  events: number;
  seconds: number;
  processes: ProcessFacts[];
  /** CPU milliseconds per 1,000 events, summed over the case's processes (ceiling: its writer). */
  cpuMsPer1000Events?: number | null;
  /** An aggregate sink: the Cassandra rows it wrote (partials and merged results) per 1,000 records. */
  cassandraWritesPer1000Events?: number | null;
  /** CPU milliseconds per 1,000 events the local Kafka and Cassandra servers used during the case. */
  serverCpuMsPer1000Events?: { kafka: number | null; cassandra: number | null };
  /** Latency cases: CPU ms per 1,000 events of the bench process itself (producing and watching). */
  benchCpuMsPer1000Events?: number;
  /** Latency cases: produce time → row readable, in ms. */
  latency?: {
    targetRate: number;
    percentOfMax: number;
    p50Ms: number;
    p95Ms: number;
    p99Ms: number;
    maxMs: number;
    samples: number;
    pollMs: number;
    sampleEvery: number;
    /** p99 of the bench process's own event-loop delay while measured (its producer and row watcher share that loop): how late a read-back can start. */
    benchLoopDelayP99Ms?: number;
    /** The local Cassandra's GC pauses during the window (its GC log), and the samples they account for (bench/gc-pauses.ts). */
    cassandraGcPauses?: PauseShare;
    /** What held the worker's own event loop up while measured: its delay and its garbage collections (bench/stages.ts). */
    workerLoop?: WorkerLoop;
  };
  /** Exactly-once cases: where the workers' batches spent their wall time while measured (bench/stages.ts). */
  stages?: StageBreakdown;
  /** Exactly-once cases: topic identity checks the workers started while measured (exactlyonce_identity_checks_total). */
  identityChecks?: number;
  /** The ceiling's concurrency sweep. */
  sweep?: Array<{ concurrency: number; eventsPerSec: number }>;
  /** The ceiling: the concurrency used for the measured run. */
  concurrency?: number;
  /** With --repeat: events/s of every run, in order (the case reports the best). */
  runs?: number[];
  /** The machine's 1-minute load average when the case started and ended (other load shows here). */
  loadAverage?: [number, number];
}

export interface BenchResults {
  /** The random part of every topic, keyspace and group name of the run (eo_bench_<runId>_…). */
  runId: string;
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  command: string;
  /** The local Cassandra's commit log sync (`bench --commitlog`); absent when not set by the bench. */
  commitlog?: string;
  options: Record<string, unknown>;
  versions: Record<string, string>;
  machine: Record<string, unknown>;
  cases: Record<string, CaseResult>;
  ratios: {
    /** 1-worker exactly-once events/s over the baseline's. */
    exactlyOnceToBaseline: number | null;
    /** 1-worker exactly-once events/s over the ceiling's. */
    exactlyOnceToCeiling: number | null;
    /** N-worker exactly-once events/s over the baseline's. */
    exactlyOnceNToBaseline: number | null;
    /** 1-worker exactly-once events/s with all events Critical (alerts) over without. */
    alertsToExactlyOnce: number | null;
    /** The sink's events/s (log mode, upsert mode) over the 1-worker exactly-once case's, and its worker CPU per 1,000 events over that case's. */
    sinkLogToExactlyOnce?: number | null;
    sinkUpsertToExactlyOnce?: number | null;
    sinkLogCpuToExactlyOnce?: number | null;
    sinkUpsertCpuToExactlyOnce?: number | null;
    sinkAggregateToLog?: number | null;
    /** The sink with key and metadata columns, a filter and a TTL, against log mode. */
    sinkWideToLog?: number | null;
    /** The 1-worker case's CPU per 1,000 events over the Kafka client's alone through its KafkaJS layer (the worker's path until 2acee8e). */
    workerCpuToClient?: number | null;
    /** The same over the client's lower-level consume (the worker's path since 2acee8e: src/kafka/consumer.ts). */
    workerCpuToClientConsume?: number | null;
  };
}

export const MiB = 1024;

/** Facts of a process still running; `cpuAtStart` is its CPU time when the measured window began. */
export function processFacts(
  role: string,
  p: { pid: number; peakRssKiB(): number | undefined; cpuSeconds(): number | undefined },
  cpuAtStart: number | undefined,
): ProcessFacts {
  const rss = p.peakRssKiB();
  const cpu = p.cpuSeconds();
  return {
    role,
    pid: p.pid,
    peakRssMiB: rss === undefined ? null : Math.round((rss / MiB) * 10) / 10,
    cpuSeconds: cpu === undefined || cpuAtStart === undefined ? null : Math.round((cpu - cpuAtStart) * 100) / 100,
  };
}

export function cpuPer1000(processes: ProcessFacts[], events: number): number | null {
  if (processes.some((p) => p.cpuSeconds === null) || events === 0) return null;
  const total = processes.reduce((n, p) => n + p.cpuSeconds!, 0);
  return Math.round(((total * 1000) / events) * 1000 * 10) / 10;
}

/** CPU seconds used so far by each local server (Kafka, Cassandra), when their pids are known. */
export type ServerCpu = Record<string, number | undefined>;

export function serverCpuPer1000(start: ServerCpu, end: ServerCpu, events: number): { kafka: number | null; cassandra: number | null } {
  const one = (name: string) => {
    const a = start[name];
    const b = end[name];
    return a === undefined || b === undefined || events === 0 ? null : Math.round((((b - a) * 1000) / events) * 1000 * 10) / 10;
  };
  return { kafka: one('kafka'), cassandra: one('cassandra') };
}
