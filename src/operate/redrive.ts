/**
 * `quarantine redrive`: quarantined records decoded again with the job's current decoder (a schema
 * registered since, a config column fixed), and those that decode now written — exactly once: each
 * redriven offset ends in the job's output or stays in the quarantine, never both, never neither.
 *
 * The order makes every interruption repairable by running the command again:
 *
 * 1. only offsets below the partition's checkpoint are taken: the workers are past them and never write
 *    them again unless the partition is reset or rewound (checked: see 5);
 * 2. the record is rebuilt from the quarantine row (its raw bytes, key, Kafka timestamp), or re-read from
 *    Kafka when its raw bytes were cut at --max-quarantine-bytes (checked against the row's SHA-256 of
 *    the whole value); a record cut and gone from the log stays quarantined, said per record;
 * 3. the job's own write, with the record's offset (`Job.write`: idempotent by contract; an upsert sink
 *    writes `USING TIMESTAMP <offset>`, so a redriven old record never overwrites a newer one of its key);
 * 4. then the quarantine row is deleted. Killed between 3 and 4, both exist: `verify --job` reports the
 *    offset as `quarantined_valid` (the job's decoder now says it is valid), and running redrive again
 *    writes the same row again (idempotent) and deletes the quarantine row;
 * 5. a record that still does not decode stays, its reason brought up to date when the decoder now
 *    gives another one (so that verify agrees). A partition whose checkpoint epoch changed meanwhile (a
 *    reset or a rewind: a worker may have quarantined one of these offsets again) is named: run again.
 */
import { createHash } from 'node:crypto';
import { consistencies, fromLong, isRetriableCassandraError, toLong, type Client, type Row } from '../cassandra/session.js';
import type { ConnectionConfig } from '../config.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import { engineTables, type EngineTables } from '../engine/engine-tables.js';
import type { DecodedRecord, Job, SourceRecord } from '../engine/job.js';
import type { QuarantineRow } from '../engine/quarantine.js';
import { retry } from '../engine/retry.js';
import { ExactlyOnceError } from '../errors.js';
import { KafkaAdmin, type Watermarks } from '../kafka/admin.js';
import { LogReader, readOne } from '../kafka/log-reader.js';
import { Producer } from '../kafka/producer.js';
import type { JobTarget } from './job-target.js';

export interface RedriveOptions {
  reason?: string;
  partition?: number;
  /** Offsets from (inclusive) and to (inclusive). */
  from?: bigint;
  to?: bigint;
  /** Records written, then unquarantined, per step (default 500). */
  batch?: number;
  dryRun?: boolean;
  /** One line per step and per record that cannot be redriven. */
  onLine?: (line: string) => void;
}

/** Offsets per partition. */
export type Offsets = Map<number, bigint[]>;

export interface RedriveReport {
  /** Written to the output and taken out of the quarantine (dry run: would be). */
  redriven: Offsets;
  /** Still not decodable: stay, by their (current) reason. */
  stay: Map<string, number>;
  /** Cut at --max-quarantine-bytes and no longer in the log (or changed there): stay. */
  lost: Offsets;
  /** Re-read from Kafka because their raw bytes were cut. */
  reread: number;
  /** At or beyond the checkpoint: a batch in flight; left to the workers. */
  inFlight: number;
  /** Partitions reset or rewound during the redrive: run it again. */
  moved: number[];
}

const DEADLINE_MS = 120_000;
const cassandra = <T>(fn: () => Promise<T>) => retry(fn, { server: 'Cassandra', isRetriable: isRetriableCassandraError, deadlineMs: DEADLINE_MS });
const add = (m: Offsets, p: number, o: bigint) => m.set(p, [...(m.get(p) ?? []), o]);
const sha256 = (b: Buffer | null) => createHash('sha256').update(b ?? Buffer.alloc(0)).digest('hex');

/** A quarantine row as redrive reads it: one partition's, so without its partition and topic. */
export type QRow = Omit<QuarantineRow, 'partition' | 'topic'>;

/** Refuses what cannot be redriven: the events job, a job given by name. */
export function redrivable(target: JobTarget): Job<unknown> {
  if (target.tablesKey === undefined) {
    throw new ExactlyOnceError(
      'EO_USAGE',
      "quarantine redrive: the events job cannot redrive: its alert counts are built batch by batch in offset order, and its decoder has no outside input that could have been fixed (a malformed event decodes the same way again); give --job a sink config or a job module",
    );
  }
  if (target.job === null) throw new ExactlyOnceError('EO_USAGE', `--job: give job ${target.name}'s module or sink config (redrive decodes with it), not its name`);
  return target.job;
}

export async function redrive(config: ConnectionConfig, session: Client, target: JobTarget, o: RedriveOptions): Promise<RedriveReport> {
  const job = redrivable(target);
  const topic = target.topic;
  const t = engineTables(config.keyspace, target.tablesKey);
  const store = new CheckpointStore(session, config.keyspace, topic, target.tablesKey);
  const admin = new KafkaAdmin(config);
  let marks: Watermarks[];
  try {
    if ((await admin.partitionCount(topic)) === null) throw new ExactlyOnceError('EO_TOPIC_MISMATCH', `topic ${topic} does not exist at ${config.brokers.join(',')}: nothing to redrive from`);
    marks = await admin.watermarks(topic);
  } finally {
    await admin.close();
  }
  if (o.partition !== undefined && !marks.some((m) => m.partition === o.partition)) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--partition: topic ${topic} has partitions 0..${marks.length - 1} (got ${o.partition})`);
  }
  const report: RedriveReport = { redriven: new Map(), stay: new Map(), lost: new Map(), reread: 0, inFlight: 0, moved: [] };
  let producer: Producer | undefined;
  let reader: LogReader | undefined;
  const signal = new AbortController().signal;
  if (o.dryRun !== true) {
    await job.open({
      session,
      keyspace: config.keyspace,
      publish: async (to, records) => {
        producer ??= new Producer(config);
        await producer.send(to, records);
      },
    });
  }
  try {
    for (const w of marks.filter((m) => o.partition === undefined || m.partition === o.partition)) {
      const p = w.partition;
      const before = await cassandra(() => store.readOne(p));
      if (before === null) continue; // never checkpointed: nothing of it was quarantined yet
      const upTo = o.to === undefined || o.to >= before.next ? before.next - 1n : o.to;
      report.inFlight += await countFrom(session, t, p, before.next, o.to);
      // A page of the quarantine per step: memory stays bounded by --batch whatever its size.
      for await (const page of readRows(session, t, p, o.from ?? 0n, upTo, o.batch ?? 500)) {
        const step = page.filter((r) => o.reason === undefined || r.reason === o.reason);
        const records: Array<{ row: QRow; record: SourceRecord }> = [];
        for (const row of step) {
          const record = await rebuild(topic, p, row, w.low, async () => (reader ??= await LogReader.open(config, 'exactlyonce-redrive')), report, o.onLine);
          if (record !== null) records.push({ row, record });
        }
        const lookup = job.lookup;
        if (lookup !== undefined) await retry(() => lookup.fetch(records.map((r) => r.record), signal), { server: lookup.server, deadlineMs: 300_000 });
        const decoded: DecodedRecord<unknown>[] = [];
        const requarantine: Array<{ row: QRow; reason: string; detail: string }> = [];
        for (const { row, record } of records) {
          const d = job.decode(record);
          if (d.ok) decoded.push({ record, value: d.value });
          else {
            report.stay.set(d.reason, (report.stay.get(d.reason) ?? 0) + 1);
            if (d.reason !== row.reason || d.detail !== row.detail) requarantine.push({ row, reason: d.reason, detail: d.detail });
          }
        }
        if (o.dryRun !== true) {
          // The output first (idempotent), then the quarantine rows: see the top of this file.
          if (decoded.length > 0) await cassandra(() => job.write(p, decoded, signal));
          await unquarantine(session, t, p, decoded.map((d) => d.record.offset));
          for (const q of requarantine) {
            await cassandra(() => session.execute(`UPDATE ${t.quarantine} SET reason = ?, detail = ? WHERE ${t.jobWhere}partition = ? AND offset = ?`, [q.reason, q.detail, ...t.jobParams, p, toLong(q.row.offset)], { prepare: true, consistency: consistencies.localQuorum }));
          }
        }
        for (const d of decoded) add(report.redriven, p, d.record.offset);
        if (decoded.length > 0) o.onLine?.(`partition ${p}: ${o.dryRun === true ? 'would redrive' : 'redrove'} ${decoded.length} record${decoded.length === 1 ? '' : 's'}, offsets ${decoded[0]!.record.offset}..${decoded.at(-1)!.record.offset}`);
      }
      const after = await cassandra(() => store.readOne(p));
      if (after !== null && after.epoch !== before.epoch) report.moved.push(p);
    }
  } finally {
    await reader?.close();
    await producer?.close();
    await job.close?.();
  }
  return report;
}

/**
 * The job's quarantine rows of [from, to] of a partition, ascending, `size` a page. Each page is read
 * after the one before was handled (its rows deleted or kept): the next starts past the last offset
 * seen, so deletions behind it change nothing ahead.
 */
async function* readRows(session: Client, t: EngineTables, p: number, from: bigint, to: bigint, size: number): AsyncGenerator<QRow[]> {
  for (let next = from; next <= to; ) {
    const r = await cassandra(() =>
      session.execute(
        `SELECT offset, reason, detail, key, raw, raw_length, raw_sha256, kafka_ts FROM ${t.quarantine} WHERE ${t.jobWhere}partition = ? AND offset >= ? AND offset <= ? ORDER BY offset ASC LIMIT ?`,
        [...t.jobParams, p, toLong(next), toLong(to), size],
        { prepare: true, consistency: consistencies.localQuorum },
      ),
    );
    const rows = r.rows.map(fromRow);
    if (rows.length === 0) return;
    yield rows;
    next = rows.at(-1)!.offset + 1n;
  }
}

function fromRow(row: Row): QRow {
  return {
    offset: fromLong(row['offset']),
    reason: row['reason'] as string,
    detail: (row['detail'] as string | null) ?? '',
    key: row['key'] as Buffer | null,
    raw: row['raw'] as Buffer | null,
    rawLength: (row['raw_length'] as number | null) ?? 0,
    rawSha256: (row['raw_sha256'] as string | null) ?? '',
    kafkaTs: row['kafka_ts'] as Date | null,
  };
}

/** Quarantine rows at or beyond the checkpoint (up to `to`): a batch in flight. */
async function countFrom(session: Client, t: EngineTables, p: number, from: bigint, to: bigint | undefined): Promise<number> {
  if (to !== undefined && to < from) return 0;
  const r = await cassandra(() =>
    session.execute(`SELECT COUNT(*) AS n FROM ${t.quarantine} WHERE ${t.jobWhere}partition = ? AND offset >= ?${to === undefined ? '' : ' AND offset <= ?'}`, [...t.jobParams, p, toLong(from), ...(to === undefined ? [] : [toLong(to)])], { prepare: true }),
  );
  return Number(r.first()?.['n'] ?? 0);
}

/**
 * The record as Kafka holds it: from the row when its raw bytes are whole, else re-read from the log
 * (when the log still holds it, and only when its bytes hash as the row says). Null (said in a line)
 * when it cannot be had.
 */
export async function rebuild(topic: string, p: number, row: QRow, logStart: bigint, reader: () => Promise<Pick<LogReader, 'read'>>, report: RedriveReport, onLine?: (line: string) => void): Promise<SourceRecord | null> {
  const whole = row.raw === null ? row.rawLength === 0 : row.raw.length === row.rawLength;
  const fromRowRecord: SourceRecord = { topic, partition: p, offset: row.offset, key: row.key, value: row.raw, timestampMs: row.kafkaTs?.getTime() ?? 0 };
  if (whole && sha256(row.raw) === row.rawSha256) return fromRowRecord;
  const lost = (why: string) => {
    add(report.lost, p, row.offset);
    onLine?.(`partition ${p} offset ${row.offset}: cannot be redriven: ${why}; it stays quarantined (${row.reason})`);
    return null;
  };
  const cut = `its raw bytes were cut at ${row.raw?.length ?? 0} of ${row.rawLength} (--max-quarantine-bytes)`;
  if (row.offset < logStart) return lost(`${cut}, and the log no longer holds it (log start ${logStart})`);
  const record = await readOne(await reader(), topic, p, row.offset);
  if (record === undefined) return lost(`${cut}, and the log has no record at that offset now`);
  if (sha256(record.value) !== row.rawSha256) return lost(`${cut}, and the record the log holds there is another one (its SHA-256 differs: was the topic re-created?)`);
  report.reread++;
  return record;
}

/** Deletes the quarantine rows of `offsets` of a partition (one Cassandra partition: an unlogged batch is one mutation). */
async function unquarantine(session: Client, t: EngineTables, p: number, offsets: readonly bigint[]): Promise<void> {
  const query = `DELETE FROM ${t.quarantine} WHERE ${t.jobWhere}partition = ? AND offset = ?`;
  for (let i = 0; i < offsets.length; i += 100) {
    const batch = offsets.slice(i, i + 100).map((o) => ({ query, params: [...t.jobParams, p, toLong(o)] }));
    await cassandra(() => session.batch(batch, { prepare: true, logged: false, consistency: consistencies.localQuorum }));
  }
}
