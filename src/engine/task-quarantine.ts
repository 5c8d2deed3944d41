/**
 * What a PartitionTask does with records it cannot store: a batch the store refuses for good is
 * searched for the record it refuses (so that the partition's stop names one record) and goes on past
 * a record an operator quarantined by hand (`exactlyonce quarantine add`); records the job could not
 * decode are counted and logged once per batch.
 */
import { ExactlyOnceError } from '../errors.js';
import type { DecodedRecord } from './job.js';
import type { TaskContext } from './ports.js';
import { HAND_QUARANTINE_REASON, type QuarantineEntry } from './quarantine.js';
import { abortedBy } from './retry.js';
import { permanentError } from './task-errors.js';

const NEVER = new AbortController().signal;

/**
 * A batch's rows were refused for good: finds the first record the store refuses, writing the batch
 * again in prefixes, in order (a job may build on what it stored before: the alert counts), by
 * halving — so that the stop names one record, not a batch. The records before it end up stored
 * (again: writes are idempotent); nothing after it is written. A record an operator quarantined by
 * hand (`exactlyonce quarantine add`: reason `refused`) is passed over, and the search goes on with
 * the records after it: returns those written then. The error names the batch when the refusal is
 * of records together (a batch's size) or is gone.
 */
export async function writeAroundRefused(ctx: TaskContext, partition: number, decoded: readonly DecodedRecord<unknown>[], cause: unknown): Promise<ExactlyOnceError | { written: DecodedRecord<unknown>[] }> {
  const written: DecodedRecord<unknown>[] = [];
  let rest = decoded;
  let error = cause;
  for (;;) {
    const at = await firstRefused(ctx, partition, rest, error);
    if (at instanceof ExactlyOnceError) return at;
    const offset = rest[at.index]!.record.offset;
    if ((await ctx.withRetry(() => ctx.quarantine.reasonOf(partition, offset))) !== HAND_QUARANTINE_REASON) {
      return permanentError(partition, at.error, { first: offset, last: offset });
    }
    ctx.log.warn({ partition, offset: String(offset) }, `partition ${partition}: offset ${offset}, refused by the store, is quarantined by hand: going on without it`);
    written.push(...rest.slice(0, at.index));
    rest = rest.slice(at.index + 1);
    if (rest.length === 0) return { written };
    const e = await writeOnly(ctx, partition, rest);
    if (e === null) return { written: [...written, ...rest] };
    error = e;
  }
}

/** Writes `records` (retrying what a retry may fix); the error that refused them for good, or null. */
function writeOnly(ctx: TaskContext, partition: number, records: readonly DecodedRecord<unknown>[]): Promise<unknown> {
  return ctx
    .withRetry(() => ctx.job.write(partition, records, ctx.signal ?? NEVER))
    .then(
      () => null,
      (e: unknown) => {
        if (abortedBy(e, ctx.signal)) throw e;
        return e;
      },
    );
}

/** The first of `records` the store refuses alone (see writeAroundRefused), with its error; the batch's error when none does. */
async function firstRefused(ctx: TaskContext, partition: number, records: readonly DecodedRecord<unknown>[], cause: unknown): Promise<ExactlyOnceError | { index: number; error: unknown }> {
  const batch = { first: records[0]!.record.offset, last: records[records.length - 1]!.record.offset };
  // Invariant: records [0, lo) are stored; the prefix up to `hi` was refused (with `error`).
  let lo = 0;
  let hi = records.length;
  let error: unknown = cause;
  let alone = records.length === 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    const e = await writeOnly(ctx, partition, records.slice(lo, mid));
    if (e === null) lo = mid;
    else [hi, error, alone] = [mid, e, mid === lo + 1];
  }
  // Refused alone, or the refusal was of several records together (a batch's size), or is gone.
  if (!alone) {
    const e = await writeOnly(ctx, partition, records.slice(lo, lo + 1));
    if (e === null) return permanentError(partition, cause, batch);
    error = e;
  }
  return { index: lo, error };
}

/** Counts a batch's quarantined records by reason, and says so in one log line per batch. */
export function reportQuarantined(ctx: TaskContext, partition: number, bad: readonly QuarantineEntry[]): void {
  const reasons: Record<string, number> = {};
  for (const b of bad) {
    ctx.metrics.quarantined.inc({ partition: String(partition), reason: b.reason });
    reasons[b.reason] = (reasons[b.reason] ?? 0) + 1;
  }
  // One line per batch, not per record; `exactlyonce quarantine list` shows each record.
  ctx.log.warn(
    { partition, offsets: bad.map((b) => String(b.record.offset)).slice(0, 20), reasons },
    `quarantined ${bad.length} record${bad.length === 1 ? '' : 's'} of partition ${partition}`,
  );
}
