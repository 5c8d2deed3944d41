/**
 * The engine's Prometheus instruments, in one prom-client registry per worker (Prometheus text
 * format). What sets the per-partition gauges lives in src/engine/lag-watcher.ts; what server_up and
 * /readyz report, in src/engine/server-health.ts.
 *
 * Counters (consumed, stored, quarantined, batches) are cumulative per process, as Prometheus expects;
 * they restart at 0 with the process.
 */
import { hostname } from 'node:os';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { DOWN_FOR_MS, ServerHealth } from './server-health.js';

/** How often the log end offsets are refreshed from the brokers, in ms (src/engine/lag-watcher.ts). */
export const LOG_END_REFRESH_MS = 5_000;
/** A partition with records behind whose checkpoint has not moved for this long is logged as stalled, in ms. */
export const STALL_AFTER_MS = 30_000;

export class EngineMetrics {
  readonly registry = new Registry();
  /** This process in the worker list: `<hostname>-<pid>`. */
  readonly workerId = `${hostname()}-${process.pid}`;
  readonly consumed: Counter<'partition'>;
  readonly stored: Counter<'partition'>;
  readonly quarantined: Counter<'partition' | 'reason'>;
  readonly batches: Counter<'partition'>;
  readonly batchSeconds: Histogram;
  readonly batchRecords: Histogram;
  /** Where a batch's wall time goes, stage by stage (see BATCH_STAGES). */
  readonly batchStages: Histogram<'stage'>;
  readonly owned: Gauge<'partition'>;
  readonly checkpoint: Gauge<'partition'>;
  readonly logEnd: Gauge<'partition'>;
  readonly lag: Gauge<'partition'>;
  readonly transactionHeld: Gauge<'partition'>;
  readonly skippedOffsets: Counter<'partition'>;
  readonly assigned: Gauge;
  readonly assignments: Counter;
  readonly revocations: Counter;
  readonly rebalances: Counter<'kind'>;
  readonly retries: Counter<'server'>;
  readonly identityChecks: Counter;
  readonly errors: Counter<'server' | 'error'>;
  readonly serverUp: Gauge<'server'>;
  readonly stoppedPartitions: Gauge<'partition'>;
  /** Partitions stopped, by error code. */
  readonly stops: Counter<'code'>;
  /** Rewinds after Cassandra lost acknowledged writes (src/engine/lost-writes.ts). */
  readonly lostWrites: Counter<'partition'>;
  readonly crashReplays: Counter<'partition'>;
  readonly rowsRewritten: Counter<'partition'>;
  readonly stalledPartitions: Gauge<'partition'>;
  readonly info: Gauge<'worker_id' | 'host' | 'pid'>;
  /** What server_up and /readyz report; each failure it is told of counts in errors_total. */
  readonly health = new ServerHealth((server, e) => this.errors.inc({ server, error: errorName(e) }));

  constructor(withDefaults = false) {
    const registers = [this.registry];
    const p = 'exactlyonce_';
    const partition = ['partition'] as const;
    this.consumed = new Counter({ name: `${p}records_consumed_total`, help: 'Records read from Kafka', labelNames: partition, registers });
    this.stored = new Counter({ name: `${p}records_stored_total`, help: 'Records whose output is stored', labelNames: partition, registers });
    this.quarantined = new Counter({ name: `${p}records_quarantined_total`, help: 'Records quarantined, by reason', labelNames: ['partition', 'reason'], registers });
    this.batches = new Counter({ name: `${p}batches_total`, help: 'Batches stored and checkpointed', labelNames: partition, registers });
    this.batchSeconds = new Histogram({
      name: `${p}batch_duration_seconds`,
      help: 'Time from a batch arriving to its checkpoint being durable, in seconds',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.batchStages = new Histogram({
      name: `${p}batch_stage_seconds`,
      help:
        'Where the wall time of a batch goes, by stage: queued (its middle record, from the Kafka timestamp to the batch handed over), ' +
        'idle (the partition, from its previous batch to this one), identity (the topic identity check the batch waited for), decode (schema lookup and decode), rows (the rows and quarantine written, to acknowledgement), ' +
        "checkpoint_wait (the previous batch's checkpoint still in flight), checkpoint (this batch's checkpoint, sent to acknowledged; overlaps the next batch)",
      labelNames: ['stage'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    this.batchRecords = new Histogram({
      name: `${p}batch_records`,
      help: 'Records per stored batch',
      buckets: [1, 10, 50, 100, 250, 500, 1000, 2000, 5000, 10000],
      registers,
    });
    this.owned = new Gauge({ name: `${p}partition_owned`, help: '1 for each partition this worker owns now', labelNames: partition, registers });
    this.checkpoint = new Gauge({ name: `${p}checkpoint_offset`, help: 'Next offset to read, as checkpointed (owned partitions)', labelNames: partition, registers });
    this.logEnd = new Gauge({
      name: `${p}log_end_offset`,
      help: `Log end offset from the brokers, refreshed every ${LOG_END_REFRESH_MS / 1000} s (owned partitions)`,
      labelNames: partition,
      registers,
    });
    this.lag = new Gauge({
      name: `${p}lag_records`,
      help: 'Last stable offset (the end of what a read_committed consumer can read) minus checkpoint (owned partitions)',
      labelNames: partition,
      registers,
    });
    this.transactionHeld = new Gauge({
      name: `${p}transaction_held_records`,
      help: 'Log end offset minus last stable offset: records not readable yet because a transaction is still open (owned partitions)',
      labelNames: partition,
      registers,
    });
    this.skippedOffsets = new Counter({
      name: `${p}unreadable_offsets_skipped_total`,
      help: 'Offsets an idle checkpoint stepped over at the end of what can be read: aborted records and transaction markers, never delivered to a read_committed consumer',
      labelNames: partition,
      registers,
    });
    this.assigned = new Gauge({ name: `${p}assigned_partitions`, help: 'Partitions this worker owns', registers });
    this.assignments = new Counter({ name: `${p}partitions_assigned_total`, help: 'Partitions received in rebalances', registers });
    this.revocations = new Counter({ name: `${p}partitions_revoked_total`, help: 'Partitions revoked or lost in rebalances', registers });
    this.rebalances = new Counter({
      name: `${p}rebalances_total`,
      help: 'Rebalance callbacks, by kind: assign, revoke, lost (session expired)',
      labelNames: ['kind'],
      registers,
    });
    this.retries = new Counter({ name: `${p}retries_total`, help: 'Failed attempts retried, by server', labelNames: ['server'], registers });
    this.identityChecks = new Counter({
      name: `${p}identity_checks_total`,
      help: "Checks of the input topic's ID (and bound partition count) started, each vouching for the batches fetched before it began",
      registers,
    });
    this.errors = new Counter({
      name: `${p}errors_total`,
      help: 'Errors from a server, by server and error (driver error name, our code, or "client" for the Kafka client\'s own error log)',
      labelNames: ['server', 'error'],
      registers,
    });
    const self = this;
    this.serverUp = new Gauge({
      name: `${p}server_up`,
      help: `0 from a failed call to the server until a successful one (or ${DOWN_FOR_MS / 1000} s without failures), else 1`,
      labelNames: ['server'],
      registers,
      collect() {
        for (const server of self.health.servers()) this.set({ server }, self.health.isDown(server) ? 0 : 1);
      },
    });
    this.lostWrites = new Counter({
      name: `${p}lost_writes_total`,
      help: 'Times a partition was read again because Cassandra lost writes it had acknowledged (its checkpoint went back)',
      labelNames: partition,
      registers,
    });
    this.crashReplays = new Counter({
      name: `${p}crash_replays_total`,
      help: 'Times a partition was read again because a Cassandra node went down within the lost-writes window after rows were acknowledged (a ring can lose rows while their checkpoint survives)',
      labelNames: partition,
      registers,
    });
    this.rowsRewritten = new Counter({
      name: `${p}rows_rewritten_total`,
      help: 'Batches whose rows were written again before their checkpoint: acknowledged before a Cassandra outage, they may have been lost with it',
      labelNames: partition,
      registers,
    });
    this.stops = new Counter({
      name: `${p}partition_stops_total`,
      help: 'Partitions stopped on an error retrying cannot fix, by error code (the worker logs each at error level)',
      labelNames: ['code'],
      registers,
    });
    this.stoppedPartitions = new Gauge({
      name: `${p}partition_stopped`,
      help: '1 when a partition is stopped on an error that needs the user (see partition_stops_total and the error log)',
      labelNames: partition,
      registers,
    });
    this.stalledPartitions = new Gauge({
      name: `${p}partition_stalled`,
      help: `1 when a partition has records behind and its checkpoint has not moved for ${STALL_AFTER_MS / 1000} s`,
      labelNames: partition,
      registers,
    });
    this.info = new Gauge({ name: `${p}worker_info`, help: 'Always 1; labels identify the worker', labelNames: ['worker_id', 'host', 'pid'], registers });
    this.info.set({ worker_id: this.workerId, host: hostname(), pid: String(process.pid) }, 1);
    if (withDefaults) collectDefaultMetrics({ register: this.registry, prefix: p });
  }
}

/** A short, bounded label for an error: our code, the driver's error name, or the constructor name. */
export function errorName(e: unknown): string {
  if (e !== null && typeof e === 'object') {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && /^EO_[A-Z_]+$/.test(code)) return code;
    const name = (e as { name?: unknown }).name;
    if (typeof name === 'string' && /^[A-Za-z]{1,40}$/.test(name)) return name;
  }
  return 'unknown';
}
