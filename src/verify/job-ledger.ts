/**
 * The offset ledger of any job that describes its output (`Job.audit`): per partition, each record's
 * expectation against the job's quarantine row of its offset and, in log mode, its table row (keyed
 * by partition and offset). In upsert mode the table is judged key by key (src/verify/upsert-audit.ts);
 * here only the quarantine is.
 */
import type { Row } from '../cassandra/session.js';
import type { Expectation } from '../engine/job-audit.js';
import { HAND_QUARANTINE_REASON } from '../engine/quarantine.js';
import { canonical } from '../jobs/sink/cql-types.js';
import { TTL_SLACK_MS } from './report.js';
import { OffsetLedger } from './ledger.js';
import type { ViolationKind, ViolationLog } from './report.js';

const text = (v: unknown) => JSON.stringify(canonical(v));

/** A record of the job's topic and what it must produce. */
export interface JobRecord {
  readonly offset: bigint;
  readonly e: Expectation;
}

/** A job's quarantine row. */
export interface JobQuarantineRow {
  readonly offset: bigint;
  readonly reason: string | null;
}

/** A log-mode table row. */
export interface JobTableRow {
  readonly offset: bigint;
  readonly row: Row;
}

export class JobLedger extends OffsetLedger<JobTableRow, JobQuarantineRow, JobRecord> {
  constructor(
    partition: number,
    from: bigint,
    violations: ViolationLog,
    private readonly o: { mode: 'log' | 'upsert'; table: string; valueColumns: readonly string[] },
  ) {
    super(partition, from, violations, [o.table, 'quarantine']);
  }

  private v(kind: ViolationKind, offset: bigint, message: string): void {
    this.violations.add({ kind, partition: this.partition, offset: String(offset), message: `partition ${this.partition} offset ${offset}: ${message}` });
  }

  protected judge(r: JobRecord, row: JobTableRow | undefined, q: JobQuarantineRow | undefined): void {
    const { e } = r;
    const table = this.o.table;
    if (q?.reason === HAND_QUARANTINE_REASON) {
      // An operator's decision (`quarantine add`: the store refused the record), accounted for as it is.
      this.quarantined++;
      this.reasons[q.reason] = (this.reasons[q.reason] ?? 0) + 1;
      return;
    }
    if (e.kind === 'none') {
      // Nothing by the job's rule (a filter): no row, no quarantine row.
      if (q !== undefined) {
        this.mismatched++;
        this.v('mismatch', r.offset, `quarantined (${q.reason}) though the job's rule leaves the record no row (${e.why})`);
      }
      if (row !== undefined) {
        this.extra++;
        this.v('extra', r.offset, `a ${table} row, though the job's rule leaves the record none (${e.why})`);
      }
      if (q === undefined && row === undefined) this.skipped[e.why] = (this.skipped[e.why] ?? 0) + 1;
      return;
    }
    if (e.kind === 'quarantine') {
      if (q === undefined) {
        this.missing++;
        this.v('missing', r.offset, `the record must be quarantined (${e.reason}) and is not`);
      } else if (q.reason !== e.reason) {
        this.mismatched++;
        this.v('mismatch', r.offset, `quarantined as ${q.reason}, the job says ${e.reason}`);
      } else {
        this.quarantined++;
        this.reasons[e.reason] = (this.reasons[e.reason] ?? 0) + 1;
      }
      if (row !== undefined) this.extraRow(table, r.offset, 'the record is quarantined');
      return;
    }
    if (q !== undefined) {
      this.mismatched++;
      this.v('quarantined_valid', r.offset, `quarantined (${q.reason}) though the job's record is valid`);
    }
    if (this.o.mode === 'upsert') {
      if (q === undefined) this.stored++;
      return;
    }
    if (row === undefined) {
      // A row whose TTL passed is gone (Cassandra expires it at or after record time + TTL).
      const expires = (e as { expiresAtMs?: number }).expiresAtMs;
      if (expires !== undefined && expires <= Date.now() + TTL_SLACK_MS) {
        if (q === undefined) this.skipped['expired'] = (this.skipped['expired'] ?? 0) + 1;
        return;
      }
      this.missing++;
      this.v('missing', r.offset, `no row in ${table}${expires === undefined ? '' : ` (its TTL runs until ${new Date(expires).toISOString()})`}`);
      return;
    }
    const want = (e as { row: Record<string, unknown> }).row;
    const diff = this.o.valueColumns.filter((c) => text(row.row[c]) !== text(want[c]));
    if (diff.length > 0) {
      this.mismatched++;
      this.v('mismatch', r.offset, diff.map((c) => `${c} is ${text(row.row[c])}, the record says ${text(want[c])}`).join('; '));
    } else if (q === undefined) this.stored++;
  }
}
