/**
 * Where an audit starts, per partition: from what the last recorded run proved (incremental), or from
 * the log start (full). Pure: the proofs, the topic's identity, the checkpoints' reset epochs and the
 * job's settings are read by the caller (src/verify/proof-store.ts).
 *
 * A stored proof says "every offset below `proved` held, and the auditor's alert counts include every
 * event below `counted`" — about one topic (its ID), one reset epoch of the partition's checkpoint and
 * one job configuration. It is trusted only while all three are what they were: a re-created topic
 * restarts at offset 0 (`checkpoints reset --rebind` may clear the old rows), a reset epoch means the
 * checkpoint was moved on purpose, and other settings (another rule, another decode limit) make other
 * rows and counts. An untrusted or missing proof, or `--full`, starts the partition over from the log
 * start in a new lineage: the auditor's own alert counts are keyed by the lineage, so those of an older
 * one are never mixed in.
 */
import { createHash } from 'node:crypto';
import { EPOCH_SHIFT } from '../engine/checkpoint-store.js';

/** A proof as recorded for one partition. */
export interface StoredProof {
  readonly partition: number;
  readonly topicId: string | null;
  readonly epoch: number;
  /** The fingerprint of the job's settings (configFingerprint). */
  readonly config: string;
  readonly lineage: string;
  readonly lineageSeq: number;
  /** Every offset below was judged and held. */
  readonly proved: bigint;
  /** The auditor's alert counts include every counted event below. */
  readonly counted: bigint;
  readonly runId: string | null;
  readonly provedAt: Date | null;
}

/** What the proofs of this run must match. */
export interface ProofIdentity {
  /** The topic's ID now (null: the broker did not say; then no proof is trusted). */
  readonly topicId: string | null;
  readonly config: string;
  /** Each partition's checkpoint reset epoch (0 when never reset or never checkpointed). */
  readonly epochs: ReadonlyMap<number, number>;
}

/** Where one partition's audit starts. */
export interface PartitionStart {
  readonly partition: number;
  /** The proof it continues, or null when it starts over. */
  readonly from: StoredProof | null;
  /** Why it starts over (null when it continues a proof). */
  readonly why: string | null;
  /** The lineage this run's proof and alert counts are written in. */
  readonly lineage: string;
  readonly lineageSeq: number;
  /** Offsets below are proved already (0 when starting over). */
  readonly proved: bigint;
  /** Counted events below are in the stored alert counts (0 when starting over). */
  readonly counted: bigint;
}

/** The fingerprint of a job's settings: the same settings, in any key order, give the same one. */
export function configFingerprint(settings: Readonly<Record<string, unknown>>): string {
  const sorted = Object.fromEntries(Object.entries(settings).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  return createHash('sha256').update(JSON.stringify(sorted)).digest('hex').slice(0, 16);
}

/**
 * A lineage's name, a pure function of what it is about and its sequence number, so that two runs
 * starting the same partition over at the same time write the same rows (never competing ones).
 */
export function lineageName(topicId: string | null, epoch: number, config: string, seq: number): string {
  return createHash('sha256').update(`${topicId ?? '-'}|${epoch}|${config}|${seq}`).digest('hex').slice(0, 16);
}

/** The largest lineage sequence number whose proof timestamps fit Cassandra's signed 64-bit write time. */
export const MAX_LINEAGE_SEQ = 2 ** (63 - Number(EPOCH_SHIFT)) - 1;

/**
 * The write timestamp of a proof row: `lineageSeq·2^44 + counted`. Within a lineage the run that counted
 * further wins; a new lineage (a higher sequence number) wins over every write of an older one.
 */
export function proofTimestamp(lineageSeq: number, counted: bigint): bigint {
  return (BigInt(lineageSeq) << EPOCH_SHIFT) + counted;
}

/** Why a stored proof cannot be trusted now, or null when it can. */
export function distrust(p: StoredProof, id: ProofIdentity, logEnd: bigint | undefined): string | null {
  if (id.topicId === null) return 'the topic ID is unknown (the broker did not say)';
  if (p.topicId !== id.topicId) return `the topic was re-created (its ID was ${p.topicId ?? 'unknown'}, it is ${id.topicId} now)`;
  const epoch = id.epochs.get(p.partition) ?? 0;
  if (p.epoch !== epoch) return `the checkpoint was reset (epoch ${p.epoch} when proved, ${epoch} now)`;
  if (p.config !== id.config) return "the job's settings changed since the proof";
  if (logEnd !== undefined && (p.proved > logEnd || p.counted > logEnd)) return `the proof (${p.counted}) is beyond the log end ${logEnd}`;
  return null;
}

/**
 * Where each partition starts. `full`: every partition starts over (`verify --full`), `stored`: the
 * recorded proofs (empty when none), `logEnds`: the log end of each partition.
 */
export function planProof(partitions: readonly number[], stored: ReadonlyMap<number, StoredProof>, id: ProofIdentity, logEnds: ReadonlyMap<number, bigint>, full: boolean): PartitionStart[] {
  return partitions.map((partition): PartitionStart => {
    const p = stored.get(partition);
    const why = p === undefined ? 'no proof recorded yet' : full ? '--full' : distrust(p, id, logEnds.get(partition));
    if (p !== undefined && why === null) {
      return { partition, from: p, why: null, lineage: p.lineage, lineageSeq: p.lineageSeq, proved: p.proved, counted: p.counted };
    }
    const seq = Math.min((p?.lineageSeq ?? 0) + 1, MAX_LINEAGE_SEQ);
    const epoch = id.epochs.get(partition) ?? 0;
    return { partition, from: null, why, lineage: lineageName(id.topicId, epoch, id.config, seq), lineageSeq: seq, proved: 0n, counted: 0n };
  });
}

/** The most recent proof a run continues (what `continues` names), or undefined. */
export function latestProof(plan: readonly PartitionStart[]): StoredProof | undefined {
  let best: StoredProof | undefined;
  for (const s of plan) if (s.from !== null && (best === undefined || (s.from.provedAt?.getTime() ?? 0) > (best.provedAt?.getTime() ?? 0))) best = s.from;
  return best;
}
