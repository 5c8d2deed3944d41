/**
 * Rows a job reads back that lack a cell its own writes always set together (a partial count without
 * its offset). Such an answer is either put together from replicas in the middle of a recovery (make
 * cluster-test met one right after two nodes came back, gone a few seconds later: read again, as for a
 * node that does not answer), or a row changed outside the workers (a cell deleted or nulled by hand),
 * which no read fixes: once the row has been incomplete for INCOMPLETE_ROW_STOP_MS, the partition
 * stops, coded, instead of retrying for good. Used by the events job's alert counts and by the
 * aggregation's partials (src/jobs/events/alerts.ts, src/jobs/sink/sink-aggregate.ts).
 */
import { ExactlyOnceError } from '../errors.js';

/** How long a row may be read back incomplete before its partition stops (EO_PERMANENT_ERROR): well past a recovery's torn answers. */
export const INCOMPLETE_ROW_STOP_MS = 60_000;

export class IncompleteRows {
  /** Since when (ms) each row, by its key, has been read incomplete. */
  private readonly since = new Map<string, number>();

  /**
   * The row `key` was read incomplete: throws EO_CASSANDRA_UNAVAILABLE (`retry`, retriable) while it
   * may heal, EO_PERMANENT_ERROR (`stop(seconds)`) once it has been incomplete for INCOMPLETE_ROW_STOP_MS.
   */
  refuse(key: string, retry: string, stop: (seconds: number) => string): never {
    const since = this.since.get(key) ?? Date.now();
    this.since.set(key, since);
    if (Date.now() - since >= INCOMPLETE_ROW_STOP_MS) {
      this.since.delete(key);
      throw new ExactlyOnceError('EO_PERMANENT_ERROR', stop(Math.round((Date.now() - since) / 1000)));
    }
    throw new ExactlyOnceError('EO_CASSANDRA_UNAVAILABLE', retry);
  }

  /** The row `key` was read whole: a later incomplete read counts from then. */
  whole(key: string): void {
    this.since.delete(key);
  }
}
