/**
 * The walk of a topic's partitions that both auditors make (src/verify/auditor.ts for the events job,
 * src/verify/job-auditor.ts for every job with an `audit`); what each judges on the way is theirs.
 *
 * 1. Checkpoints first, then the watermarks: every row below a checkpoint is durable before the audit
 *    looks at it, so a live pipeline can be audited.
 * 2. Where each partition starts (src/verify/proof-plan.ts): where the last recorded proof ended, or
 *    the log start (`full`, no proof, or one made under another topic ID, reset epoch or settings).
 * 3. Each partition's range: [from, end), `end` the checkpoint clamped into the log; a checkpoint
 *    outside the log is a violation and keeps the partition's proof where it was.
 * 4. `lanes` partitions at a time, each lane with a Kafka reader of its own (src/verify/lanes.ts).
 * 5. Each partition's proof for the next run: up to its first violation.
 */
import { types, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import type { StoredCheckpoint } from '../engine/checkpoint-store.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin, type Watermarks } from '../kafka/admin.js';
import type { LogReader } from '../kafka/log-reader.js';
import { inLanes, withReaders } from './lanes.js';
import { planProof, type PartitionStart } from './proof-plan.js';
import { ProofStore } from './proof-store.js';
import { buildReport, partitionReport, type AuditReport, type LedgerCounts, type PartitionReport, type ViolationLog } from './report.js';

/**
 * Continue from the recorded proofs and record this run's (`verify`). Without it an audit checks
 * everything from the log start and neither reads nor writes proofs (the tests' own check).
 */
export interface ProofOptions {
  /** Check every partition from the log start again (`verify --full`). */
  readonly full: boolean;
  /** Record this run's proof for the next run. */
  readonly record: boolean;
  /** The fingerprint of the job's settings (default: the auditor's own). */
  readonly config?: string;
}

/** What both auditors know of one partition; each adds its ledger. */
export interface WalkedPartition {
  readonly partition: number;
  readonly low: bigint;
  readonly high: bigint;
  /** The last stable offset: the end of what a read_committed consumer can read (lag is counted to it). */
  readonly stable: bigint;
  readonly checkpoint: StoredCheckpoint | null;
  /** The audit judges [from, end): `end` is the checkpoint, clamped into the log. */
  readonly end: bigint;
  readonly start: PartitionStart;
  /** Where judging starts: the log start, or the end of the proof this run continues. */
  readonly from: bigint;
  /** A checkpoint outside the log: its proof does not advance. */
  readonly blocked: boolean;
  /** Records below this offset were read. */
  scanned: bigint;
  /** Rows below the log start this run counts. */
  belowLogStart: number;
}

/** What the walk asks of its auditor. */
export interface WalkOptions {
  /** The error's message when the topic does not exist. */
  readonly noTopic: string;
  /** The job's stored checkpoints. */
  readonly readCheckpoints: () => Promise<Map<number, StoredCheckpoint>>;
  /** The job whose proofs are read and written. */
  readonly job: string;
  readonly proofs: ProofOptions | undefined;
  /** The fingerprint of the job's settings when `proofs.config` does not give it. */
  readonly defaultConfig: () => string;
  /** The violation's message for a checkpoint outside the log. */
  readonly checkpointOutside: (w: Watermarks, checkpoint: bigint) => string;
}

/** Records judged so far, of the total this run checks. */
export class Progress {
  done = 0;

  constructor(
    readonly total: number,
    private readonly report: ((done: number, total: number) => void) | undefined,
  ) {}

  /** Reports that nothing is judged yet, with the total. */
  begin(): void {
    this.report?.(0, this.total);
  }

  add(records: number): void {
    this.done += records;
    this.report?.(this.done, this.total);
  }
}

export class PartitionWalk {
  readonly started = Date.now();
  readonly runId = types.TimeUuid.now().toString();
  /** Where each partition starts, in the order of the watermarks. */
  plan: readonly PartitionStart[] = [];
  /** The proof store, when this run reads and writes proofs. */
  store: ProofStore | null = null;
  /** The checkpoints, by partition, as read before the watermarks. */
  checkpoints = new Map<number, StoredCheckpoint>();
  private marks: readonly Watermarks[] = [];
  private topicId: string | null = null;
  private proofConfig = '';

  private constructor(
    private readonly config: ConnectionConfig,
    private readonly session: Client,
    private readonly violations: ViolationLog,
    private readonly o: WalkOptions,
    /** The Admin API client, open while `use` runs. */
    readonly admin = new KafkaAdmin(config),
  ) {}

  /**
   * Judges rows found at or beyond their partition's checkpoint whose offset is at or beyond the log end
   * `seen` before they were read: a record produced while the audit ran may have been stored since. So
   * the log end is read again, after those rows were: a row is of a record produced before it was
   * written, so one still at or beyond that log end belongs to no record (`extra`), and the others are
   * in flight (`inFlight`). Reads the watermarks only when there is such a row.
   */
  async judgeBeyondLogEnd<T extends { partition: number; offset: bigint }>(suspects: readonly T[], inFlight: (row: T) => void, extra: (row: T, logEnd: bigint) => void): Promise<void> {
    if (suspects.length === 0) return;
    const now = new Map((await this.admin.watermarks(this.config.topic)).map((w) => [w.partition, w.high]));
    for (const row of suspects) {
      const end = now.get(row.partition);
      if (end !== undefined && row.offset < end) inFlight(row);
      else extra(row, end ?? 0n);
    }
  }

  /** Opens the walk (`open`), runs `use` with it, and closes its Admin API client whatever happens. */
  static async run<R>(config: ConnectionConfig, session: Client, violations: ViolationLog, o: WalkOptions, use: (walk: PartitionWalk) => Promise<R>): Promise<R> {
    const walk = new PartitionWalk(config, session, violations, o);
    try {
      await walk.open();
      return await use(walk);
    } finally {
      await walk.admin.close();
    }
  }

  /** Reads the checkpoints, the watermarks and the proofs, and plans where each partition starts. */
  private async open(): Promise<void> {
    const { o, admin, session } = this;
    const { topic, keyspace } = this.config;
    if ((await admin.partitionCount(topic)) === null) throw new ExactlyOnceError('EO_TOPIC_MISMATCH', o.noTopic);
    // Checkpoints before watermarks: every row below a checkpoint is durable before the audit reads it.
    this.checkpoints = await o.readCheckpoints();
    this.marks = await admin.watermarks(topic);
    this.store = o.proofs !== undefined && (await ProofStore.available(session, keyspace)) ? new ProofStore(session, keyspace, o.job, topic) : null;
    this.topicId = await admin.topicId(topic);
    this.proofConfig = o.proofs?.config ?? o.defaultConfig();
    this.plan = planProof(
      this.marks.map((w) => w.partition),
      this.store === null ? new Map() : await this.store.readProofs(),
      { topicId: this.topicId, config: this.proofConfig, epochs: new Map([...this.checkpoints].map(([p, c]) => [p, c.epoch])) },
      new Map(this.marks.map((w) => [w.partition, w.high])),
      o.proofs?.full ?? true,
    );
  }

  /** True when every partition starts from its log start. */
  get full(): boolean {
    return this.plan.every((s) => s.from === null);
  }

  /** Every partition of the topic, its range judged; a checkpoint outside the log is reported here. */
  partitions(): WalkedPartition[] {
    return this.marks.map((w, i) => {
      const checkpoint = this.checkpoints.get(w.partition) ?? null;
      const start = this.plan[i]!;
      const cp = checkpoint?.next ?? null;
      const blocked = cp !== null && (cp < w.low || cp > w.high);
      if (blocked) this.violations.add({ kind: 'checkpoint', partition: w.partition, offset: String(cp), message: this.o.checkpointOutside(w, cp) });
      const end = cp === null || cp < w.low ? w.low : cp > w.high ? w.high : cp;
      const from = max(w.low, start.proved);
      return { partition: w.partition, low: w.low, high: w.high, stable: w.stable, checkpoint, end, start, from, blocked, scanned: from, belowLogStart: 0 };
    });
  }

  /**
   * Runs `each` on every partition, a lane per Kafka reader, then `after` with the readers still
   * open. `hasWork`: whether a partition has records to read (no more readers open than those).
   */
  async inLanes<S extends WalkedPartition, R>(
    states: readonly S[],
    lanes: number | undefined,
    hasWork: (s: S) => boolean,
    each: (reader: LogReader, s: S) => Promise<void>,
    after: (readers: readonly LogReader[]) => Promise<R>,
  ): Promise<R> {
    return withReaders(this.config, lanes ?? 4, states.filter(hasWork).length, async (readers) => {
      await inLanes(readers, states, each);
      return after(readers);
    });
  }

  /** Where a partition's proof ends after this run: its first violation stops it. */
  provedTo(s: WalkedPartition): bigint {
    if (s.blocked) return s.start.proved;
    return this.violations.provedTo(s.partition, max(s.scanned, s.start.proved));
  }

  /** Records each partition's proof, when this run records them; `counted`: how far its alert counts go. */
  async recordProofs(states: readonly WalkedPartition[], counted: (s: WalkedPartition, proved: bigint) => bigint): Promise<boolean> {
    const { store, topicId } = this;
    const recorded = store !== null && this.o.proofs?.record === true && topicId !== null;
    if (recorded) {
      await Promise.all(
        states.map((s) => {
          const proved = this.provedTo(s);
          return store.writeProof(s.start, { topicId, epoch: s.checkpoint?.epoch ?? 0, config: this.proofConfig, proved, counted: counted(s, proved), runId: this.runId });
        }),
      );
    }
    return recorded;
  }

  /** One partition's line of the report. */
  partitionReport(s: WalkedPartition, o: { ledger: LedgerCounts; aheadOfCheckpoint: number; also?: Parameters<typeof partitionReport>[1]['also'] }): PartitionReport {
    return partitionReport({ ...s, checkpoint: s.checkpoint?.next ?? null }, { checkedFrom: s.from, startedOver: s.start.why, provedTo: this.provedTo(s), belowLogStart: s.belowLogStart, ...o });
  }

  /** The report: this run's header, whether its proof was recorded, and what the auditor found. */
  report(proofRecorded: boolean, o: Omit<Parameters<typeof buildReport>[0], 'started' | 'runId' | 'plan' | 'proofRecorded' | 'topic' | 'keyspace' | 'violations'>): AuditReport {
    return buildReport({ started: this.started, runId: this.runId, plan: this.plan, proofRecorded, topic: this.config.topic, keyspace: this.config.keyspace, violations: this.violations, ...o });
  }
}

export const min = (a: bigint, b: bigint) => (a < b ? a : b);
export const max = (a: bigint, b: bigint) => (a > b ? a : b);
