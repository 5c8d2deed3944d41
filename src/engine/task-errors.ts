/**
 * The errors the engine's roles share about a partition (so that no role imports another for them):
 * why a checkpoint cannot be read from, a write that failed for good, and a checkpoint found lost.
 */
import { ExactlyOnceError, isExactlyOnceError } from '../errors.js';
import { checkpointTimestamp, type StoredCheckpoint } from './checkpoint-store.js';

/** Whether `stored` is below the checkpoint `acked` that a task of reset epoch `epoch` saw acknowledged (docs/design.md §6). */
export function isLost(stored: StoredCheckpoint | undefined | null, epoch: number, acked: bigint | null): boolean {
  if (acked === null) return false;
  if (stored === undefined || stored === null) return true;
  return checkpointTimestamp(stored.epoch, stored.next) < checkpointTimestamp(epoch, acked);
}

/** Thrown inside a batch's write or checkpoint write that found the stored checkpoint lower than one acknowledged before. */
export class LostWritesFound extends Error {
  constructor(
    readonly stored: StoredCheckpoint | null,
    readonly acked: bigint,
  ) {
    super(`stored checkpoint ${stored === null ? 'none' : String(stored.next)} is below ${acked}, written and acknowledged before`);
    this.name = 'LostWritesFound';
  }
}

export function outOfRange(partition: number, checkpoint: bigint, where: 'below' | 'beyond', bound: bigint): ExactlyOnceError {
  const message =
    where === 'beyond'
      ? `partition ${partition}: checkpoint ${checkpoint} is beyond the log end ${bound} (was the topic deleted and re-created?). ` +
        'The partition is stopped and nothing is skipped; see `exactlyonce checkpoints list`. To read this log from its start, run ' +
        `\`exactlyonce checkpoints reset --partition ${partition} --to earliest\` (workers pick it up while running).`
      : `partition ${partition}: checkpoint ${checkpoint} is below the log start ${bound}: records ${checkpoint}..${bound - 1n} ` +
        'were deleted (retention) before they were processed. The partition is stopped; raise the topic\'s retention, and ' +
        `to accept the loss, run \`exactlyonce checkpoints reset --partition ${partition} --to earliest\` (workers pick it up while running).`;
  return new ExactlyOnceError('EO_CHECKPOINT_OUT_OF_RANGE', message);
}

/** An error no retry can fix, as the coded error that stops a partition (with the server's own words). */
export function permanentError(partition: number, e: unknown, offsets?: { first: bigint; last: bigint }): ExactlyOnceError {
  if (isExactlyOnceError(e) && !e.retriable) return e;
  let what = e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e);
  // The driver re-prepares a statement the server forgot; when that fails too, the server's answer
  // is the bare "Prepared query … not found" (0x2500): say what it means.
  if (/Prepared query with ID \w+ not found/.test(what)) what = 'a statement no longer prepares: a table or column it uses was altered or dropped';
  return new ExactlyOnceError(
    'EO_PERMANENT_ERROR',
    `partition ${partition}: a write ${offsets === undefined ? '' : offsets.first === offsets.last ? `of the record at offset ${offsets.first} ` : `of offsets ${offsets.first}..${offsets.last} `}failed for good (${what}); retrying cannot fix it. ` +
      'The partition is stopped at its checkpoint and nothing is skipped; fix the cause (schema, permissions, sizes), then restart the worker' +
      (offsets !== undefined && offsets.first === offsets.last
        ? `. To go on without that record instead, quarantine it by hand: \`exactlyonce quarantine add --partition ${partition} --offset ${offsets.first}\` (workers pick it up while running; \`verify\` counts it as quarantined by hand)`
        : ''),
    { cause: e },
  );
}

/**
 * The error as a job other than the events job must read it: the operator commands it names address
 * the events job unless given `--job`, so `--job <name>` is put in each (`exactlyonce checkpoints …`,
 * `exactlyonce quarantine add`).
 */
export function forJob(error: ExactlyOnceError, job: string | undefined): ExactlyOnceError {
  if (job === undefined || !/`exactlyonce (checkpoints|quarantine) /.test(error.message)) return error;
  const message = error.message.replace(/`exactlyonce (checkpoints reset|checkpoints list|quarantine add)/g, `\`exactlyonce $1 --job ${job}`);
  return new ExactlyOnceError(error.code, message, { cause: error.cause ?? error, ...(error.details === undefined ? {} : { details: error.details }) });
}
