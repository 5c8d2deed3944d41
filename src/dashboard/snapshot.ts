/**
 * What the dashboard shows, as the collector (src/dashboard/collector.ts) builds it each round: the
 * snapshot of workers, partitions, totals and rates, and the points of its history. A file of its own
 * so that the page's server and status line read these shapes without the collector's machinery.
 */
import type { JobStatusJson } from '../operate/status.js';
import type { WorkerScrape } from './scrape.js';
import type { AlertRow, QuarantineCounts, VerifyRun } from './store.js';

export interface WorkerView extends Omit<WorkerScrape, 'at' | 'partitions'> {
  /** The worker id from its metrics, else its address. */
  id: string;
  /** How the dashboard knows it: the --worker-metrics list ('flag'), the workers table, or both. */
  via: Array<'flag' | 'registry'>;
  heartbeatAgeMs: number | null;
}

export interface PartitionView {
  partition: number;
  /** Workers whose /metrics say they own it (two during a hand-over is possible; none when unowned). */
  owners: string[];
  logStart: number | null;
  logEnd: number | null;
  checkpoint: number | null;
  /** To the last stable offset: the end of what a read_committed consumer can read. */
  lag: number | null;
  /** Log end − last stable offset: records a transaction still open holds back. */
  held: number | null;
  consumed: number;
  stored: number;
  quarantined: number;
  /** Quarantine rows in Cassandra (all time). */
  quarantineRows: number | null;
  stopped: boolean;
  stalled: boolean;
  /** Every offset below is proved by `verify` (its last recorded proof); null before the first. */
  proved: number | null;
  /** Checkpoint − proved: what the workers stored that the proof has not reached. */
  proofLag: number | null;
}

export interface Rates {
  consumed: number;
  stored: number;
  quarantined: number;
  /** Records per second passed by the checkpoints (Cassandra): what is durably done. */
  checkpointed: number;
}

export interface HistoryPoint extends Rates {
  /** Epoch seconds. */
  t: number;
  lag: number | null;
  lagByPartition: Record<string, number>;
}

export interface Snapshot {
  at: number;
  keyspace: string;
  topic: string;
  group: string;
  intervalMs: number;
  problems: string[];
  totals: {
    consumed: number;
    stored: number;
    quarantined: number;
    lag: number | null;
    workers: number;
    workersUp: number;
    workersReady: number;
    partitions: number;
    alertsRaised: number | null;
    alertsRevised: number | null;
    lateEvents: number | null;
    /** Summed over the partitions with a proof; null before the first recorded verify run. */
    proofLag: number | null;
  };
  rates: Rates;
  workers: WorkerView[];
  partitions: PartitionView[];
  quarantine: QuarantineCounts | null;
  alerts: { latest: AlertRow[]; rows: number; sources: number } | null;
  verify: { state: 'none' | 'ok' | 'failed' | 'unknown'; run: VerifyRun | null };
  /**
   * Every job of the keyspace as `exactlyonce status --json` shows it (src/operate/status.ts; its
   * quarantine counts bounded, quarantineCapped then true); null before the first read.
   */
  jobs: JobStatusJson[] | null;
}
