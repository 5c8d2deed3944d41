/** `exactlyonce chaos --json` run to completion by a test, with the checks every chaos run must pass (chaos.test.ts, sink-chaos.test.ts). */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import type { TestContext } from 'node:test';
import { artifactsDir, BROKERS, CASSANDRA, runCli } from './helpers.js';

/** The figures line (`{"seed":…}`) a chaos run prints last. */
export interface ChaosFigures {
  seed: number;
  events: number;
  injected: number;
  records: number;
  faults: Record<string, number>;
  /** `--transactional`: the generator's transactions by outcome. */
  transactions: { committed: number; aborted: number; unknown: number } | null;
  checkpointRegressions: string[];
  /** Checkpoints that went back with a Cassandra crash, and the workers' EO_WRITES_LOST lines. */
  checkpointLosses: string[];
  rewinds: number;
  /** `--transition-crashes`: the transitions Cassandra was SIGKILLed right after, and those not seen in time. */
  transitions: { struck: string[]; missed: string[] };
  violations: number;
  problems: string[];
  wallMs: number;
  keyspace: string;
  topic: string;
  runDir: string;
}

/**
 * Runs `chaos args… --json` against the test stack (15 minutes at most), shows its summary lines as the
 * test's diagnostics, and asserts it passed: exit 0, no violation, no problem, no checkpoint that went back.
 */
export async function runChaos(t: TestContext, args: string[], env: Record<string, string> = {}): Promise<ChaosFigures> {
  const r = await runCli(['chaos', '--brokers', BROKERS, '--cassandra', CASSANDRA, '--json', ...args], env, 15 * 60_000);
  // The whole run's output, for a check of the test's own that fails after chaos passed (its folder of worker logs is gone then).
  const seed = args[args.indexOf('--seed') + 1];
  writeFileSync(`${artifactsDir(t)}/chaos-${args.includes('--seed') ? `seed-${seed}` : Date.now()}.log`, `${r.stdout}\n--- stderr:\n${r.stderr}`);
  const summary = r.stdout.split('\n').filter((l) => /^job |^chaos seed|^ {2}(records|transactions|faults|checkpoints|violations):|^ {4}(problem|warning):|^checked|^\[chaos.*job /.test(l)).join('\n');
  t.diagnostic(summary);
  // The verdict first (a log printer that shortens long messages keeps their head), then the tails.
  const verdict = r.stdout.split('\n').filter((l) => /^ {4}(problem|warning):|^ {2}violations:|EO_[A-Z_]+|^FAIL|violation/.test(l)).slice(-40).join('\n');
  assert.equal(r.code, 0, `chaos failed:\n${verdict}\n${r.stderr.slice(-3000)}\n--- the run's last output:\n${r.stdout.slice(-6000)}`);
  const figures = JSON.parse(r.stdout.trim().split('\n').filter((l) => l.startsWith('{"seed"')).pop()!) as ChaosFigures;
  assert.equal(figures.violations, 0);
  assert.deepEqual(figures.problems, []);
  assert.deepEqual(figures.checkpointRegressions, []);
  return figures;
}
