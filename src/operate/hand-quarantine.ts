/**
 * `exactlyonce quarantine add`: the way past one record the store refuses for good (its partition stopped
 * with EO_PERMANENT_ERROR naming the record, e.g. a value too long for an index a user put on the table).
 * The record, read from Kafka, is quarantined with reason `refused` (HAND_QUARANTINE_REASON); a partition
 * stopped at or before it is reset in place — its own checkpoint, the next epoch — which the workers pick
 * up within seconds: the new task writes the records again from there, and when the store refuses this one
 * again it passes over it (src/engine/task-quarantine.ts). `verify` counts it as quarantined by hand.
 * Idempotent: run again, it writes the same row and resets nothing that is not stopped.
 */
import type { Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore, stopIsCurrent, type StoredCheckpoint } from '../engine/checkpoint-store.js';
import type { SourceRecord } from '../engine/job.js';
import { HAND_QUARANTINE_REASON, Quarantine } from '../engine/quarantine.js';
import { ExactlyOnceError } from '../errors.js';
import { LogReader, readOne } from '../kafka/log-reader.js';
import { readTopic } from './checkpoints.js';
import type { JobTarget } from './job-target.js';

export interface HandQuarantine {
  record: SourceRecord;
  /** The partition's checkpoint as it was found. */
  checkpoint: StoredCheckpoint | null;
  /** The in-place reset written (the partition was stopped), or null. */
  restarted: StoredCheckpoint | null;
}

export async function quarantineByHand(config: ConnectionConfig, session: Client, target: JobTarget, partition: number, offset: bigint, detail: string): Promise<HandQuarantine> {
  const { marks } = await readTopic(config, target.topic);
  const w = marks.find((m) => m.partition === partition);
  if (w === undefined) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--partition: topic ${target.topic} has partitions 0..${marks.length - 1} (got ${partition})`);
  if (offset < w.low || offset >= w.high) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--offset: partition ${partition} of ${target.topic} holds offsets ${w.low}..${w.high - 1n} (got ${offset})`);
  const store = new CheckpointStore(session, config.keyspace, target.topic, target.tablesKey);
  const quarantine = new Quarantine(session, config.keyspace, undefined, target.tablesKey);
  const [checkpoint, states, reason] = await Promise.all([store.readOne(partition), store.readStates(), quarantine.reasonOf(partition, offset)]);
  if (checkpoint !== null && checkpoint.next > offset) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--offset: partition ${partition}'s checkpoint is ${checkpoint.next}, past offset ${offset}: that record is already stored or quarantined (\`exactlyonce quarantine list\` shows which)`);
  }
  if (reason !== null && reason !== HAND_QUARANTINE_REASON) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--offset: offset ${offset} of partition ${partition} is quarantined already (${reason}): the job's decoder refused it, not the store`);
  }
  const reader = await LogReader.open(config, 'exactlyonce-quarantine');
  const record = await readOne(reader, target.topic, partition, offset).finally(() => reader.close());
  if (record === undefined) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--offset: partition ${partition} of ${target.topic} has no record a consumer reads at offset ${offset} (a transaction marker or an aborted record?)`);
  }
  await quarantine.write([{ record, reason: HAND_QUARANTINE_REASON, detail: `quarantined by hand${detail === '' ? '' : `: ${detail}`}` }]);
  const stop = states.get(partition)?.stopped ?? null;
  const stopped = stop !== null && stopIsCurrent(stop, checkpoint ?? undefined);
  const restarted = stopped ? await store.reset(partition, checkpoint?.next ?? w.low, checkpoint?.epoch ?? 0) : null;
  return { record, checkpoint, restarted };
}
