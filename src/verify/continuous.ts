/**
 * A continuous audit (`verify --every <duration>`): an audit every period, each continuing the last
 * one's proof (src/verify/proof-plan.ts), so each round checks only what the workers stored since.
 * Each round is recorded (audit_runs, the proof) and exported (src/verify/audit-metrics.ts).
 *
 * Nothing fails in silence, and nothing is said twice: a violation is logged at error level, with
 * EO_VERIFY_FAILED, the first round it is found — not every round it is found again (a violation
 * stops its partition's proof, so the next rounds find it again until it is repaired). A round that
 * cannot complete because a server is down is logged once when that starts and once when it ends; a
 * failure no retry fixes (another job's settings, a missing table) ends the audit with its code.
 */
import { describe, ExactlyOnceError } from '../errors.js';
import { isRetriable } from '../engine/retry.js';
import type { Logger } from '../log.js';
import type { AuditMetrics } from './audit-metrics.js';
import type { AuditReport, Violation } from './report.js';

/** Violations already logged, at most (beyond it, new ones are still counted and logged, but none is remembered). */
const REMEMBERED = 100_000;

/** What identifies one violation across rounds: its kind and where (partition/offset, or its alert window). */
export function violationId(v: Violation): string {
  return v.alert === undefined ? `${v.kind}|${v.where ?? ''}|${v.partition ?? ''}|${v.offset ?? ''}` : `${v.kind}|${v.where ?? ''}|${v.alert.source}|${v.alert.ts}`;
}

/** The violations of a round not logged by an earlier one. */
export class ViolationNotices {
  private readonly seen = new Set<string>();

  fresh(r: AuditReport): Violation[] {
    const out: Violation[] = [];
    for (const v of r.violations) {
      const id = violationId(v);
      if (this.seen.has(id)) continue;
      if (this.seen.size < REMEMBERED) this.seen.add(id);
      out.push(v);
    }
    return out;
  }
}

export interface ContinuousOptions {
  /** From the start of one round to the start of the next, ms (a longer round is followed at once). */
  everyMs: number;
  log: Logger;
  metrics: AuditMetrics;
  /** Ends the audit after the round in progress. */
  signal: AbortSignal;
  /** Each completed round's report (the CLI prints a line). */
  onReport?: (r: AuditReport, round: number) => void;
}

/** Runs `round` every period until the signal; throws only what no retry fixes. */
export async function auditContinuously(round: (n: number) => Promise<AuditReport>, o: ContinuousOptions): Promise<void> {
  const notices = new ViolationNotices();
  let failing: string | undefined;
  for (let n = 1; !o.signal.aborted; n++) {
    const started = Date.now();
    try {
      const r = await round(n);
      if (failing !== undefined) o.log.info({ round: n }, `audit rounds complete again (after: ${failing})`);
      failing = undefined;
      o.metrics.completed(r);
      o.onReport?.(r, n);
      const fresh = notices.fresh(r);
      for (const v of fresh) o.log.error({ code: 'EO_VERIFY_FAILED', round: n, violation: v }, v.message);
      if (r.violationTotal > r.violations.length) {
        o.log.error({ code: 'EO_VERIFY_FAILED', round: n, violations: r.violationTotal }, `${r.violationTotal - r.violations.length} more violation(s) than listed this round (\`exactlyonce verify --json\` lists the first ${r.violations.length})`);
      }
    } catch (e) {
      o.metrics.failed();
      if (!isRetriable(e)) throw e;
      const what = describe(e);
      if (failing === undefined) o.log.error({ code: e instanceof ExactlyOnceError ? e.code : undefined, round: n }, `audit round failed, retried every ${o.everyMs / 1000} s: ${what}`);
      else o.log.debug({ round: n }, what);
      failing = what;
    }
    const wait = Math.max(0, o.everyMs - (Date.now() - started));
    await new Promise<void>((resolve) => {
      if (o.signal.aborted) return resolve();
      const t = setTimeout(done, wait);
      function done() {
        clearTimeout(t);
        o.signal.removeEventListener('abort', done);
        resolve();
      }
      o.signal.addEventListener('abort', done);
    });
  }
}
