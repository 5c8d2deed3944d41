/** The engine's metrics, in one prom-client registry per Runner (Prometheus text format). */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

export class EngineMetrics {
  readonly registry = new Registry();
  readonly consumed: Counter<'partition'>;
  readonly stored: Counter<'partition'>;
  readonly quarantined: Counter<'partition' | 'reason'>;
  readonly batches: Counter<'partition'>;
  readonly batchSeconds: Histogram;
  readonly checkpoint: Gauge<'partition'>;
  readonly lag: Gauge<'partition'>;
  readonly assigned: Gauge;
  readonly assignments: Counter;
  readonly revocations: Counter;
  readonly retries: Counter<'server'>;
  readonly stoppedPartitions: Gauge<'partition'>;

  constructor(withDefaults = false) {
    const registers = [this.registry];
    const p = 'exactlyonce_';
    this.consumed = new Counter({ name: `${p}records_consumed_total`, help: 'Records read from Kafka', labelNames: ['partition'], registers });
    this.stored = new Counter({ name: `${p}records_stored_total`, help: 'Records whose output is stored', labelNames: ['partition'], registers });
    this.quarantined = new Counter({ name: `${p}records_quarantined_total`, help: 'Records quarantined', labelNames: ['partition', 'reason'], registers });
    this.batches = new Counter({ name: `${p}batches_total`, help: 'Batches stored and checkpointed', labelNames: ['partition'], registers });
    this.batchSeconds = new Histogram({
      name: `${p}batch_duration_seconds`,
      help: 'Time from a batch arriving to its checkpoint being durable',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.checkpoint = new Gauge({ name: `${p}checkpoint_offset`, help: 'Next offset to read, as checkpointed', labelNames: ['partition'], registers });
    this.lag = new Gauge({ name: `${p}lag_records`, help: 'Log end offset minus checkpoint, at the last batch', labelNames: ['partition'], registers });
    this.assigned = new Gauge({ name: `${p}assigned_partitions`, help: 'Partitions this worker owns', registers });
    this.assignments = new Counter({ name: `${p}partitions_assigned_total`, help: 'Partitions received in rebalances', registers });
    this.revocations = new Counter({ name: `${p}partitions_revoked_total`, help: 'Partitions revoked or lost in rebalances', registers });
    this.retries = new Counter({ name: `${p}retries_total`, help: 'Failed attempts retried, by server', labelNames: ['server'], registers });
    this.stoppedPartitions = new Gauge({
      name: `${p}partition_stopped`,
      help: '1 when a partition is stopped on an error that needs the user (checkpoint out of range)',
      labelNames: ['partition'],
      registers,
    });
    if (withDefaults) collectDefaultMetrics({ register: this.registry, prefix: p });
  }
}
