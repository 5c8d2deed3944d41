import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from '@commander-js/extra-typings';
import {
  DEFAULT_EVENT_JOB_SETTINGS,
  EventJob,
  parseSettings,
  resolveSettings,
  RULE_CHANGE_MARK,
  storedSettings,
  checkNoRuleChange,
} from '../../src/jobs/events/event-job.js';
import { settingFlags, settingOption, withAlertRule } from '../../src/cli/alert-flags.js';
import { checkSame, settingDifferences } from '../../src/engine/job-binding.js';
import { ExactlyOnceError } from '../../src/errors.js';

const defaults = storedSettings(DEFAULT_EVENT_JOB_SETTINGS);

test('the stored settings are keyed by the flag names and round-trip', () => {
  assert.deepEqual(defaults, { 'max-record-bytes': 65536, 'window-ms': 5000, 'slide-ms': 5000, threshold: 10, 'alert-health': 2 });
  assert.deepEqual(parseSettings(defaults), DEFAULT_EVENT_JOB_SETTINGS);
  const job = new EventJob({ maxRecordBytes: 2048, rule: { windows: { sizeMs: 10000, slideMs: 5000 }, threshold: 3, health: 1 } });
  assert.equal(job.name, 'events');
  assert.deepEqual(job.settings, { 'max-record-bytes': 2048, 'window-ms': 10000, 'slide-ms': 5000, threshold: 3, 'alert-health': 1 });
});

test('invalid stored or merged settings name the flag', () => {
  assert.throws(() => parseSettings({ ...defaults, threshold: 0 }, '; the job stored in keyspace k'), {
    code: 'EO_CONFIG_INVALID',
    message: '--threshold: expected a whole number from 1 to 2147483647 (got 0; the job stored in keyspace k)',
  });
  const { 'alert-health': _, ...noHealth } = defaults;
  assert.throws(() => parseSettings(noHealth), { message: '--alert-health: expected a whole number from 0 to 2 (got none)' });
  assert.throws(() => parseSettings({ ...defaults, 'slide-ms': 6000 }), {
    message: '--window-ms/--slide-ms: window slide must not exceed the window size (events would fall between windows) (got 5000/6000)',
  });
});

test("a flag left out takes the job's value; a flag given keeps its own (the job's check then refuses it if it differs)", () => {
  const stored = { ...defaults, 'max-record-bytes': 2048, 'window-ms': 10000 };
  const flags = { ...defaults, threshold: 3 };
  assert.deepEqual(resolveSettings(null, flags, new Set(['threshold'])), flags, 'no job yet: the flags, defaults included');
  assert.deepEqual(resolveSettings(stored, flags, new Set()), stored);
  assert.deepEqual(resolveSettings(stored, flags, new Set(['threshold'])), { ...stored, threshold: 3 });
  // A setting the job has that this version does not know is kept, so the comparison names it.
  assert.deepEqual(resolveSettings({ ...stored, future: 'x' }, flags, new Set()), { ...stored, future: 'x' });
});

test('the job check names each differing flag', () => {
  assert.deepEqual(settingDifferences({ ...defaults, 'max-record-bytes': 2048 }, { ...defaults, 'max-record-bytes': 4096, 'window-ms': 10000 }), [
    'max-record-bytes: the job has 2048, this worker 4096',
    'window-ms: the job has 5000, this worker 10000',
  ]);
  const job = { name: 'events', inputTopic: 't', outputTopics: ['a'], settings: defaults };
  assert.throws(() => checkSame(job, { ...job, settings: { ...defaults, threshold: 3 } }, 'ks', 'verify'), {
    code: 'EO_JOB_CONFIG_MISMATCH',
    message: /^verify differs from the job stored in keyspace ks: threshold: the job has 10, verify 3\. /,
  });
});

test('an unfinished rule change is refused by name', () => {
  checkNoRuleChange(null, 'ks', 'verify');
  checkNoRuleChange({ name: 'events', inputTopic: 't', inputTopicId: 'id', inputPartitions: 3, outputTopics: [], settings: defaults }, 'ks', 'verify');
  assert.throws(
    () => checkNoRuleChange({ name: 'events', inputTopic: 't', inputTopicId: 'id', inputPartitions: 3, outputTopics: [], settings: { ...defaults, [RULE_CHANGE_MARK]: 'started x' } }, 'ks', 'this worker'),
    (e: unknown) => e instanceof ExactlyOnceError && e.code === 'EO_JOB_CONFIG_MISMATCH' && e.message.startsWith('this worker cannot start: a change of the alert rule of keyspace ks is unfinished (started x)'),
  );
});

test('settingFlags tells the flags given from the defaults', () => {
  const parse = (args: string[], withDefault = true) => {
    const cmd = withAlertRule(new Command('x'), withDefault).addOption(settingOption('max-record-bytes', 'limit', withDefault)).exitOverride();
    cmd.parse(args, { from: 'user' });
    return settingFlags(cmd);
  };
  const none = parse([]);
  assert.deepEqual(none.values, defaults);
  assert.deepEqual([...none.explicit], []);
  const some = parse(['--window-ms', '5000', '--max-record-bytes', '4096']);
  assert.deepEqual(some.values, { ...defaults, 'max-record-bytes': 4096 });
  assert.deepEqual([...some.explicit].sort(), ['max-record-bytes', 'window-ms'], 'a default value given explicitly counts as given');
  const rule = parse(['--threshold', '3'], false);
  assert.deepEqual(rule.values, { threshold: 3 }, 'without defaults (alerts rule): only the flags given');
  assert.deepEqual([...rule.explicit], ['threshold']);
  assert.throws(() => parse(['--alert-health', '3']), { code: 'EO_CONFIG_INVALID', message: "--alert-health: expected a whole number from 0 to 2 (got '3')" });
});
