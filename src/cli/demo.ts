/** `exactlyonce demo`: its flags; the run itself is src/harness/demo.ts. */
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { runDemo } from '../harness/demo.js';
import { action } from './common.js';
import { stackOptionsFrom } from './stack-flags.js';

export function demoCommand(): Command {
  return new Command('demo')
    .description('run the pipeline on the local stack: 2 workers, the live dashboard and the original generator; then events stored per partition, alerts, verify')
    .addOption(new Option('--workers <n>', 'worker processes').default(2).argParser(intOption('--workers', 1, 16)))
    .addOption(new Option('--events-per-key <n>', "the generator's events per client").default(200).argParser(intOption('--events-per-key', 1, 1e9)))
    .addOption(new Option('--dashboard-port <port>', 'dashboard port (the next free one if taken)').default(8090).argParser(intOption('--dashboard-port', 1024, 65535)))
    .addOption(new Option('--metrics-port <port>', "first worker's metrics port; the others take the next free ones").default(9101).argParser(intOption('--metrics-port', 1024, 65535)))
    .addOption(new Option('--keep', 'leave the local stack running at the end (the default)'))
    .addOption(new Option('--stop-stack', 'stop the local stack at the end').conflicts('keep'))
    .option('--stay', 'after the run, keep the workers and the dashboard up until Ctrl-C (the default on a terminal)')
    .option('--no-stay', 'exit once the run is verified (the default when not on a terminal)')
    .action(action((opts) => runDemo({ ...opts, stack: stackOptionsFrom({}) })));
}
