/**
 * A sink's `mode: aggregate` (src/jobs/sink/aggregate-config.ts) on the engine's exactly-once
 * aggregation (src/engine/aggregation.ts): its two tables, its writes and what `verify --job` reads.
 * `<table>_partials` holds, per group, window and Kafka partition, the fold of that partition's records
 * up to `through_offset` (written USING TIMESTAMP through_offset); `<table>` holds, per group and
 * window, their merge (written USING TIMESTAMP Σ(through_offset + 1)): what users query. The values'
 * arithmetic is src/jobs/sink/aggregate-values.ts.
 */
import type { types } from 'cassandra-driver';
import { fromLong, toLong, type Client, type Row } from '../../cassandra/session.js';
import { applyBatch, mergePartials, mergeTimestamp, PartialCache, type Fold, type Partial } from '../../engine/aggregation.js';
import type { AggregateAudit } from '../../engine/job-audit.js';
import type { DecodedRecord, PublishRecord } from '../../engine/job.js';
import { IncompleteRows } from '../../engine/incomplete-rows.js';
import { closeAt, closedMessageValues, closingTableCql, WindowCloser, type WindowSlot } from './aggregate-close.js';
import { windowStarts, type AggregateColumn, type AggregateSpec } from './aggregate-config.js';
import { aggregateFold, bind, numOf, resultValues, sumType, valueText, type AggState } from './aggregate-values.js';
import { cqlColumnType } from './cql-types.js';
import { keyText } from './record-key.js';
import type { SinkRow } from './sink-codec.js';
import type { SinkConfig } from './sink-config.js';

export const partialsTable = (config: SinkConfig) => `${config.table}_partials`;

/** The partials table's state columns of one aggregate (count has none: the records column; avg keeps its sum and count). */
const stateColumns = (a: AggregateColumn): string[] => (a.fn === 'count' ? [] : a.fn === 'avg' ? [`${a.name}_sum`, `${a.name}_n`] : [a.name]);

/** The CQL that creates an aggregate sink's two tables (its migration 1, `sink --print-cql`). */
export function aggregateTablesCql(config: SinkConfig, keyspace: string): string {
  const spec = config.aggregate!;
  const group = spec.groupBy.map((i) => config.columns[i]!);
  const groupCols = group.map((c) => `    ${c.name} ${cqlColumnType(c.type)},`);
  const w = spec.window;
  const partialState = spec.aggregates.flatMap((a) =>
    a.fn === 'count' ? [] : a.fn === 'avg' ? [`    ${a.name}_sum ${sumType(a)},`, `    ${a.name}_n bigint,`] : [`    ${a.name} ${a.fn === 'sum' ? sumType(a) : a.type},`],
  );
  const names = group.map((c) => c.name).join(', ');
  return [
    `-- Sink ${config.name}: topic ${config.topic}, aggregate mode: one row per ${names}${w === undefined ? '' : ` and window (${w.sizeMs} ms, every ${w.slideMs} ms)`}: the aggregates of every record read.`,
    '-- Written only by the sink, USING TIMESTAMP Σ(through_offset + 1) of the partials merged: never write it with wall-clock timestamps.',
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${config.table} (`,
    ...groupCols,
    ...(w === undefined ? [] : ['    window_start timestamp,', '    window_end timestamp,']),
    ...spec.aggregates.map((a) => `    ${a.name} ${a.type},`),
    `    PRIMARY KEY ((${names})${w === undefined ? '' : ', window_start'})`,
    ');',
    '-- Per Kafka partition, the fold of its records up to through_offset (written USING TIMESTAMP through_offset).',
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${partialsTable(config)} (`,
    ...groupCols,
    ...(w === undefined ? [] : ['    window_start timestamp,']),
    '    partition int,',
    '    through_offset bigint,',
    '    records bigint,',
    ...partialState,
    `    PRIMARY KEY ((${names}${w === undefined ? '' : ', window_start'}), partition)`,
    ');',
    ...(spec.close === undefined ? [] : closingTableCql(config, keyspace)),
    '',
  ].join('\n');
}

/** The key columns of an aggregate sink's rows: its group columns, then window_start when it has windows. */
export function aggregateKeyColumns(config: SinkConfig): string[] {
  return [...config.aggregate!.groupBy.map((i) => config.columns[i]!.name), ...(config.aggregate!.window === undefined ? [] : ['window_start'])];
}

/** The (group, window)s a row's values fall in. */
export function slotsOf(spec: AggregateSpec, values: readonly unknown[]): WindowSlot[] {
  const group = spec.groupBy.map((i) => values[i]);
  const w = spec.window;
  if (w === undefined) return [{ key: group, text: keyText(group) }];
  return windowStarts((values[w.time] as Date).getTime(), w).map((start) => {
    const key = [...group, new Date(start)];
    return { key, text: keyText(key), windowStart: start };
  });
}

/** How a sink's tables are read and written: column names and the row ↔ state conversions. */
class AggregateTables {
  readonly spec: AggregateSpec;
  readonly fold: Fold<unknown[], AggState>;
  /** The key columns of a (group, window), in the tables' order. */
  readonly keyNames: string[];
  readonly stateNames: string[];
  readonly partials: string;

  constructor(readonly config: SinkConfig) {
    this.spec = config.aggregate!;
    this.fold = aggregateFold(this.spec, (at) => `partition ${at.partition}, offset ${at.offset}`);
    this.keyNames = aggregateKeyColumns(config);
    this.stateNames = this.spec.aggregates.flatMap(stateColumns);
    this.partials = partialsTable(config);
  }

  /** Partials read without their offset or count: torn, or changed by hand (IncompleteRows). */
  private readonly incomplete = new IncompleteRows();

  /** A partials row (of the group and window `slot`) as a partial. */
  partialOf(row: Row, slot: string): Partial<AggState> {
    const through = row['through_offset'];
    const records = row['records'];
    const key = `${slot}\u0000${String(row['partition'])}`;
    if (through === null || records === null) {
      const where = `${this.partials} row of ${slot}, partition ${String(row['partition'])}`;
      return this.incomplete.refuse(key, `${where} was answered without its through_offset or records; reading it again`, (seconds) =>
        `the ${where} has had no through_offset or records for ${seconds} s: the sink writes them in one statement, so the row was changed outside it, and the partition's share of the window cannot be known. ` +
        'The partition is stopped at its checkpoint and nothing is skipped. Truncate both tables of the sink and replay it from the log start (`exactlyonce checkpoints reset --job <config> --all --to earliest`)',
      );
    }
    this.incomplete.whole(key);
    const state: AggState = { records: fromLong(records as types.Long), values: [], counts: [] };
    for (const a of this.spec.aggregates) {
      const v = a.fn === 'count' ? null : row[a.fn === 'avg' ? `${a.name}_sum` : a.name];
      state.values.push(v === null || v === undefined ? null : numOf(a.arithmetic!, v));
      state.counts.push(a.fn === 'avg' ? fromLong(row[`${a.name}_n`] as types.Long) : 0n);
    }
    return { through: fromLong(through as types.Long), state };
  }

  /** The state columns' values of a partial, as bound. */
  stateValues(state: AggState): unknown[] {
    return this.spec.aggregates.flatMap((a, i) =>
      a.fn === 'count' ? [] : a.fn === 'avg' ? [bind(state.values[i] ?? null, sumType(a)), toLong(state.counts[i]!)] : [bind(state.values[i] ?? null, a.fn === 'sum' ? sumType(a) : a.type)],
    );
  }
}

/** Statements an aggregate sink has in flight at once, over all its partitions: many small groups mean many statements per batch. */
const IN_FLIGHT = 64;
/** The (group, window)s of a batch written at once: their partials read, added to, written, then merged. */
const SLOTS_PER_STEP = 128;

/** At most `limit` calls of `fn` running at once, the others queued in order. */
function limited(limit: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let running = 0;
  const queue: Array<() => void> = [];
  return async (fn) => {
    if (running >= limit) await new Promise<void>((go) => queue.push(go));
    running++;
    try {
      return await fn();
    } finally {
      running--;
      queue.shift()?.();
    }
  };
}

/** The writes of an aggregate sink: a batch's partials, then the merge of every (group, window) it touched. */
export class SinkAggregator {
  private readonly t: AggregateTables;
  /** Partials kept per partition: a group seen again within a few batches is not read back (many small groups rarely are: the cache stays small). */
  private readonly cache = new PartialCache<AggState>(1024);
  private readonly options: { prepare: true; consistency: number };
  private readonly where: string;
  private readonly inFlight = limited(IN_FLIGHT);
  /** closeAfter: the windows each partition closes, and their messages. */
  private readonly closer: WindowCloser | undefined;

  constructor(
    config: SinkConfig,
    private readonly session: Client,
    private readonly keyspace: string,
    consistency: number,
    private readonly o: {
      /** Counts rows written: a batch's partials, and its merged rows. */
      onWrite?: (table: 'partials' | 'results', rows: number) => void;
      /** closeAfter: counts records that arrived after their window closed on their partition. */
      onLate?: (records: number) => void;
      /** closeAfter: publishes closed windows (JobContext.publish). */
      publish?: (topic: string, records: readonly PublishRecord[]) => Promise<void>;
    } = {},
  ) {
    this.t = new AggregateTables(config);
    this.options = { prepare: true, consistency };
    this.where = this.t.keyNames.map((n) => `${n} = ?`).join(' AND ');
    if (config.aggregate!.close !== undefined) {
      if (o.publish === undefined) throw new Error('closeAfter needs a publisher');
      this.closer = new WindowCloser(config, keyspace, { execute: (cql, params) => this.inFlight(() => session.execute(cql, params, this.options)) }, o.publish);
    }
  }

  private onWrite(table: 'partials' | 'results', rows: number): void {
    this.o.onWrite?.(table, rows);
  }

  forget(partition: number): void {
    this.cache.forget(partition);
    this.closer?.forget(partition);
  }

  async write(partition: number, records: readonly DecodedRecord<SinkRow>[]): Promise<void> {
    if (records.length === 0) return;
    const first = BigInt(records[0]!.record.offset);
    const last = BigInt(records[records.length - 1]!.record.offset);
    const spec = this.t.spec;
    const closer = this.closer;
    // closeAfter: the partition's watermark before the batch, moved by each record in offset order.
    const before = closer === undefined ? -Infinity : await closer.before(partition, first);
    let watermark = before;
    let late = 0;
    const slots = new Map<string, WindowSlot>();
    /** Per (group, window), the batch's records in it, in offset order. */
    const contributions = new Map<string, Array<{ key: string; offset: bigint; value: unknown[] }>>();
    for (const r of records) {
      if (r.value.kind !== 'row') continue;
      const of = slotsOf(spec, r.value.values);
      if (closer !== undefined) {
        if (of.some((s) => closeAt(spec, s.windowStart!) <= watermark)) late++;
        watermark = Math.max(watermark, (r.value.values[spec.window!.time] as Date).getTime());
      }
      for (const slot of of) {
        let list = contributions.get(slot.text);
        if (list === undefined) {
          slots.set(slot.text, slot);
          contributions.set(slot.text, (list = []));
        }
        list.push({ key: slot.text, offset: BigInt(r.record.offset), value: r.value.values });
      }
    }
    const known = this.cache.begin(partition, first);
    const stored = new Map<string, Partial<AggState>>();
    // A step at a time: what is alive at once (reads, results, statements queued) is bounded by the
    // step, not by the groups a batch touches (a batch of many small groups: a few statements per record).
    const keys = [...slots.keys()];
    for (let i = 0; i < keys.length; i += SLOTS_PER_STEP) {
      const step = keys.slice(i, i + SLOTS_PER_STEP);
      const part = step.flatMap((k) => contributions.get(k)!);
      const after = await applyBatch(this.t.fold, partition, part, async (k) => known.get(k) ?? (await this.readPartial(slots.get(k)!, partition)));
      const changed = [...after].filter(([, a]) => a.added > 0);
      await Promise.all(changed.map(([k, a]) => this.writePartial(slots.get(k)!, partition, a.partial)));
      this.onWrite('partials', changed.length);
      for (const [k, a] of after) stored.set(k, a.partial);
      await Promise.all(step.map((k) => this.merge(slots.get(k)!)));
      this.onWrite('results', step.length);
    }
    this.cache.commit(partition, first, last, stored);
    if (closer !== undefined) {
      await closer.close(partition, last, before, watermark, slots.values());
      if (late > 0) this.o.onLate?.(late);
    }
  }

  private selectPartials(andPartition: boolean): string {
    return `SELECT partition, through_offset, records${this.t.stateNames.map((n) => `, ${n}`).join('')} FROM ${this.keyspace}.${this.t.partials} WHERE ${this.where}${andPartition ? ' AND partition = ?' : ''}`;
  }

  private async readPartial(slot: WindowSlot, partition: number): Promise<Partial<AggState>> {
    const row = (await this.inFlight(() => this.session.execute(this.selectPartials(true), [...slot.key, partition], this.options))).first();
    return row === null ? { through: -1n, state: this.t.fold.empty() } : this.t.partialOf(row, slot.text);
  }

  private async writePartial(slot: WindowSlot, partition: number, p: Partial<AggState>): Promise<void> {
    const names = [...this.t.keyNames, 'partition', 'through_offset', 'records', ...this.t.stateNames];
    await this.inFlight(() => this.session.execute(
      `INSERT INTO ${this.keyspace}.${this.t.partials} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) USING TIMESTAMP ?`,
      [...slot.key, partition, toLong(p.through), toLong(p.state.records), ...this.t.stateValues(p.state), toLong(p.through)],
      this.options,
    ));
  }

  /** Reads every partial of a (group, window) and writes their merge, at a timestamp above every merge that read less. */
  private async merge(slot: WindowSlot): Promise<void> {
    const partials = (await this.inFlight(() => this.session.execute(this.selectPartials(false), slot.key, this.options))).rows.map((row) => this.t.partialOf(row, slot.text));
    const state = mergePartials(this.t.fold as Fold<unknown, AggState>, partials.map((p) => p.state));
    const w = this.t.spec.window;
    const names = [...this.t.keyNames, ...(w === undefined ? [] : ['window_end']), ...this.t.spec.aggregates.map((a) => a.name)];
    await this.inFlight(() => this.session.execute(
      `INSERT INTO ${this.keyspace}.${this.t.config.table} (${names.join(', ')}) VALUES (${names.map(() => '?').join(', ')}) USING TIMESTAMP ?`,
      [...slot.key, ...(w === undefined ? [] : [new Date(slot.windowStart! + w.sizeMs)]), ...resultValues(this.t.spec, state), toLong(mergeTimestamp(partials.map((p) => p.through)))],
      this.options,
    ));
  }
}

/** What `verify --job` reads of an aggregate sink's tables (src/verify/aggregate-audit.ts). */
export function aggregateAudit(config: SinkConfig): AggregateAudit {
  const t = new AggregateTables(config);
  const names = t.spec.aggregates.map((a) => a.name);
  const texts = (values: readonly unknown[]) => Object.fromEntries(names.map((n, i) => [n, valueText(values[i])]));
  const slotText = (row: Row) => keyText(t.keyNames.map((n) => row[n]));
  return {
    partialsTable: t.partials,
    resultColumns: [...t.keyNames, ...names],
    partialColumns: [...t.keyNames, 'partition', 'through_offset', 'records', ...t.stateNames],
    fold: t.fold as Fold<unknown, unknown>,
    partial: (row) => {
      const slot = slotText(row);
      const p = t.partialOf(row, slot);
      return { slot, partition: row['partition'] as number, through: p.through, state: p.state };
    },
    result: (row) => ({ slot: slotText(row), values: texts(names.map((n) => row[n])) }),
    resultValues: (state) => texts(resultValues(t.spec, state as AggState)),
    stateText: (state) => {
      const s = state as AggState;
      // Only avg keeps its count in the table; the fold counts every aggregate's values.
      return JSON.stringify([String(s.records), s.values.map(valueText), t.spec.aggregates.map((a, i) => (a.fn === 'avg' ? String(s.counts[i]) : ''))]);
    },
    // A column never null: the count, or the window's end; else the first aggregate (null when no record had a value).
    timedColumn: t.spec.aggregates.find((a) => a.fn === 'count')?.name ?? (t.spec.window === undefined ? names[0]! : 'window_end'),
    ...(t.spec.close === undefined
      ? {}
      : {
          closed: {
            topic: t.spec.close.topic,
            times: (value) => {
              const values = value as unknown[];
              return { time: (values[t.spec.window!.time] as Date).getTime(), closeAt: slotsOf(t.spec, values).map((s) => closeAt(t.spec, s.windowStart!)) };
            },
            message: (value) => closedMessageValues(t.spec, value),
          },
        }),
  };
}
