/**
 * One Kafka record as the adapters read it: the consumer hands these to the engine, the log reader to
 * the auditor. It lives here, in the lowest layer that makes it; the engine re-exports it to jobs
 * (src/engine/job.ts).
 */
export interface SourceRecord {
  readonly topic: string;
  readonly partition: number;
  readonly offset: bigint;
  readonly key: Buffer | null;
  readonly value: Buffer | null;
  /** The record's Kafka timestamp, epoch ms. */
  readonly timestampMs: number;
  /**
   * The record's Kafka headers in the order they were produced, as [name, bytes] (a name may repeat).
   * Left out when the record has none.
   */
  readonly headers?: ReadonlyArray<readonly [string, Buffer]>;
  /**
   * Where the group consumer's reading that brought this record started (src/kafka/consumer.ts): the
   * offset after the record it handed over before this one, or the offset it was assigned or restarted
   * at ('log-start': the log start of then). Every record a read_committed consumer receives from there
   * up to this one was handed over before it, in order, so [fetchedFrom, offset) holds no other.
   * Undefined when the source does not say (other readers).
   */
  readonly fetchedFrom?: bigint | 'log-start';
}

/** The client's headers of a message ([{ name: bytes }, …]) as SourceRecord.headers; undefined when there are none. */
export function recordHeaders(raw: ReadonlyArray<Readonly<Record<string, Buffer | string | null | undefined>>> | undefined): Array<readonly [string, Buffer]> | undefined {
  if (raw === undefined || raw.length === 0) return undefined;
  const out: Array<readonly [string, Buffer]> = [];
  for (const h of raw) {
    for (const [name, v] of Object.entries(h)) out.push([name, v === null || v === undefined ? Buffer.alloc(0) : Buffer.isBuffer(v) ? v : Buffer.from(v)]);
  }
  return out;
}
