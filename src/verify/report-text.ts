/** The human summary of an audit (`verify`, `chaos`), and the error a failed one ends with. */
import type { AuditReport } from './report.js';
import { ExactlyOnceError } from '../errors.js';
import { formatTable } from '../text-table.js';

const n = (x: number | string) => (typeof x === 'number' ? x.toLocaleString('en-US') : BigInt(x).toLocaleString('en-US'));

/** The human summary: one line per partition, the alerts, the explained gaps, the first violations. */
export function formatReport(r: AuditReport, listed = 20): string {
  const out: string[] = [];
  const incremental = r.mode === 'incremental';
  if (!incremental) out.push(`verify: topic ${r.topic} against keyspace ${r.keyspace}, every offset from the log start up to the stored checkpoints (full)`);
  else {
    const since = r.continues === null ? '' : ` (run ${r.continues.runId ?? '?'}${r.continues.at === null ? '' : ` at ${r.continues.at}`})`;
    const skipped = r.partitions.reduce((a, p) => a + (BigInt(p.checkedFrom) - BigInt(p.logStart)), 0n);
    out.push(
      `verify: topic ${r.topic} against keyspace ${r.keyspace}, INCREMENTAL: each partition from where the last recorded proof ended${since} up to the stored checkpoints ("checked from" below).`,
      `  The ${n(String(skipped))} offset(s) below were proved by earlier runs and were NOT checked again by this one; \`verify --full\` checks everything.`,
    );
  }
  const row = (p: { partition: number | string; logStart: string; checkedFrom: string; checkpoint: string | null; logEnd: string; lag: string; records: number; stored: number; quarantined: number; missing: number; extra: number; mismatched: number; gapOffsets: number }) => [
    p.partition, p.logStart, p.checkedFrom, p.checkpoint ?? '-', p.logEnd, n(p.lag), n(p.records), n(p.stored), n(p.quarantined), n(p.missing), n(p.extra), n(p.mismatched), n(p.gapOffsets),
  ];
  const rows = r.partitions.map((p) => row({ ...p, gapOffsets: p.gaps.offsets }));
  for (const u of r.unknownPartitions) rows.push([`${u.partition}?`, '-', '-', u.checkpoint ?? '-', '-', '-', '0', '0', '0', '0', n(u.events + u.quarantine), '0', '0']);
  const t = r.totals;
  rows.push(['total', '', '', '', '', n(t.lag), n(t.records), n(t.stored), n(t.quarantined), n(t.missing), n(t.extra), n(t.mismatched), n(t.gapOffsets)]);
  out.push(formatTable(['partition', 'log start', 'checked from', 'checkpoint', 'log end', 'lag', 'records', 'stored', 'quarantined', 'missing', 'extra', 'mismatched', 'gaps'], rows));
  if (incremental) {
    for (const p of r.partitions) if (p.startedOver !== null) out.push(`partition ${p.partition}: checked from the log start: ${p.startedOver}`);
  }
  for (const u of r.unknownPartitions) out.push(`partition ${u.partition}?: not a partition of the topic, yet has ${u.events} events rows, ${u.quarantine} quarantine rows${u.checkpoint === null ? '' : `, checkpoint ${u.checkpoint}`}`);
  for (const p of r.partitions) {
    if (p.gaps.offsets > 0) {
      out.push(
        `partition ${p.partition}: ${n(p.gaps.offsets)} offset(s) in ${p.gaps.ranges} gap(s) the broker does not return (transaction markers, aborted transactions, compaction) — not a loss; e.g. ${p.gaps.examples.join(', ')}`,
      );
    }
    if (BigInt(p.logStart) > 0n && (!incremental || p.belowLogStart > 0)) {
      out.push(`partition ${p.partition}: offsets 0..${BigInt(p.logStart) - 1n} were deleted by retention; ${n(p.belowLogStart)} row(s) stored for them are kept and not checked`);
    }
    if (p.skipped !== undefined) {
      const what: Record<string, string> = { filtered: "filtered by the job's rule", expired: 'expired (their TTL passed)' };
      out.push(`partition ${p.partition}: no row, rightly, for ${Object.entries(p.skipped).map(([why, c]) => `${n(c)} ${what[why] ?? why}`).join(', ')}`);
    }
    if (p.aheadOfCheckpoint > 0) out.push(`partition ${p.partition}: ${n(p.aheadOfCheckpoint)} row(s) beyond the checkpoint (batches in flight; checked once checkpointed)`);
  }
  for (const note of r.notes ?? []) out.push(note);
  const a = r.alerts;
  if (a === null) {
    out.push('alerts: not checked (--skip-alerts)');
  } else {
    const side = (s: typeof a.table) =>
      s.exists ? `found ${n(s.found)}${s.messages === undefined ? '' : ` (latest of ${n(s.messages)} messages)`}, wrong ${n(s.missing + s.extra + s.count + s.malformed)} (missing ${s.missing}, extra ${s.extra}, count ${s.count}${s.malformed > 0 ? `, malformed ${s.malformed}` : ''})` : 'topic does not exist';
    const scope = a.incremental
      ? `${n(a.windows)} window(s) judged: those the new records and the new alert messages fall in (the others were proved before and not checked again); expected ${n(a.expected)} alert(s) among them`
      : `every window judged; expected ${n(a.expected)}`;
    out.push(
      `alerts (window ${a.rule.windowMs} ms, slide ${a.rule.slideMs} ms, threshold ${a.rule.threshold}, health ${a.rule.health}): ${scope}`,
      `  table ${a.table.name}: ${side(a.table)}`,
      `  topic ${a.topic.name}: ${side(a.topic)}`,
    );
    if (!a.settled) {
      out.push(
        `  not settled: ${a.pendingWindows > 0 ? `${n(a.pendingWindows)} window(s) hold` : 'there are too many'} records at or beyond the checkpoints (lag or batches in flight), so their alerts may still change; ${n(a.unsettled)} difference(s) in them not counted as violations (the next run judges them once checkpointed)`,
      );
    }
  }
  if (r.violationTotal > 0) {
    const kinds = Object.entries(r.violationCounts).filter(([, c]) => c > 0).map(([k, c]) => `${k} ${n(c)}`).join(', ');
    out.push(`VIOLATIONS: ${n(r.violationTotal)} (${kinds})`);
    for (const v of r.violations.slice(0, listed)) out.push(`  ${v.message}`);
    if (r.violationTotal > listed) out.push(`  … and ${n(r.violationTotal - listed)} more (--json lists the first ${r.violations.length})`);
  } else {
    const what = incremental ? 'every offset checked (from "checked from" up to the checkpoints)' : 'every offset up to the checkpoints';
    out.push(`OK: ${what} is stored exactly once with the record's values${a === null ? '' : a.settled ? `; the alerts of the ${a.incremental ? 'windows judged' : 'windows'} equal their recomputation` : '; the settled alerts equal their recomputation'}`);
  }
  out.push(`checked ${n(r.totals.records)} records in ${(r.durationMs / 1000).toFixed(1)} s (${n(r.recordsPerSecond)} records/s, peak RSS ${r.peakRssMb} MiB)${r.proofRecorded ? '; proof recorded for the next run' : ''}`);
  return out.join('\n');
}

/** One line per round of `verify --every`: what was checked, the verdict, how far the proof is behind. */
export function formatRound(r: AuditReport, round: number): string {
  const proved = r.partitions.reduce((a, p) => a + BigInt(p.provedTo), 0n);
  const checkpoints = r.partitions.reduce((a, p) => a + BigInt(p.checkpoint ?? p.logStart), 0n);
  const behind = checkpoints > proved ? checkpoints - proved : 0n;
  const verdict = r.ok ? 'OK' : `VIOLATIONS ${n(r.violationTotal)} (${Object.entries(r.violationCounts).filter(([, c]) => c > 0).map(([k, c]) => `${k} ${n(c)}`).join(', ')})`;
  const alerts = r.alerts === null ? '' : `, ${n(r.alerts.windows)} alert window(s) judged${r.alerts.settled ? '' : ` (${n(r.alerts.pendingWindows)} still changing)`}`;
  return (
    `round ${round} (${r.startedAt}, ${r.mode}): checked ${n(r.totals.records)} ${r.mode === 'incremental' ? 'new ' : ''}records${alerts} in ${(r.durationMs / 1000).toFixed(1)} s: ${verdict}; ` +
    `proof ${behind === 0n ? 'at the checkpoints' : `${n(String(behind))} offset(s) behind the checkpoints`}`
  );
}

export function verifyFailed(r: AuditReport, extra = ''): ExactlyOnceError {
  const kinds = Object.entries(r.violationCounts).filter(([, c]) => c > 0).map(([k, c]) => `${k} ${c}`).join(', ');
  return new ExactlyOnceError('EO_VERIFY_FAILED', `${r.violationTotal} violation(s) of exactly-once (${kinds}); first: ${r.violations[0]?.message ?? '?'}${extra}`);
}
