/**
 * How the Runner wires the roles that own the partitions once the job is bound: the CheckpointStore
 * and Quarantine of the job's tables, the context every PartitionTask shares, the AssignmentPlanner,
 * the IdentityGate each batch waits for, LostWrites' view of the tasks, and the TaskManager. The
 * roles reach the consumer through `consumer()`, which is undefined until the Runner joins the group.
 */
import type { Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import type { KafkaAdmin } from '../kafka/admin.js';
import type { Logger } from '../log.js';
import { AssignmentPlanner } from './assignment-planner.js';
import { CheckpointStore } from './checkpoint-store.js';
import { JobBinding, settingDifferences, settingsChangedUnder } from './job-binding.js';
import { IdentityGate } from './identity-gate.js';
import type { Job } from './job.js';
import type { LagWatcher } from './lag-watcher.js';
import type { LostWrites, RingState } from './lost-writes.js';
import type { EngineMetrics } from './metrics.js';
import type { Binding, PartitionControl, TaskContext } from './ports.js';
import { Quarantine } from './quarantine.js';
import { TaskManager } from './task-manager.js';

export interface TaskWiring {
  config: ConnectionConfig;
  job: Job<unknown>;
  session: Client;
  admin: KafkaAdmin;
  /** Raw bytes kept per quarantined record (RunnerOptions.maxQuarantineBytes). */
  maxQuarantineBytes: number;
  /** Aborted when the worker stops. */
  signal: AbortSignal;
  metrics: EngineMetrics;
  lag: LagWatcher;
  log: Logger;
  /** Checkpoint writes still in flight (the Runner awaits them before closing the session). */
  checkpointsInFlight: Set<Promise<void>>;
  lostWrites: LostWrites;
  /** What the job is bound to (the Runner's; the ResetWatcher moves it). */
  binding: Binding;
  /** Runs a call against `server` with retries until it answers or the worker stops (Runner.retrying). */
  retrying: <T>(server: string, fn: () => Promise<T>) => Promise<T>;
  /** The consumer once the group is joined. */
  consumer: () => PartitionControl | undefined;
  /** The Cassandra nodes' state now (LostWrites.resume). */
  ring: () => Promise<RingState>;
  /** A partition is read again from `from`: the job forgets what it remembers past it. */
  onRewind: (partition: number, from: bigint) => void;
}

export interface WiredTasks {
  checkpoints: CheckpointStore;
  planner: AssignmentPlanner;
  identity: IdentityGate;
  /** Pauses and restarts the consumer's partitions (a no-op until the group is joined). */
  consumer: PartitionControl;
  tasks: TaskManager;
}

export function wireTasks(w: TaskWiring): WiredTasks {
  const { config, admin, metrics, log } = w;
  // The job's own engine rows (src/engine/engine-tables.ts); the events job keeps the first tables.
  const tablesKey = w.job.legacyTables === true ? undefined : w.job.name;
  const checkpoints = new CheckpointStore(w.session, config.keyspace, config.topic, tablesKey);
  const ctx: TaskContext = {
    job: w.job,
    checkpoints,
    quarantine: new Quarantine(w.session, config.keyspace, w.maxQuarantineBytes, tablesKey),
    signal: w.signal,
    metrics,
    lag: w.lag,
    log,
    withRetry: (fn, server = 'Cassandra') => w.retrying(server, fn),
    checkpointsInFlight: w.checkpointsInFlight,
    lostWrites: w.lostWrites,
    logStart: async (p) => (await admin.logStarts(config.topic)).get(p) ?? 0n,
    // Why a partition stopped, for `exactlyonce checkpoints list` (informational: a failure is ignored).
    onStop: (p, epoch, error) =>
      void checkpoints.recordStop(p, { code: error.code, message: error.message, epoch, by: metrics.workerId }).catch(() => undefined),
  };
  const planner = new AssignmentPlanner({
    topic: config.topic,
    checkpoints,
    admin,
    binding: () => w.binding,
    retrying: (server, fn) => w.retrying(server, fn),
    stopping: () => w.signal.aborted,
    resume: (stored, assigned, logStarts) => w.lostWrites.resume(stored, assigned, logStarts),
    settingsNow: async (assigned) => {
      await checkpoints.recordOwner(assigned, metrics.workerId);
      const bound = await new JobBinding(w.session, config.keyspace).read(w.job.name);
      const diffs = bound === null ? [] : settingDifferences(bound.settings, w.job.settings ?? {});
      return diffs.length === 0 ? null : settingsChangedUnder(config.keyspace, diffs);
    },
  });
  const identity = new IdentityGate({
    topic: config.topic,
    admin,
    binding: w.binding,
    onRecreated: (error) => w.consumer()?.pause(tasks.stopAll(error)),
    retrying: (fn) => w.retrying('Kafka', fn),
    onCheck: () => metrics.identityChecks.inc(),
  });
  const consumer: PartitionControl = {
    pause: (ps) => w.consumer()?.pause(ps),
    restartAt: (p, offset) => w.consumer()?.restartAt(p, offset),
  };
  const tasks = new TaskManager(ctx, planner, checkpoints, metrics, log, identity);
  w.lostWrites.wire({
    checkpoints,
    ring: w.ring,
    planner,
    tasks: () => tasks,
    consumer,
    logStart: ctx.logStart,
    onRewind: w.onRewind,
    retrying: (server, fn) => w.retrying(server, fn),
    stopping: () => w.signal.aborted,
    metrics,
    log,
  });
  return { checkpoints, planner, identity, consumer, tasks };
}
