// In-memory stand-ins for the engine's ports (checkpoint store, Kafka admin, job, quarantine), for the
// unit tests of the AssignmentPlanner, the TaskManager and the PartitionTask. No servers.
import { pino } from 'pino';
import { AssignmentPlanner, type PlannerDeps } from '../../src/engine/assignment-planner.js';
import type { CheckpointStore, StoredCheckpoint } from '../../src/engine/checkpoint-store.js';
import type { DecodedRecord, Job, SourceRecord } from '../../src/engine/job.js';
import { LagWatcher } from '../../src/engine/lag-watcher.js';
import { EngineMetrics } from '../../src/engine/metrics.js';
import type { Binding, LogAdmin, TaskContext } from '../../src/engine/ports.js';
import type { Quarantine, QuarantineEntry } from '../../src/engine/quarantine.js';
import { isRetriable, retry } from '../../src/engine/retry.js';
import { TaskManager } from '../../src/engine/task-manager.js';
import type { ExactlyOnceError } from '../../src/errors.js';
import type { Watermarks } from '../../src/kafka/admin.js';

export const rec = (offset: bigint, value = 'ok', partition = 0): SourceRecord => ({
  topic: 't',
  partition,
  offset,
  key: null,
  value: Buffer.from(value),
  timestampMs: 0,
});

/** A promise resolved (or rejected) by the test, when it chooses. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void; reject: (e: unknown) => void } {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** Lets pending promise callbacks and timers of `ms` run. */
export const settle = (ms = 0) => new Promise((r) => setTimeout(r, ms));

export interface FakeWorld {
  /** Stored checkpoints by partition; readStored fails with `readError` when set. */
  stored: Map<number, StoredCheckpoint>;
  readError: unknown;
  marks: Watermarks[];
  marksError: unknown;
  topicId: string | null;
  /** What happened, in order: `rows p:offsets`, `checkpoint p:next`, `stop p:code`, ... */
  events: string[];
  /** The job's write for a partition; default: resolves at once. */
  write: (partition: number, records: readonly DecodedRecord<unknown>[], signal: AbortSignal) => Promise<void>;
  /** The `replay` each checkpoint write carried, as `p:next from F` (none: `p:next`). */
  replays: string[];
}

/** Partitions 0 and 1 with their checkpoints (epoch 0) and their logs [0, high]. */
export function twoPartitions(next: readonly [bigint, bigint], high: readonly [bigint, bigint] = [10n, 10n]): Pick<FakeWorld, 'stored' | 'marks'> {
  return {
    stored: new Map([0, 1].map((p) => [p, { next: next[p]!, epoch: 0 }])),
    marks: [0, 1].map((p) => ({ partition: p, low: 0n, high: high[p]!, stable: high[p]! })),
  };
}

/**
 * A TaskManager over fakes, wired as the Runner wires the real one. `bound` is the topic ID the job is
 * bound to; `signal` aborts retries as shutdown does.
 */
export function fakeEngine(world: Partial<FakeWorld> = {}, opts: { bound?: string; settingsChanged?: ExactlyOnceError; signal?: AbortSignal; resume?: PlannerDeps['resume']; stopping?: () => boolean; settingsNow?: PlannerDeps['settingsNow'] } = {}) {
  const w: FakeWorld = {
    stored: new Map(),
    readError: undefined,
    marks: [],
    marksError: undefined,
    topicId: opts.bound ?? 'topic-A',
    events: [],
    write: async () => undefined,
    replays: [],
    ...world,
  };
  const store = {
    readStored: async () => {
      if (w.readError !== undefined) throw w.readError;
      return new Map(w.stored);
    },
    write: async (p: number, next: bigint, epoch = 0, replay?: { from: bigint }) => {
      w.replays.push(`${p}:${next}${replay === undefined ? '' : ` from ${replay.from}`}`);
      w.events.push(`checkpoint ${p}:${next}@${epoch}`);
    },
    recordOwner: async () => undefined,
    clearOwner: async () => undefined,
    clearStop: async () => undefined,
    recordStop: async () => undefined,
  };
  const admin: LogAdmin = {
    watermarks: async () => {
      if (w.marksError !== undefined) throw w.marksError;
      return w.marks;
    },
    topicId: async () => w.topicId,
  };
  const job: Job<string> = {
    name: 'test',
    decode: (r) => (r.value?.toString() === 'bad' ? { ok: false, reason: 'invalid_json', detail: '' } : { ok: true, value: r.value!.toString() }),
    open: async () => undefined,
    write: async (p, records, signal) => {
      await w.write(p, records, signal);
      w.events.push(`rows ${p}:${records.map((r) => r.record.offset).join(',')}`);
    },
  };
  const metrics = new EngineMetrics();
  const log = pino({ level: 'silent' });
  const retrying = <T>(server: string, fn: () => Promise<T>) => retry(fn, { server, signal: opts.signal, initialDelayMs: 1, maxDelayMs: 5, isRetriable });
  const ctx: TaskContext = {
    job: job as Job<unknown>,
    checkpoints: store as unknown as CheckpointStore,
    quarantine: {
      write: async (e: readonly QuarantineEntry[]) => void w.events.push(`quarantine ${e.map((x) => x.record.offset).join(',')}`),
      reasonOf: async () => null,
    } as unknown as Quarantine,
    metrics,
    lag: new LagWatcher(metrics),
    log,
    // As the Runner does: retried until the server answers or the worker shuts down.
    withRetry: (fn) => retrying('Cassandra', fn),
    signal: opts.signal,
    logStart: async (p) => w.marks.find((m) => m.partition === p)?.low ?? 0n,
    onStop: (p, _epoch, error) => void w.events.push(`stop ${p}:${error.code}`),
  };
  const binding: Binding = { topicId: opts.bound ?? 'topic-A', settingsChanged: opts.settingsChanged };
  const planner = new AssignmentPlanner({ topic: 't', checkpoints: store, admin, binding: () => binding, retrying, resume: opts.resume, stopping: opts.stopping, settingsNow: opts.settingsNow });
  const tasks = new TaskManager(ctx, planner, store, metrics, log);
  return { world: w, tasks, planner, metrics, ctx, store, admin, binding, log };
}

/** The samples of one metric as `name{labels} value` lines, for exact comparison. */
export async function series(metrics: EngineMetrics, name: string): Promise<string[]> {
  const text = await metrics.registry.metrics();
  return text.split('\n').filter((l) => l.startsWith(`exactlyonce_${name}{`) || l.startsWith(`exactlyonce_${name} `));
}
