/**
 * What a keyspace serves, stored in it (the `job` table, migration 006): the job's input topic and
 * that topic's identity (its Kafka topic ID), the topics it publishes to, and its settings — everything
 * that changes what a record becomes. The first worker (or set-up command) binds them with a
 * lightweight transaction; every later worker and `verify` reads them and refuses to run when its own
 * differ, naming each difference. Rows keyed by (partition, offset) from two topics, or computed with
 * two rules, would otherwise overwrite each other in silence.
 */
import type { Client } from '../cassandra/session.js';
import { ExactlyOnceError } from '../errors.js';

export type SettingValue = string | number | boolean;
export type Settings = Readonly<Record<string, SettingValue>>;

export interface JobIdentity {
  /** The job's name, the key of its row. */
  readonly name: string;
  readonly inputTopic: string;
  readonly outputTopics: readonly string[];
  readonly settings: Settings;
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
      'nothing is skipped. See README, "When the topic gains partitions", for the way forward.',
  );
}

/** One line per setting that differs, e.g. `--window-ms: the job has 5000, this worker 10000`. */
export function settingDifferences(stored: Settings, given: Settings, who = 'this worker'): string[] {
  const keys = [...new Set([...Object.keys(stored), ...Object.keys(given)])].sort();
  return keys
    .filter((k) => stored[k] !== given[k])
    .map((k) => `${k}: the job has ${stored[k] === undefined ? 'no value' : JSON.stringify(stored[k])}, ${who} ${given[k] === undefined ? 'none' : JSON.stringify(given[k])}`);
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
    const r = await this.session.execute(
      `INSERT INTO ${this.keyspace}.job (name, input_topic, input_topic_id, input_partitions, output_topics, settings, bound_at) VALUES (?, ?, ?, ?, ?, ?, toTimestamp(now())) IF NOT EXISTS`,
      [wanted.name, wanted.inputTopic, topicId, partitions, [...wanted.outputTopics], JSON.stringify(wanted.settings)],
      { prepare: true },
    );
    const applied = r.first()?.['[applied]'] === true;
    let bound = applied ? { ...wanted, inputTopicId: topicId, inputPartitions: partitions } : (await this.read(wanted.name))!;
    checkSame(bound, wanted, this.keyspace);
    if (bound.inputPartitions === null && bound.inputTopicId === topicId) {
      // Bound before the count was recorded: the count now is the best there is.
      await this.session.execute(`UPDATE ${this.keyspace}.job SET input_partitions = ? WHERE name = ?`, [partitions, wanted.name], { prepare: true });
      bound = { ...bound, inputPartitions: partitions };
    }
    return bound;
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
