/**
 * The flags of the job's settings (the alert rule, and the record size limit), shared by `run`,
 * `verify` and `alerts rule`. Their values are the job's: a command started without one uses the
 * value stored with the job (src/jobs/events/event-job.ts), so which flags were given matters, not only values.
 */
import { Command, Option, type CommandUnknownOpts, type OptionValues } from '@commander-js/extra-typings';
import type { AlertRule } from '../jobs/events/alert-rule.js';
import { DEFAULT_EVENT_JOB_SETTINGS, parseSettings, SETTING_FLAGS, storedSettings, type EventJobSettings, type SettingFlag } from '../jobs/events/event-job.js';
import type { HealthCode } from '../jobs/events/event.js';
import type { Settings } from '../engine/job-binding.js';
import { intOption } from './flags.js';

const defaults = storedSettings(DEFAULT_EVENT_JOB_SETTINGS);

/**
 * The setting flags' values as Commander leaves them (whole numbers; absent for `alerts rule` when not
 * given). A command reads them through `settingFlags`, which also tells which were given explicitly.
 */
export interface SettingFlagValues {
  maxRecordBytes?: number;
  windowMs?: number;
  slideMs?: number;
  threshold?: number;
  alertHealth?: number;
}

/** A setting's flag; `withDefault` false for `alerts rule`, where a flag left out keeps the job's value. */
export function settingOption<F extends SettingFlag>(flag: F, help: string, withDefault = true): Option<`--${F} <${string}>`, undefined, number | undefined, number> {
  const b = SETTING_FLAGS[flag];
  const o = new Option(`--${flag} <${flag === 'alert-health' ? 'h' : flag.endsWith('-ms') ? 'ms' : 'n'}>`, help).argParser(intOption(`--${flag}`, b.min, b.max));
  return (withDefault ? o.default(defaults[flag]) : o) as Option<`--${F} <${string}>`, undefined, number | undefined, number>;
}

export function withAlertRule<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  cmd: Command<A, O, G>,
  withDefault = true,
): Command<A, O & Omit<SettingFlagValues, 'maxRecordBytes'>, G> {
  const job = withDefault ? "; left out: the job's stored value (a new job: the default)" : "; left out: the job's value is kept";
  cmd
    .addOption(settingOption('window-ms', `alert window size in event time (ms)${job}`, withDefault))
    .addOption(settingOption('slide-ms', `distance between window starts (ms); < window for sliding windows${job}`, withDefault))
    .addOption(settingOption('threshold', `events per source and window that raise an alert${job}`, withDefault))
    .addOption(settingOption('alert-health', `the health level counted (0, 1 or 2)${job}`, withDefault));
  return cmd as unknown as Command<A, O & Omit<SettingFlagValues, 'maxRecordBytes'>, G>;
}

/**
 * The setting flags of a parsed command: every value it has (defaults included) as stored settings,
 * and which of them were given explicitly (commander's value source is not 'default').
 */
export function settingFlags(cmd: CommandUnknownOpts): { values: Settings; explicit: Set<string> } {
  const opts = cmd.opts();
  const values: Record<string, number> = {};
  const explicit = new Set<string>();
  for (const [flag, { option }] of Object.entries(SETTING_FLAGS)) {
    const v = opts[option] as number | undefined;
    if (v === undefined) continue;
    values[flag] = v;
    const source = cmd.getOptionValueSource(option);
    if (source !== undefined && source !== 'default') explicit.add(flag);
  }
  return { values, explicit };
}

/** The flags' values as settings, not validated yet (they may only make sense merged with the job's). */
export function unvalidatedSettings(values: Settings): EventJobSettings {
  const n = (flag: SettingFlag) => values[flag] as number;
  return {
    maxRecordBytes: n('max-record-bytes'),
    rule: { windows: { sizeMs: n('window-ms'), slideMs: n('slide-ms') }, threshold: n('threshold'), health: n('alert-health') as HealthCode },
  };
}

/** The rule the flags alone give (defaults included), validated; for commands that start a fresh job (`chaos`). */
export function alertRuleFrom(opts: SettingFlagValues): AlertRule {
  const values: Record<string, number> = { ...defaults } as Record<string, number>;
  for (const [flag, { option }] of Object.entries(SETTING_FLAGS)) {
    const v = opts[option];
    if (v !== undefined) values[flag] = v;
  }
  return parseSettings(values).rule;
}
