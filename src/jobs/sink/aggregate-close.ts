/**
 * `closeAfter:` of an aggregate sink with windows: each Kafka partition closes a window once its
 * watermark — the latest record time it has read, a function of the log's prefix — is `closeAfter`
 * past the window's end, and then publishes the window's row to a compacted topic keyed by group and
 * window. A record that arrives for a window its partition closed before it is late: it still updates
 * the row (the row is a function of the log), counts in `exactlyonce_sink_late_total`, and the row is
 * published again.
 *
 * State, in `<table>_closing`, one Cassandra partition per Kafka partition:
 * - the watermark and the offset it was read through (static columns, written USING TIMESTAMP offset:
 *   the write that read more of the log wins);
 * - an entry per (group, window) the partition contributed to and has not closed yet, clustered by
 *   when it closes. A batch writes the entries of the windows it touched that stay open, and after its
 *   merges publishes every window it closed: those it touched that are closed at its end, and the
 *   entries that its watermark passed, which it then deletes by one range delete. Entries and deletes
 *   are written USING TIMESTAMP of the batch's last offset, so a zombie's replay of an earlier batch
 *   cannot bring back an entry a later batch deleted (an entry a batch writes is never in the range
 *   that batch or an earlier one deletes: it closes after their watermark). This relies on each writer
 *   writing a partition's batches in offset order, as the engine does: a zombie ahead of the current
 *   owner has written the batches before the one whose delete shadows the owner's entries, and
 *   published those windows after merging them (test/unit/aggregate-close.test.ts models it).
 * All of it runs before the batch's checkpoint: a crash replays it, and a replay publishes again
 * (messages are states, not increments).
 *
 * The topic's latest message of a window equals its row once every partition that contributed to it
 * has closed it: each publish reads the row after the merge that wrote it was acknowledged and
 * publishes it with its write time, then reads it again and publishes again while the row is newer
 * than what it published; so the message that lands last was read after the last merge of a
 * partition that published (the argument of the alerts topic, docs/aggregates.md). A partition that
 * has not closed the window yet publishes nothing for it, and one that reads no newer record never
 * closes anything (an idle partition holds its windows open, as in every watermark-based system).
 */
import type { types } from 'cassandra-driver';
import { fromLong, toLong, type Client, type Row } from '../../cassandra/session.js';
import type { PublishRecord } from '../../engine/job.js';
import type { AggregateSpec } from './aggregate-config.js';
import { valueText } from './aggregate-values.js';
import { canonical, cqlColumnType } from './cql-types.js';
import { keyText } from './record-key.js';
import type { SinkConfig } from './sink-config.js';

export const closingTable = (config: SinkConfig) => `${config.table}_closing`;

/** The CQL of the closing table, for an aggregate sink with closeAfter (part of its migration 1). */
export function closingTableCql(config: SinkConfig, keyspace: string): string[] {
  const group = config.aggregate!.groupBy.map((i) => config.columns[i]!);
  return [
    `-- Per Kafka partition: its watermark (the latest record time read through through_offset), and the windows it has not closed yet (closeAfter ${config.aggregate!.close!.afterMs} ms).`,
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${closingTable(config)} (`,
    '    partition int,',
    '    close_at timestamp,',
    ...group.map((c) => `    ${c.name} ${cqlColumnType(c.type)},`),
    '    window_start timestamp,',
    '    watermark timestamp STATIC,',
    '    through_offset bigint STATIC,',
    `    PRIMARY KEY ((partition), close_at, ${[...group.map((c) => c.name), 'window_start'].join(', ')})`,
    ');',
  ];
}

/** A (group, window): its key values in the tables' order (the group's, then window_start), and their text. */
export interface WindowSlot {
  key: unknown[];
  text: string;
  windowStart?: number;
}

/** The message of a closed window: keyed by the group and window's text, the row's columns as JSON (aggregates as exact text). */
export function closedMessage(spec: AggregateSpec, config: SinkConfig, slot: WindowSlot, row: Row): PublishRecord {
  const group = spec.groupBy.map((i) => config.columns[i]!.name);
  const value: Record<string, unknown> = {};
  group.forEach((n, i) => (value[n] = canonical(slot.key[i])));
  value['window_start'] = (row['window_start'] as Date).toISOString();
  value['window_end'] = (row['window_end'] as Date).toISOString();
  for (const a of spec.aggregates) value[a.name] = row[a.name] === null ? null : valueText(row[a.name]);
  return { key: slot.text, value: JSON.stringify(value) };
}

/** A closed window's message, as verify reads it: its aggregates' texts ('null' for null), or why it is malformed. */
export function closedMessageValues(spec: AggregateSpec, value: Buffer | null): Record<string, string> | string {
  if (value === null) return 'a tombstone';
  let o: unknown;
  try {
    o = JSON.parse(value.toString('utf8'));
  } catch {
    return 'not JSON';
  }
  if (typeof o !== 'object' || o === null) return 'not a JSON object';
  const out: Record<string, string> = {};
  for (const a of spec.aggregates) {
    const v = (o as Record<string, unknown>)[a.name];
    if (v !== null && typeof v !== 'string') return `${a.name} is not a text or null`;
    out[a.name] = v === null ? 'null' : v;
  }
  return out;
}

/** When a window starting at `start` closes: its end plus closeAfter. */
export function closeAt(spec: AggregateSpec, start: number): number {
  return start + spec.window!.sizeMs + spec.close!.afterMs;
}

export interface Statements {
  execute(cql: string, params: unknown[]): Promise<types.ResultSet>;
}

/**
 * One sink's closing of windows (see the file comment): per batch, `before` the watermark it starts
 * from, then `close` after its merges.
 */
export class WindowCloser {
  private readonly spec: AggregateSpec;
  private readonly table: string;
  private readonly groupNames: string[];
  /** A window's row with its merge timestamp, for publishing. */
  private readonly selectRow: string;
  /** The watermark after the last batch this worker stored, per partition, valid for the batch that continues it. */
  private readonly marks = new Map<number, { next: bigint; watermark: number }>();

  constructor(
    private readonly config: SinkConfig,
    private readonly keyspace: string,
    private readonly run: Statements,
    private readonly publish: (topic: string, records: readonly PublishRecord[]) => Promise<void>,
  ) {
    this.spec = config.aggregate!;
    this.table = `${keyspace}.${closingTable(config)}`;
    this.groupNames = this.spec.groupBy.map((i) => config.columns[i]!.name);
    const where = [...this.groupNames, 'window_start'].map((n) => `${n} = ?`).join(' AND ');
    this.selectRow = `SELECT window_start, window_end, ${this.spec.aggregates.map((a) => a.name).join(', ')}, WRITETIME(window_end) AS merged_at FROM ${keyspace}.${config.table} WHERE ${where}`;
  }

  forget(partition: number): void {
    this.marks.delete(partition);
  }

  /** The watermark a batch of `partition` starting at `first` starts from (−∞: no record yet). */
  async before(partition: number, first: bigint): Promise<number> {
    const m = this.marks.get(partition);
    if (m !== undefined && m.next === first) return m.watermark;
    const row = (await this.run.execute(`SELECT watermark FROM ${this.table} WHERE partition = ? LIMIT 1`, [partition])).first();
    const w = row?.['watermark'] as Date | null | undefined;
    return w === null || w === undefined ? -Infinity : w.getTime();
  }

  /**
   * After a batch's merges: stores the entries of the windows it touched that stay open, publishes
   * those it closed (touched and closed at its end, or passed by its watermark), deletes their entries
   * and stores the new watermark. `touched`: the batch's (group, window)s; `after`: its watermark.
   */
  async close(partition: number, last: bigint, before: number, after: number, touched: Iterable<WindowSlot>): Promise<number> {
    const at = toLong(last);
    const closed = new Map<string, WindowSlot>();
    const open: WindowSlot[] = [];
    for (const s of touched) (closeAt(this.spec, s.windowStart!) <= after ? closed.set(s.text, s) : open.push(s));
    const cols = ['partition', 'close_at', ...this.groupNames, 'window_start'];
    await Promise.all(
      open.map((s) =>
        this.run.execute(`INSERT INTO ${this.table} (${cols.join(', ')}) VALUES (${cols.map(() => '?').join(', ')}) USING TIMESTAMP ?`, [partition, new Date(closeAt(this.spec, s.windowStart!)), ...s.key, at]),
      ),
    );
    if (after > before) {
      const due = await this.run.execute(`SELECT ${[...this.groupNames, 'window_start'].join(', ')} FROM ${this.table} WHERE partition = ? AND close_at <= ?`, [partition, new Date(after)]);
      for (const row of due.rows) {
        const key = [...this.groupNames.map((n) => row[n]), row['window_start']];
        const text = keyText(key);
        if (!closed.has(text)) closed.set(text, { key, text, windowStart: (row['window_start'] as Date).getTime() });
      }
    }
    await Promise.all([...closed.values()].map((s) => this.publishRow(s)));
    if (after > before) {
      await this.run.execute(`DELETE FROM ${this.table} USING TIMESTAMP ? WHERE partition = ? AND close_at <= ?`, [at, partition, new Date(after)]);
      await this.run.execute(`INSERT INTO ${this.table} (partition, watermark, through_offset) VALUES (?, ?, ?) USING TIMESTAMP ?`, [partition, new Date(after), at, at]);
    }
    this.marks.set(partition, { next: last + 1n, watermark: after });
    return closed.size;
  }

  /** Publishes a window's row, then again while the row read back is newer than what was published. */
  private async publishRow(s: WindowSlot): Promise<void> {
    let published = -1n;
    for (;;) {
      const row = (await this.run.execute(this.selectRow, s.key)).first();
      if (row === null) return; // not merged yet: the merge that writes it publishes after it
      const mergedAt = fromLong(row['merged_at'] as types.Long);
      if (mergedAt <= published) return;
      await this.publish(this.spec.close!.topic, [closedMessage(this.spec, this.config, s, row)]);
      published = mergedAt;
    }
  }
}
