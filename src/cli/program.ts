/**
 * The `exactlyonce` program and its commands. Building it parses nothing, connects to nothing and never
 * exits: src/cli/main.ts parses argv with it, and scripts/docs.ts prints every command's help into
 * docs/reference.md.
 */
import { readFileSync } from 'node:fs';
import { Command, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { alertsCommand } from './alerts.js';
import { benchCommand } from './bench.js';
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

function exitOverrideAll(cmd: CommandUnknownOpts): void {
  cmd.exitOverride();
  cmd.showHelpAfterError('(run with --help for usage)');
  for (const sub of cmd.commands) exitOverrideAll(sub);
}

/** The program with every command, their examples, and Commander's exits turned into CommanderErrors. */
export function buildProgram() {
  const { version } = JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string };
  const program = new Command('exactlyonce')
    .description('Move events from Kafka into Cassandra exactly once, derive alerts, and prove it.')
    .version(`exactlyonce ${version}`, '-V, --version', 'print the version and exit')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride();
  for (const cmd of [setupCommand(), stackCommand(), schemaCommand(), topicCommand(), generateCommand(), runCommand(), sinkCommand(), alertsCommand(), quarantineCommand(), checkpointsCommand(), statusCommand(), cqlCommand(), dashboardCommand(), demoCommand(), benchCommand(), verifyCommand(), chaosCommand()]) program.addCommand(cmd);
  exitOverrideAll(program);
  withExamples(program);
  return program;
}
