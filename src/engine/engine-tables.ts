/**
 * Where the engine keeps a job's checkpoints, quarantined records and partition states.
 *
 * Jobs are first-class (migration 010): every job has its own rows, keyed by its name, in
 * `job_checkpoints`, `job_quarantine` and `job_partition_state`, so several jobs can share a keyspace
 * and even a topic without reading or moving each other's positions. Cassandra cannot add a column to
 * a primary key, so these are new tables beside the engine's first ones.
 *
 * The first tables (`checkpoints`, `quarantine`, `partition_state`, migration 002/007) stay the tables
 * of the job that has always used them, the events job: a job that says `legacyTables` keeps reading
 * and writing them, so an existing keyspace's positions are neither lost nor reset by an upgrade (no
 * copy is made, so a worker of the previous version running during the upgrade still shares the same
 * rows and their zombie-safe write timestamps). They hold one job's rows; no other job may use them.
 */
export interface EngineTables {
  /** Table of the checkpoints; its partition key is `keyColumns` + `topic`. */
  readonly checkpoints: string;
  readonly partitionState: string;
  readonly quarantine: string;
  /** The job key: `job = ? AND ` (and its bound value) for the job-keyed tables, nothing for the first ones. */
  readonly jobWhere: string;
  readonly jobParams: readonly string[];
  /** The job's column and value for inserts: `job, ` / `?, ` (empty for the first tables). */
  readonly jobColumn: string;
  readonly jobMarker: string;
}

/** The tables of job `name` in `keyspace` (`legacy`: the first, unkeyed tables, for the events job). */
export function engineTables(keyspace: string, name: string | undefined, legacy = name === undefined): EngineTables {
  if (legacy || name === undefined) {
    return {
      checkpoints: `${keyspace}.checkpoints`,
      partitionState: `${keyspace}.partition_state`,
      quarantine: `${keyspace}.quarantine`,
      jobWhere: '',
      jobParams: [],
      jobColumn: '',
      jobMarker: '',
    };
  }
  return {
    checkpoints: `${keyspace}.job_checkpoints`,
    partitionState: `${keyspace}.job_partition_state`,
    quarantine: `${keyspace}.job_quarantine`,
    jobWhere: 'job = ? AND ',
    jobParams: [name],
    jobColumn: 'job, ',
    jobMarker: '?, ',
  };
}
