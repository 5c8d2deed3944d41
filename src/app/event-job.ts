/**
 * The original EventStreamingApp's storage on the engine: each valid event becomes one row of the
 * original `events` table, keyed by the Kafka partition and offset it came from.
 */
import { consistencies, toLong, type Client } from '../cassandra/session.js';
import type { Decoded, DecodedRecord, Job, SourceRecord } from '../engine/job.js';
import { decodeEvent, DEFAULT_MAX_RECORD_BYTES, type Event } from './event.js';

/** Rows per Cassandra batch. All rows of a batch share the partition key, so the batch is one mutation. */
const ROWS_PER_BATCH = 100;

export class EventJob implements Job<Event> {
  private session: Client | undefined;
  private insert = '';

  constructor(private readonly maxRecordBytes = DEFAULT_MAX_RECORD_BYTES) {}

  decode(record: SourceRecord): Decoded<Event> {
    return decodeEvent(record.value, this.maxRecordBytes);
  }

  async open(session: Client, keyspace: string): Promise<void> {
    this.session = session;
    this.insert = `INSERT INTO ${keyspace}.events (id, ts, partition, offset, source, client, health) VALUES (?, ?, ?, ?, ?, ?, ?)`;
  }

  /**
   * Idempotent: a row's key is (partition, offset) and every value is a pure function of the record,
   * so writing the same records again (replay after a crash, a zombie's late write) leaves the same
   * rows. Rows of one Kafka partition share the Cassandra partition key, so each UNLOGGED batch is
   * applied atomically and in isolation without a batchlog.
   */
  async write(partition: number, records: readonly DecodedRecord<Event>[]): Promise<void> {
    const session = this.session!;
    const chunks: Promise<unknown>[] = [];
    for (let i = 0; i < records.length; i += ROWS_PER_BATCH) {
      const queries = records.slice(i, i + ROWS_PER_BATCH).map(({ record, value: e }) => ({
        query: this.insert,
        params: [toLong(e.id), new Date(e.ts), partition, toLong(record.offset), e.source, e.client, e.health],
      }));
      chunks.push(
        session.batch(queries, { prepare: true, logged: false, consistency: consistencies.localQuorum }),
      );
    }
    await Promise.all(chunks);
  }
}

