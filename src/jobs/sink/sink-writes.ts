/**
 * The sink's row writes (src/jobs/sink/sink-job.ts): the prepared statements, and a batch of decoded
 * records written as unlogged batches of pre-encoded rows, in log mode (keyed by partition and offset)
 * or upsert mode (per key, `USING TIMESTAMP <offset>`), a TTL's expiry applied. A file of its own so
 * that the job reads as what a record becomes, apart from how its rows reach Cassandra.
 */
import { BATCH_BYTES, cutBatches, ROWS_PER_BATCH } from '../../cassandra/batches.js';
import { BatchRows } from '../../cassandra/batch-rows.js';
import { int32 } from '../../cassandra/encode.js';
import { PreparedBatch } from '../../cassandra/prepared-batch.js';
import { toLong, type Client } from '../../cassandra/session.js';
import type { DecodedRecord } from '../../engine/job.js';
import type { SinkRow } from './sink-codec.js';
import { keyText } from './record-key.js';
import { ttlLeft } from './row-ttl.js';
import { UNSET } from './column-values.js';
import type { SinkConfig } from './sink-config.js';

/** Upsert batches in flight at once. */
const UPSERT_CONCURRENCY = 64;
/**
 * Keys (Cassandra partitions) and bytes of rows per upsert batch: Cassandra's defaults warn about an
 * unlogged batch over 10 partitions (unlogged_batch_across_partitions_warn_threshold) or 5 KiB
 * (batch_size_warn_threshold) and refuse one over 50 KiB (batch_size_fail_threshold); a batch of one
 * partition is exempt, so one key's records go in one batch up to ROWS_PER_BATCH and BATCH_BYTES.
 */
const UPSERT_KEYS_PER_BATCH = 10;
const UPSERT_BATCH_BYTES = 4096;

/** The row writes, prepared: log mode's insert; upsert's insert and delete. */
export interface RowStatements {
  insert: PreparedBatch;
  del?: PreparedBatch;
}

/** The row writes of a sink at `consistency` (a driver consistency level): log mode's insert; upsert's insert and delete. */
export function rowStatements(config: SinkConfig, session: Client, keyspace: string, consistency: number): RowStatements {
  const table = `${keyspace}.${config.table}`;
  const names = config.columns.map((c) => c.name).join(', ');
  const marks = config.columns.map(() => '?').join(', ');
  const ttl = config.ttl !== undefined;
  const statement = (cql: string) => new PreparedBatch(session, cql, consistency);
  return config.mode === 'log'
    ? { insert: statement(`INSERT INTO ${table} (partition, offset, ${names}) VALUES (?, ?, ${marks})${ttl ? ' USING TTL ?' : ''}`) }
    : {
        insert: statement(`INSERT INTO ${table} (${names}) VALUES (${marks}) USING TIMESTAMP ?${ttl ? ' AND TTL ?' : ''}`),
        del: statement(`DELETE FROM ${table} USING TIMESTAMP ? WHERE ${config.key.map((k) => `${k} = ?`).join(' AND ')}`),
      };
}

/** Log mode: rows keyed by (partition, offset), values a pure function of the record: a replay rewrites them. */
export async function writeLog(config: SinkConfig, statements: RowStatements, partition: number, all: readonly DecodedRecord<SinkRow>[], onExpired: (n: number) => void): Promise<void> {
  const ttl = config.ttl !== undefined;
  // A TTL: each row expires at its record's time + TTL whenever it is (re)written; one past it is not written.
  const now = Date.now();
  const left = new Map<DecodedRecord<SinkRow>, number>();
  const records = !ttl
    ? all
    : all.filter((r) => {
        const t = ttlLeft((r.value as { expiresAtMs: number }).expiresAtMs, now);
        left.set(r, t);
        return t > 0;
      });
  if (records.length < all.length) onExpired(all.length - records.length);
  const insert = statements.insert;
  const b = await insert.bound();
  const w = b.writers;
  const n = config.columns.length;
  const routing = [int32(partition)];
  // Unlogged batches of one Cassandra partition each (applied atomically), cut by rows and by bytes.
  // A row's size is its values' as bound (a record's may be far smaller: a decimal 1e1000 spells out
  // 1000 digits), and each row is below MAX_ROW_BYTES, so a batch stays below the 16 MiB a mutation
  // may take with Cassandra's default commit log (src/jobs/sink/store-limits.ts).
  const batches = cutBatches(records, ROWS_PER_BATCH, BATCH_BYTES, ({ value }) => (value as { bytes: number }).bytes + 32);
  // Every batch is encoded before any is sent: a throw while encoding leaves no send behind it whose
  // failure nothing would handle (an unhandled rejection ends the process).
  const encoded = batches.map((batch) => {
    const rows = new BatchRows(b.queryId, w.length, 64, batch.length);
    for (const r of batch) {
      const values = (r.value as { values: unknown[] }).values;
      rows.row();
      rows.int32(partition);
      const offset = r.record.offset;
      if (typeof offset === 'bigint') rows.int64(offset);
      else rows.int64FromNumber(offset);
      for (let i = 0; i < n; i++) w[2 + i]!(rows, values[i]);
      if (ttl) rows.int32(left.get(r)!);
    }
    return rows;
  });
  await Promise.all(encoded.map((rows) => insert.send(b, rows, routing)));
}

/**
 * Upsert mode: per key only the batch's last record is written (an older one would lose to it anyway),
 * `USING TIMESTAMP <offset>` so that the highest offset wins whatever order writes land in (with a
 * `version:`, the record of the highest version, `USING TIMESTAMP <version>`). A key is a
 * Cassandra partition: its writes are one mutation, and keys on the same replicas share an unlogged
 * batch (its partitions are applied independently: the checkpoint follows them all, and a batch
 * written again changes nothing), encoded as log mode's rows are.
 */
export async function writeUpsert(
  config: SinkConfig,
  statements: RowStatements,
  /** Where each key column's value is among the insert's parameters (to route a key's batch). */
  keyAt: readonly number[],
  records: readonly DecodedRecord<SinkRow>[],
  signal: AbortSignal,
  onExpired: (n: number) => void,
): Promise<void> {
  // With unset cells a key's row is the merge of its records: each is written (at its own offset,
  // so the cells each record set win in offset order whatever order the writes land in).
  // With a version the key's record of the highest version is written, at that version: Cassandra keeps
  // it over any write of a lower version, from any partition. On a tie the later offset, unless the
  // earlier is a delete: a delete wins a tie of timestamps in Cassandra, so it must here too.
  const versioned = config.version !== undefined;
  // Versioned rows with cells left unset (columns added after the record, column-eras.ts) are each
  // written, so that Cassandra merges a key's cells by version as verify --job does.
  const all = config.columns.some((c) => c.onNull === 'unset') || (versioned && records.some((r) => r.value.kind === 'row' && r.value.values.includes(UNSET)));
  const byKey = new Map<string, DecodedRecord<SinkRow>[]>();
  for (const r of records) {
    const k = keyText(r.value.key);
    const list = byKey.get(k);
    if (list === undefined) byKey.set(k, [r]);
    else if (all) list.push(r);
    else if (!versioned || versionAt(r) > versionAt(list[0]!) || (versionAt(r) === versionAt(list[0]!) && list[0]!.value.kind !== 'delete')) list[0] = r;
  }
  const ttl = config.ttl !== undefined;
  // A TTL: the row expires at its record's time + TTL whenever it is (re)written. A record already past
  // it deletes the key at its offset instead: the row its record stands for has expired, and an older
  // record's row (with a later expiry) must not show through.
  const now = Date.now();
  const left = (w: DecodedRecord<SinkRow>) => (ttl && w.value.kind === 'row' ? ttlLeft(w.value.expiresAtMs!, now) : 1);
  const { insert, del } = statements;
  const [ins, dl] = await Promise.all([insert.bound(), del!.bound()]);
  const n = config.columns.length;
  const routingOf = (key: unknown[]) => {
    const routing: unknown[] = new Array(n).fill(null);
    for (let c = 0; c < keyAt.length; c++) routing[keyAt[c]!] = key[c];
    return routing;
  };
  // A key's records are one Cassandra partition: one mutation when cut no further (by rows and bytes,
  // as log mode's batches). Keys of one replica set then share a batch, at most UPSERT_KEYS_PER_BATCH
  // keys and UPSERT_BATCH_BYTES: the coordinator holds them all, and Cassandra neither warns nor refuses.
  const bytesOf = (r: DecodedRecord<SinkRow>) => (r.value.kind === 'row' ? r.value.bytes : 16) + 32;
  const pieces = [...byKey.values()].flatMap((group) => cutBatches(group, ROWS_PER_BATCH, BATCH_BYTES, bytesOf));
  const sets = await Promise.all(pieces.map((p) => insert.replicaSet(ins, routingOf(p[0]!.value.key))));
  const bySet = new Map<string, DecodedRecord<SinkRow>[][]>();
  for (let i = 0; i < pieces.length; i++) {
    const list = bySet.get(sets[i]!);
    if (list === undefined) bySet.set(sets[i]!, [pieces[i]!]);
    else list.push(pieces[i]!);
  }
  const pieceBytes = (piece: readonly DecodedRecord<SinkRow>[]) => piece.reduce((a, r) => a + bytesOf(r), 0);
  const batches = [...bySet.values()].flatMap((list) => cutBatches(list, UPSERT_KEYS_PER_BATCH, UPSERT_BATCH_BYTES, pieceBytes));
  let expired = 0;
  const encode = (batch: DecodedRecord<SinkRow>[][]) => {
    const rows = new BatchRows(ins.queryId, ins.writers.length, 64, batch.reduce((a, p) => a + p.length, 0));
    for (const piece of batch) {
      for (const w of piece) {
        const offset = versioned ? toLong(BigInt(versionAt(w))) : toLong(w.record.offset);
        const t = left(w);
        if (w.value.kind === 'row' && t > 0) {
          const values = w.value.values;
          rows.row();
          for (let c = 0; c < n; c++) ins.writers[c]!(rows, values[c]);
          ins.writers[n]!(rows, offset);
          if (ttl) rows.int32(t);
        } else {
          if (t <= 0) expired++;
          rows.rowOf(dl.queryId, dl.writers.length);
          dl.writers[0]!(rows, offset);
          const key = w.value.key;
          for (let c = 0; c < key.length; c++) dl.writers[1 + c]!(rows, key[c]);
        }
      }
    }
    return { rows, routing: routingOf(batch[0]![0]!.value.key) };
  };
  for (let i = 0; i < batches.length; i += UPSERT_CONCURRENCY) {
    signal.throwIfAborted();
    // Encoded before any is sent (as log mode's).
    const encoded = batches.slice(i, i + UPSERT_CONCURRENCY).map(encode);
    await Promise.all(encoded.map(({ rows, routing }) => insert.send(ins, rows, routing)));
  }
  if (expired > 0) onExpired(expired);
}

/** A versioned upsert record's version (the codec sets it on every row and delete it writes). */
const versionAt = (r: DecodedRecord<SinkRow>): number => (r.value as { version: number }).version;
