/**
 * What a keyspace serves, stored in it (the `job` table, migration 006): the job's input topic and
 * that topic's identity (its Kafka topic ID), the topics it publishes to, and its settings — everything
 * that changes what a record becomes. The first worker (or set-up command) binds them with a
 * lightweight transaction; every later worker and `verify` reads them and refuses to run when its own
 * differ, naming each difference. Rows keyed by (partition, offset) from two topics, or computed with
 * two rules, would otherwise overwrite each other in silence.
 *
 * Which job writes each table the jobs declare (Job.tables) is stored beside it (the `table_owner`
 * table, migration 050): a second job on a table refuses to run (EO_TABLE_OWNED) for the same reason,
 * across jobs — an upsert keeps the highest offset, and offsets of two topics do not order a key's records.
 */
import type { Client } from '../cassandra/session.js';
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';

export type SettingValue = string | number | boolean;
export type Settings = Readonly<Record<string, SettingValue>>;

export interface JobIdentity {
  /** The job's name, the key of its row. */
  readonly name: string;
  readonly inputTopic: string;
  readonly outputTopics: readonly string[];
  readonly settings: Settings;
  /** The tables the job writes (Job.tables): each is bound to this job alone. */
  readonly tables?: readonly string[];
}

export interface BoundJob extends JobIdentity {
  /** The Kafka topic ID the input topic had when the job was bound. */
  readonly inputTopicId: string;
  /** The input topic's partition count when the job was bound (null: bound before it was recorded). */
  readonly inputPartitions: number | null;
}

/**
 * The coded error for a topic that gained partitions under a job whose keys must stay on their
 * partition (Job.keysStayOnPartition): names both counts and the way forward.
 */
export function partitionsAdded(topic: string, bound: number, now: number): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_PARTITIONS_ADDED',
    `topic ${topic} has ${now} partitions, the job was bound to ${bound}: producers now place keys by ${now}, so a key's newer records may sit on another partition ` +
      "at lower offsets, and an upsert ordered by offset would keep the older row. Every partition is stopped before a record that may have moved is written; " +
      'nothing is skipped. See docs/guarantees.md, "When the topic gains partitions", for the way forward.',
  );
}

/** One line per setting that differs, e.g. `--window-ms: the job has 5000, this worker 10000`. */
export function settingDifferences(stored: Settings, given: Settings, who = 'this worker'): string[] {
  const keys = [...new Set([...Object.keys(stored), ...Object.keys(given)])].sort();
  return keys
    .filter((k) => stored[k] !== given[k])
    .map((k) => `${k}: the job has ${stored[k] === undefined ? 'no value' : JSON.stringify(stored[k])}, ${who} ${given[k] === undefined ? 'none' : JSON.stringify(given[k])}`);
}

/** The coded error that stops a worker's partitions when the job's stored settings changed under it (`diffs`: settingDifferences). */
export function settingsChangedUnder(keyspace: string, diffs: readonly string[]): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_JOB_CONFIG_MISMATCH',
    `the job's settings stored in keyspace ${keyspace} changed under this worker: ${diffs.join('; ')}. ` +
      'Its partitions are stopped at their checkpoints; restart the worker (without the flags, it runs with the stored settings)',
  );
}

/** The coded error for a topic whose identity changed: names both IDs and the command that resets. */
export function topicRecreated(topic: string, bound: string, now: string): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_TOPIC_RECREATED',
    `topic ${topic} was deleted and re-created: the job's checkpoints belong to topic ID ${bound}, the topic now has ID ${now}. ` +
      'Its partitions are stopped so that no record is skipped or stored over an older one. To start the job over on the new topic, ' +
      'run `exactlyonce checkpoints reset --all --to earliest --rebind`.',
  );
}

function fromRow(row: Record<string, unknown>): BoundJob {
  return {
    name: row['name'] as string,
    inputTopic: row['input_topic'] as string,
    inputTopicId: row['input_topic_id'] as string,
    outputTopics: (row['output_topics'] as string[] | null) ?? [],
    settings: JSON.parse((row['settings'] as string | null) ?? '{}') as Settings,
    inputPartitions: (row['input_partitions'] as number | null | undefined) ?? null,
  };
}

export class JobBinding {
  constructor(
    private readonly session: Client,
    private readonly keyspace: string,
  ) {}

  async read(name: string): Promise<BoundJob | null> {
    const r = await this.session.execute(
      `SELECT name, input_topic, input_topic_id, input_partitions, output_topics, settings FROM ${this.keyspace}.job WHERE name = ?`,
      [name],
      { prepare: true },
    );
    const row = r.first();
    return row === null ? null : fromRow(row);
  }

  /**
   * Binds the job on its first run; afterwards checks that `wanted` is what the keyspace serves.
   * Throws EO_TOPIC_MISMATCH (another input or output topic) or EO_JOB_CONFIG_MISMATCH (other settings).
   * A changed topic ID is not checked here: it stops partitions, not the worker (see the Runner).
   */
  async bind(wanted: JobIdentity, topicId: string, partitions: number): Promise<BoundJob> {
    const tables = [...new Set(wanted.tables ?? [])].sort();
    // Checked before the job's row is written: a job refused here leaves nothing stored, so giving it
    // another table (which changes its settings) is not then refused as a changed configuration.
    for (const table of tables) await this.refuseOtherOwner(table, wanted, await this.owner(table));
    const r = await this.session.execute(
      `INSERT INTO ${this.keyspace}.job (name, input_topic, input_topic_id, input_partitions, output_topics, settings, bound_at) VALUES (?, ?, ?, ?, ?, ?, toTimestamp(now())) IF NOT EXISTS`,
      [wanted.name, wanted.inputTopic, topicId, partitions, [...wanted.outputTopics], JSON.stringify(wanted.settings)],
      { prepare: true },
    );
    const applied = r.first()?.['[applied]'] === true;
    let bound = applied ? { ...wanted, inputTopicId: topicId, inputPartitions: partitions } : (await this.read(wanted.name))!;
    checkSame(bound, wanted, this.keyspace);
    try {
      for (const table of tables) await this.claim(table, wanted);
    } catch (e) {
      // Another job claimed the table between the check above and here: undo the row just written.
      if (applied && isExactlyOnceError(e, 'EO_TABLE_OWNED')) await this.session.execute(`DELETE FROM ${this.keyspace}.job WHERE name = ? IF EXISTS`, [wanted.name], { prepare: true });
      throw e;
    }
    if (bound.inputPartitions === null && bound.inputTopicId === topicId) {
      // Bound before the count was recorded: the count now is the best there is.
      await this.session.execute(`UPDATE ${this.keyspace}.job SET input_partitions = ? WHERE name = ?`, [partitions, wanted.name], { prepare: true });
      bound = { ...bound, inputPartitions: partitions };
    }
    return bound;
  }

  /** The job that writes `table`, or null when none has claimed it. */
  async owner(table: string): Promise<string | null> {
    let r;
    try {
      r = await this.session.execute(`SELECT job FROM ${this.keyspace}.table_owner WHERE table_name = ?`, [table], { prepare: true });
    } catch (e) {
      // The keyspace predates migration 050: the record of owners is missing, not the table.
      if (/unconfigured table|table_owner/i.test((e as Error).message)) {
        throw new ExactlyOnceError('EO_CASSANDRA_QUERY', `keyspace ${this.keyspace} has no table_owner table, where the job that writes each table is recorded; run \`exactlyonce schema apply\``, { cause: e });
      }
      throw e;
    }
    return (r.first()?.['job'] as string | null | undefined) ?? null;
  }

  /**
   * Claims `table` for the job; safe to repeat (the owner's own claim is a no-op). A lightweight
   * transaction, so that two jobs starting together agree on one owner.
   */
  private async claim(table: string, wanted: JobIdentity): Promise<void> {
    const r = await this.session.execute(
      `INSERT INTO ${this.keyspace}.table_owner (table_name, job, bound_at) VALUES (?, ?, toTimestamp(now())) IF NOT EXISTS`,
      [table, wanted.name],
      { prepare: true },
    );
    const row = r.first();
    if (row?.['[applied]'] !== true) await this.refuseOtherOwner(table, wanted, (row?.['job'] as string | undefined) ?? (await this.owner(table)));
  }

  private async refuseOtherOwner(table: string, wanted: JobIdentity, owner: string | null): Promise<void> {
    if (owner === null || owner === wanted.name) return;
    const topic = (await this.read(owner))?.inputTopic;
    throw tableOwned(this.keyspace, table, owner, topic, wanted);
  }

  /** Binds the job to the input topic's current ID and partition count (after `checkpoints reset --rebind`). */
  async rebind(name: string, topicId: string, partitions: number): Promise<void> {
    await this.session.execute(`UPDATE ${this.keyspace}.job SET input_topic_id = ?, input_partitions = ? WHERE name = ?`, [topicId, partitions, name], { prepare: true });
  }

  /** Replaces the stored settings (an explicit command, e.g. `alerts rule`, never a worker). */
  async updateSettings(name: string, settings: Settings): Promise<void> {
    await this.session.execute(`UPDATE ${this.keyspace}.job SET settings = ? WHERE name = ?`, [JSON.stringify(settings), name], { prepare: true });
  }
}

/** The coded error for a job that declares a table another job writes: names both, and the ways out. */
export function tableOwned(keyspace: string, table: string, owner: string, ownerTopic: string | undefined, wanted: Pick<JobIdentity, 'name' | 'inputTopic'>): ExactlyOnceError {
  return new ExactlyOnceError(
    'EO_TABLE_OWNED',
    `table ${keyspace}.${table} is written by job ${owner}${ownerTopic === undefined ? '' : ` (topic ${ownerTopic})`}; job ${wanted.name} (topic ${wanted.inputTopic}) cannot write it too: ` +
      "the two jobs' rows would overwrite each other, and offsets of two topics do not order a key's records. " +
      `Give job ${wanted.name} its own table (\`table:\` in a sink's config) or its own --keyspace; to hand the table over, stop job ${owner}'s workers and run ` +
      `\`exactlyonce cql "DELETE FROM ${keyspace}.table_owner WHERE table_name = '${table}'"\``,
  );
}

/** Throws when `given` is not the job the keyspace serves. */
export function checkSame(bound: JobIdentity, given: JobIdentity, keyspace: string, who = 'this worker'): void {
  if (bound.inputTopic !== given.inputTopic) {
    throw new ExactlyOnceError(
      'EO_TOPIC_MISMATCH',
      `keyspace ${keyspace} serves topic ${bound.inputTopic}, not ${given.inputTopic}: one keyspace holds one topic's records (their rows are keyed by partition and offset). Use --topic ${bound.inputTopic}, or another --keyspace for ${given.inputTopic}`,
    );
  }
  const out = (t: readonly string[]) => [...t].sort().join(',');
  if (out(bound.outputTopics) !== out(given.outputTopics)) {
    throw new ExactlyOnceError(
      'EO_TOPIC_MISMATCH',
      `keyspace ${keyspace} publishes to ${out(bound.outputTopics) || 'no topic'}, not ${out(given.outputTopics) || 'no topic'}: use the same output topic flags as the job (e.g. --alerts-topic ${bound.outputTopics[0] ?? ''})`,
    );
  }
  const diffs = settingDifferences(bound.settings, given.settings, who);
  if (diffs.length > 0) {
    throw new ExactlyOnceError(
      'EO_JOB_CONFIG_MISMATCH',
      `${who} differs from the job stored in keyspace ${keyspace}: ${diffs.join('; ')}. Start it with the job's values (or leave the flags out: the stored ones are used); to change the job, use the command made for it`,
    );
  }
}
