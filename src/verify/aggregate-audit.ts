/**
 * An aggregating job's tables against its log (`verify --job`, Job.audit.aggregate, the mechanism of
 * src/engine/aggregation.ts). The proof is a chain from the log to the rows users query:
 *
 * 1. Every stored partial (group and window, partition, through offset, state) equals the fold of
 *    that partition's records of that group and window up to its through offset: it includes no record
 *    twice, none it should not, and none beyond its offset.
 * 2. Every record below its partition's checkpoint is included: the partial of each of its groups and
 *    windows reaches at least its offset (missing otherwise); a partial of a group and partition that
 *    no record names is extra.
 * 3. Every result row equals the merge of its group and window's stored partials, written at their
 *    merge timestamp (Σ through + 1): the last merge read every final partial, and no other writer
 *    touched the row. A group and window with partials has its row; a row without partials is extra.
 *
 * 4. With closeAfter, the closed topic: a window one of its partitions has closed (that partition's
 *    watermark, the latest time of its records below its checkpoint, reached the window's close time)
 *    has a message; once every partition that contributed has closed it, its latest message equals
 *    the row. A message of a window no partition's watermark reached (over every record read) is extra.
 *
 * The topic is read to its end (a batch in flight may have written partials beyond its checkpoint),
 * and always from the log start: a partial is a fold of the log's prefix. The partials are read before
 * the log, and each record is folded into its partial's expected state as it is read. Memory: per
 * group, window and partition, a state and a few offsets (the partials read, the folds, the close
 * times), whatever the number of records; with closeAfter, also the latest closed message per window.
 */
import { fromLong, type Client } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { readTopic } from '../kafka/log-reader.js';
import { mergePartials, mergeTimestamp } from '../engine/aggregation.js';
import type { AggregateAudit as Described } from '../engine/job-audit.js';
import { pagedRows } from './reads.js';
import type { Unattributed, ViolationKind, ViolationLog } from './report.js';

interface Stored {
  partition: number;
  through: bigint;
  state: unknown;
}

/** What the log says of one (group, window) on one partition, folded as its records are read. */
interface Contribution {
  /** Its records below the partition's checkpoint: how many, and the first. */
  due: number;
  firstDue: bigint | null;
  /** With a partial read before the scan: the fold of its records up to the partial's through offset. */
  want: unknown;
  /** The first record below the checkpoint beyond the partial's through offset (not included in it). */
  lost: bigint | null;
}

export class AggregateAudit {
  /** Per group and window (its key text), per partition, what its records give. */
  private readonly contributions = new Map<string, Map<number, Contribution>>();
  /** The partials as read before the scan (prepare), per group and window, per partition. */
  private readonly before = new Map<string, Map<number, Stored>>();
  /** closeAfter: per partition, the latest time of its records below its checkpoint, and of all records read. */
  private readonly below = new Map<number, number>();
  private readonly read = new Map<number, number>();
  /** closeAfter: each (group, window)'s close time. */
  private readonly closeAt = new Map<string, number>();

  constructor(
    private readonly o: {
      readonly connection: ConnectionConfig;
      readonly session: Client;
      readonly keyspace: string;
      readonly table: string;
      readonly described: Described;
      readonly violations: ViolationLog;
      readonly unattributed: Unattributed;
      /** Each partition's checkpoint (records below it must be included) and log end as the audit started (what it reads up to). */
      readonly ends: ReadonlyMap<number, bigint>;
      readonly highs: ReadonlyMap<number, bigint>;
      /** Each partition's log end now (read only when a partial is beyond the one the audit started with). */
      readonly logEnds: () => Promise<ReadonlyMap<number, bigint>>;
      /** Counts a result row (or partial) not judged: beyond its partition's checkpoint (a batch in flight). */
      readonly aheadOfCheckpoint: (partition: number) => void;
      /** Counts a violation on a partition's line of the report. */
      readonly count: (partition: number, kind: 'missing' | 'extra' | 'mismatched') => void;
    },
  ) {}

  /**
   * Reads the partials before the log is scanned, so that each record is folded into the partial it
   * belongs to as it is read: memory holds a state per (group, window) and partition, not the records.
   * Read after the checkpoints: a partial that records below a checkpoint are due in was written
   * before it, and stays as read (a later write of it would be a batch beyond the checkpoint).
   */
  async prepare(): Promise<void> {
    const d = this.o.described;
    for await (const p of pagedRows(this.o.session, `SELECT ${d.partialColumns.join(', ')} FROM ${this.o.keyspace}.${d.partialsTable}`, [], (row) => d.partial(row))) {
      let byPartition = this.before.get(p.slot);
      if (byPartition === undefined) this.before.set(p.slot, (byPartition = new Map()));
      byPartition.set(p.partition, p);
    }
  }

  /** A record folded into these groups and windows (each partition's records in offset order). */
  add(partition: number, offset: bigint, slots: readonly string[], value: unknown): void {
    const end = this.o.ends.get(partition) ?? 0n;
    const isDue = offset < end;
    const closed = this.o.described.closed;
    if (closed !== undefined) {
      const { time, closeAt } = closed.times(value);
      slots.forEach((slot, i) => this.closeAt.set(slot, closeAt[i]!));
      if (time > (this.read.get(partition) ?? -Infinity)) this.read.set(partition, time);
      if (isDue && time > (this.below.get(partition) ?? -Infinity)) this.below.set(partition, time);
    }
    const fold = this.o.described.fold;
    for (const slot of slots) {
      let byPartition = this.contributions.get(slot);
      if (byPartition === undefined) this.contributions.set(slot, (byPartition = new Map()));
      const partial = this.before.get(slot)?.get(partition);
      let c = byPartition.get(partition);
      if (c === undefined) byPartition.set(partition, (c = { due: 0, firstDue: null, want: partial === undefined ? undefined : fold.empty(), lost: null }));
      if (isDue) {
        c.due++;
        c.firstDue ??= offset;
      }
      if (partial === undefined) continue;
      if (offset <= partial.through) c.want = fold.add(c.want, value, { partition, offset });
      else if (isDue) c.lost ??= offset;
    }
  }

  private v(kind: ViolationKind, message: string, partition?: number, offset?: bigint): void {
    this.o.violations.add({ kind, message, ...(partition === undefined ? {} : { partition }), ...(offset === undefined ? {} : { offset: String(offset) }) });
    const counted = kind === 'mismatch' ? 'mismatched' : (kind as 'missing' | 'extra');
    if (partition === undefined) this.o.unattributed[counted]++;
    else this.o.count(partition, counted);
  }

  /** Judges the partials and the result rows, once every record was added. */
  async judge(): Promise<void> {
    const d = this.o.described;
    const { ends, highs } = this.o;
    const fold = d.fold;
    const ks = this.o.keyspace;
    // A partial through an offset at or beyond the log end the audit read to: written by a batch of
    // records produced since (not judged), unless it is still beyond the log end now (no such record).
    const beyond = [...this.before.values()].flatMap((m) => [...m.values()]).filter((p) => p.through >= (highs.get(p.partition) ?? 0n));
    const now = beyond.length === 0 ? new Map<number, bigint>() : await this.o.logEnds();
    const unjudged = (slot: string, p: Stored): boolean => {
      if (p.through < (highs.get(p.partition) ?? 0n)) return false;
      const logEnd = now.get(p.partition) ?? 0n;
      if (p.through >= logEnd) this.v('mismatch', `partition ${p.partition}: the partial of ${slot} in ${d.partialsTable} is through offset ${p.through}, beyond the log end ${logEnd}: no record there`, p.partition, p.through);
      else this.o.aheadOfCheckpoint(p.partition);
      return true;
    };
    // 1 and 2: each partial (as read before the scan) against the log, and the log's records against the partials.
    for (const [slot, byPartition] of this.contributions) {
      for (const [partition, c] of byPartition) {
        const end = ends.get(partition) ?? 0n;
        const partial = this.before.get(slot)?.get(partition);
        if (partial === undefined) {
          if (c.due > 0) this.v('missing', `partition ${partition}: no partial of ${slot} in ${d.partialsTable}, though ${c.due} record(s) of it are below the checkpoint ${end} (the first at offset ${c.firstDue})`, partition, c.firstDue!);
          continue;
        }
        if (c.lost !== null) this.v('missing', `partition ${partition}: the partial of ${slot} includes records up to offset ${partial.through}, below the checkpoint ${end}: the record at offset ${c.lost} is not included`, partition, c.lost);
        if (unjudged(slot, partial)) continue;
        if (d.stateText(c.want) !== d.stateText(partial.state)) {
          this.v('mismatch', `partition ${partition}: the partial of ${slot} through offset ${partial.through} holds ${d.stateText(partial.state)}, its records give ${d.stateText(c.want)}`, partition, partial.through);
        }
      }
    }
    for (const [slot, partials] of this.before) {
      for (const p of partials.values()) {
        if (this.contributions.get(slot)?.has(p.partition) === true || unjudged(slot, p)) continue;
        this.v('extra', `partition ${p.partition}: a partial of ${slot} in ${d.partialsTable} (through offset ${p.through}), though no record of the partition falls in it`, p.partition, p.through);
      }
    }
    // The partials again, now: the rows were merged from partials that batches in flight may have moved on since.
    const stored = new Map<string, Stored[]>();
    for await (const p of pagedRows(this.o.session, `SELECT ${d.partialColumns.join(', ')} FROM ${ks}.${d.partialsTable}`, [], (row) => d.partial(row))) {
      let list = stored.get(p.slot);
      if (list === undefined) stored.set(p.slot, (list = []));
      list.push(p);
    }
    // 3: each result row against the merge of its partials.
    const seen = new Set<string>();
    const timed = d.timedColumn;
    const rows = new Map<string, { values: Readonly<Record<string, string>>; settled: boolean }>();
    for await (const row of pagedRows(this.o.session, `SELECT ${d.resultColumns.join(', ')}, WRITETIME(${timed}) AS merged_at FROM ${ks}.${this.o.table}`, [], (r) => r)) {
      const { slot, values } = d.result(row);
      seen.add(slot);
      const partials = stored.get(slot);
      if (partials === undefined) {
        this.v('extra', `a row of ${slot} in ${this.o.table}, though no partial of it exists`);
        continue;
      }
      // A batch in flight may have written a partial beyond its checkpoint and not merged it yet.
      const ahead = partials.find((p) => p.through >= (ends.get(p.partition) ?? 0n));
      const settled = ahead === undefined;
      if (d.closed !== undefined) rows.set(slot, { values, settled });
      if (!settled) {
        this.o.aheadOfCheckpoint(ahead.partition);
        continue;
      }
      const want = d.resultValues(mergePartials(fold, partials.map((p) => p.state)));
      const diff = Object.keys(want).filter((k) => want[k] !== values[k]);
      if (diff.length > 0) this.v('mismatch', `the row of ${slot} in ${this.o.table}: ${diff.map((k) => `${k} is ${values[k]}, its partials give ${want[k]}`).join('; ')}`);
      const at = row['merged_at'] === null ? null : fromLong(row['merged_at']);
      const mergedAt = mergeTimestamp(partials.map((p) => p.through));
      if (at !== mergedAt && !(at === null && row[timed] === null)) this.v('mismatch', `the row of ${slot} in ${this.o.table} was written at ${at}, not at its partials' merge timestamp ${mergedAt}: written by a merge that read other partials, or by another writer`);
    }
    for (const [slot, partials] of stored) {
      if (seen.has(slot) || partials.some((p) => p.through >= (ends.get(p.partition) ?? 0n))) continue;
      this.v('missing', `no row of ${slot} in ${this.o.table}, though it has partials`);
    }
    if (d.closed !== undefined) await this.judgeClosed(d.closed, rows);
  }

  /** 4: the closed topic's latest message per window against the windows closed and their rows. */
  private async judgeClosed(closed: NonNullable<Described['closed']>, rows: ReadonlyMap<string, { values: Readonly<Record<string, string>>; settled: boolean }>): Promise<void> {
    const latest = new Map<string, { partition: number; offset: bigint; value: Buffer | null }>();
    const admin = new KafkaAdmin(this.o.connection);
    const exists = await admin.partitionCount(closed.topic).finally(() => admin.close()) !== null;
    if (exists) {
      await readTopic(this.o.connection, closed.topic, (records) => {
        for (const r of records) {
          const key = r.key === null ? '' : r.key.toString('utf8');
          const had = latest.get(key);
          if (had === undefined || had.partition !== r.partition || had.offset < r.offset) latest.set(key, { partition: r.partition, offset: r.offset, value: r.value });
        }
      });
    }
    const where = (m: { partition: number; offset: bigint }) => `${closed.topic} partition ${m.partition} offset ${m.offset}`;
    // Each partition's watermark below its checkpoint (this.below), and over every record read (this.read).
    const { below, read } = this;
    for (const [slot, byPartition] of this.contributions) {
      const at = this.closeAt.get(slot)!;
      const due = [...byPartition].filter(([, c]) => c.due > 0);
      const closedBy = due.filter(([p]) => (below.get(p) ?? -Infinity) >= at).map(([p]) => p);
      const m = latest.get(slot);
      if (m === undefined) {
        if (closedBy.length > 0) this.v('missing', `no message of ${slot} on ${closed.topic}, though partition ${closedBy.join(', ')} closed it (its watermark reached ${new Date(at).toISOString()})`);
        continue;
      }
      const values = closed.message(m.value);
      if (typeof values === 'string') {
        this.v('mismatch', `the latest message of ${slot} (${where(m)}) is ${values}`);
        continue;
      }
      // Every partition that contributed closed it, and nothing beyond a checkpoint is still to come: the message is the row.
      const settled = closedBy.length === due.length && due.length === byPartition.size && rows.get(slot)?.settled === true;
      if (!settled) continue;
      const row = rows.get(slot)!.values;
      const diff = Object.keys(row).filter((k) => row[k] !== values[k]);
      if (diff.length > 0) this.v('mismatch', `the latest message of ${slot} (${where(m)}): ${diff.map((k) => `${k} is ${values[k]}, the row holds ${row[k]}`).join('; ')}`);
    }
    for (const [key, m] of latest) {
      const at = this.closeAt.get(key);
      const reached = at !== undefined && [...(this.contributions.get(key)?.keys() ?? [])].some((p) => (read.get(p) ?? -Infinity) >= at);
      if (!reached) this.v('extra', `a message of ${JSON.stringify(key)} on ${closed.topic} (${where(m)}), though no partition that contributed to such a window has closed it`);
    }
  }
}
