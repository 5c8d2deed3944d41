/** The alert rule's flags, shared by `run` and `verify` (both must use the same rule). */
import { Command, Option } from 'commander';
import { DEFAULT_ALERT_RULE, type AlertRule } from '../app/alert-rule.js';
import type { HealthCode } from '../app/event.js';
import { validateWindowSpec } from '../app/windows.js';
import { intOption } from '../config.js';
import { ExactlyOnceError } from '../errors.js';

export function withAlertRule(cmd: Command): Command {
  const d = DEFAULT_ALERT_RULE;
  return cmd
    .addOption(new Option('--window-ms <ms>', 'alert window size in event time (ms)').default(d.windows.sizeMs).argParser(intOption('--window-ms', 1, 86_400_000 * 365)))
    .addOption(new Option('--slide-ms <ms>', 'distance between window starts (ms); < window for sliding windows').default(d.windows.slideMs).argParser(intOption('--slide-ms', 1, 86_400_000 * 365)))
    .addOption(new Option('--threshold <n>', 'events per source and window that raise an alert').default(d.threshold).argParser(intOption('--threshold', 1, 2 ** 31 - 1)))
    .addOption(new Option('--alert-health <h>', 'the health level counted (0, 1 or 2)').default(d.health).argParser(intOption('--alert-health', 0, 2)));
}

export function alertRuleFrom(opts: Record<string, unknown>): AlertRule {
  const windows = { sizeMs: opts['windowMs'] as number, slideMs: opts['slideMs'] as number };
  const problem = validateWindowSpec(windows);
  if (problem !== undefined) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--window-ms/--slide-ms: ${problem} (got ${windows.sizeMs}/${windows.slideMs})`);
  }
  return { windows, threshold: opts['threshold'] as number, health: opts['alertHealth'] as HealthCode };
}
