// The continuous audit (src/verify/continuous.ts): a violation is logged the first round it is
// found, not again each round that finds it; a round that fails for a server is logged when failing
// starts and when it ends, and one that no retry fixes ends the audit with its code.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AuditMetrics } from '../../src/verify/audit-metrics.js';
import { auditContinuously, ViolationNotices } from '../../src/verify/continuous.js';
import { buildReport, ViolationLog, type AuditReport, type Violation } from '../../src/verify/report.js';
import { ExactlyOnceError } from '../../src/errors.js';

function report(violations: Violation[]): AuditReport {
  const log = new ViolationLog();
  for (const v of violations) log.add(v);
  return buildReport({ started: Date.now(), runId: 'r', plan: [], proofRecorded: true, topic: 't', keyspace: 'k', partitions: [], violations: log });
}
const missing = (offset: number): Violation => ({ kind: 'missing', partition: 0, offset: String(offset), message: `partition 0 offset ${offset}: missing` });
const alert: Violation = { kind: 'alert_count', where: 'table', alert: { source: 's', ts: 5000, expected: 10, found: 9 }, message: 'alert s 5000: count 9' };

test('each violation is new once: by kind and partition/offset, or by alert window', () => {
  const n = new ViolationNotices();
  assert.deepEqual(n.fresh(report([missing(1), alert])).map((v) => v.message), ['partition 0 offset 1: missing', 'alert s 5000: count 9']);
  assert.deepEqual(n.fresh(report([missing(1), alert, missing(2)])).map((v) => v.message), ['partition 0 offset 2: missing']);
  assert.deepEqual(n.fresh(report([missing(2)])), []);
});

/** A logger that records what it is told, by level. */
function recorder() {
  const lines: Array<[string, string]> = [];
  const at = (level: string) => (o: unknown, msg?: string) => void lines.push([level, msg ?? String(o)]);
  return { lines, log: { info: at('info'), error: at('error'), debug: at('debug'), warn: at('warn') } as never };
}

test('rounds: a violation logged once at error level; an outage once when it starts and once when it ends; a refusal ends it', async () => {
  const { lines, log } = recorder();
  const stop = new AbortController();
  const rounds: Array<() => AuditReport> = [
    () => report([missing(7)]),
    () => report([missing(7)]),
    () => {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', 'Kafka did not answer');
    },
    () => {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', 'Kafka did not answer');
    },
    () => report([missing(7)]),
    () => {
      throw new ExactlyOnceError('EO_JOB_CONFIG_MISMATCH', 'other settings');
    },
  ];
  const metrics = new AuditMetrics();
  await assert.rejects(
    auditContinuously(async (n) => rounds[n - 1]!(), { everyMs: 1, log, metrics, signal: stop.signal }),
    (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_JOB_CONFIG_MISMATCH',
  );
  assert.deepEqual(
    lines.filter(([level]) => level !== 'debug'),
    [
      ['error', 'partition 0 offset 7: missing'],
      ['error', 'audit round failed, retried every 0.001 s: EO_KAFKA_UNAVAILABLE: Kafka did not answer'],
      ['info', 'audit rounds complete again (after: EO_KAFKA_UNAVAILABLE: Kafka did not answer)'],
    ],
  );
  const text = await metrics.registry.metrics();
  assert.match(text, /exactlyonce_verify_runs_total\{result="failed"\} 3/);
  assert.match(text, /exactlyonce_verify_runs_total\{result="error"\} 3/);
  assert.match(text, /exactlyonce_verify_violations\{kind="missing"\} 1/);
});
