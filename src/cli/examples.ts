/**
 * One or two examples per command, shown at the end of its `--help` (Commander's addHelpText('after')).
 * Kept in one table so every command has them and a test can run them through `--help` parsing
 * (test/integration/newcomer.test.ts checks that each flag named here exists).
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { cliCommand } from '../package-root.js';

const EXAMPLES: Readonly<Record<string, readonly string[]>> = {
  setup: ['setup                                          # check the Kafka client, build it when needed'],
  'stack up': ['stack up                                       # Kafka 127.0.0.1:9092, Cassandra 127.0.0.1:9042, in ./.stack', 'stack up --schema-registry                     # and a Schema Registry on 127.0.0.1:8081'],
  'stack down': ['stack down                                     # stop the servers of ./.stack'],
  'stack status': ['stack status', 'stack status --stack-dir ~/shop/.stack'],
  'stack logs': ['stack logs cassandra -n 100'],
  'schema apply': ['schema apply                                   # the events job\'s tables', 'schema apply --keyspace shop --job orders.yaml  # a sink\'s table (or your job\'s), in keyspace shop'],
  'topic create': ['topic create --partitions 3                    # the events topic and the alerts topic', 'topic create --topic shop.orders --no-alerts   # only a sink\'s input topic'],
  'topic produce': ['topic produce --topic shop.orders --key 1 \'{"id":1,"customer":"ada","total":"9.90"}\''],
  generate: ['generate                                       # the original generator: 3 clients x 200 events', 'generate --count 10000 --rate 500 --seed 7'],
  run: ['run --metrics-port 9464                        # a worker of the events job', 'run --job job.ts --metrics-port 9465          # a worker of your own job'],
  sink: ['sink --config orders.yaml --print-cql          # the table\'s CQL', 'sink --config orders.yaml --keyspace shop --metrics-port 9464'],
  'alerts rule': ['alerts rule --threshold 20 --dry-run            # what a new rule would change'],
  'quarantine list': ['quarantine list --job orders.yaml --partition 0'],
  'quarantine redrive': ['quarantine redrive --job orders.yaml --reason bad_value --dry-run'],
  'quarantine add': ['quarantine add --job orders.yaml --partition 2 --offset 4810 --detail "note too long for its index"'],
  'checkpoints list': ['checkpoints list --job orders.yaml'],
  'checkpoints reset': ['checkpoints reset --job orders.yaml --all --to 2026-01-31T12:00:00Z --dry-run', 'checkpoints reset --partition 2 --to latest'],
  status: ['status', 'status --keyspace shop --json'],
  cql: ['cql "SELECT * FROM orders LIMIT 5" --keyspace shop', 'cql                                            # an interactive prompt'],
  dashboard: ['dashboard                                      # http://127.0.0.1:8090/', 'dashboard --port 8091 --worker-metrics 127.0.0.1:9464,127.0.0.1:9465'],
  demo: ['demo                                           # what `make demo` runs', 'demo --no-stay --stop-stack'],
  bench: ['bench --events 100000'],
  verify: ['verify                                         # the events job, from the last proof on', 'verify --job orders.yaml --keyspace shop --full'],
  chaos: ['chaos --events 20000 --kills 3 --seed 7', 'chaos --job orders.yaml --kills 2'],
};

/** A group's (`stack`, `topic`) and the program's: the first example of each of its commands. */
function groupExamples(path: string): readonly string[] {
  const prefix = path === '' ? '' : `${path} `;
  const subs = Object.keys(EXAMPLES).filter((p) => p.startsWith(prefix) && p !== path);
  const firstWords = new Set(subs.map((p) => p.slice(prefix.length).split(' ')[0]));
  return path === '' ? ['stack up', 'schema apply', 'run', 'verify'].map((p) => EXAMPLES[p]![0]!) : subs.filter((p) => firstWords.delete(p.slice(prefix.length))).map((p) => EXAMPLES[p]![0]!);
}

/** The examples of a command path ('stack up'; '' for the program), as `exactlyonce …` lines the way the user types the CLI here. */
export function examplesOf(path: string): string[] {
  return (EXAMPLES[path] ?? groupExamples(path)).map((e) => `  ${cliCommand} ${e}`);
}

/** Adds each command's examples to its --help, sub-commands included (and the program's own). */
export function withExamples(cmd: CommandUnknownOpts, parents: string[] = []): void {
  if (parents.length === 0) cmd.addHelpText('after', `\nExamples:\n${examplesOf('').join('\n')}`);
  for (const sub of cmd.commands) {
    const path = [...parents, sub.name()].join(' ');
    const lines = examplesOf(path);
    if (lines.length > 0) sub.addHelpText('after', `\nExamples:\n${lines.join('\n')}`);
    withExamples(sub, [...parents, sub.name()]);
  }
}

/** Every command path with examples, groups included (for the test that every command has some). */
export const EXAMPLE_PATHS = [...new Set(Object.keys(EXAMPLES).flatMap((p) => (p.includes(' ') ? [p.split(' ')[0]!, p] : [p])))];
