#!/usr/bin/env node
/** The `exactlyonce` command: one sub-command per file of this folder. */
import { readFileSync } from 'node:fs';
import { Command, CommanderError, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { alertsCommand } from './alerts.js';
import { benchCommand } from './bench.js';
import { reportError } from './common.js';
import { chaosCommand } from './chaos.js';
import { checkpointsCommand } from './checkpoints.js';
import { cqlCommand } from './cql.js';
import { dashboardCommand } from './dashboard.js';
import { demoCommand } from './demo.js';
import { generateCommand } from './generate.js';
import { quarantineCommand } from './quarantine.js';
import { runCommand } from './run.js';
import { schemaCommand } from './schema.js';
import { setupCommand } from './setup.js';
import { sinkCommand } from './sink.js';
import { stackCommand } from './stack.js';
import { statusCommand } from './status.js';
import { topicCommand } from './topic.js';
import { verifyCommand } from './verify.js';
import { withExamples } from './examples.js';
import { packageFile } from '../package-root.js';

const { version } = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string };

const program = new Command('exactlyonce')
  .description('Move events from Kafka into Cassandra exactly once, derive alerts, and prove it.')
  .version(`exactlyonce ${version}`, '-V, --version', 'print the version and exit')
  .showHelpAfterError('(run with --help for usage)')
  .exitOverride();

for (const cmd of [setupCommand(), stackCommand(), schemaCommand(), topicCommand(), generateCommand(), runCommand(), sinkCommand(), alertsCommand(), quarantineCommand(), checkpointsCommand(), statusCommand(), cqlCommand(), dashboardCommand(), demoCommand(), benchCommand(), verifyCommand(), chaosCommand()]) program.addCommand(cmd);

function exitOverrideAll(cmd: CommandUnknownOpts): void {
  cmd.exitOverride();
  cmd.showHelpAfterError('(run with --help for usage)');
  for (const sub of cmd.commands) exitOverrideAll(sub);
}
exitOverrideAll(program);
withExamples(program);

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    // Commander has already printed its one-line message (bad flag, missing argument, --help).
    process.exitCode = e.exitCode === 0 ? 0 : 2;
  } else {
    process.exitCode = reportError(e);
  }
}
