/**
 * `exactlyonce demo`: the whole pipeline on the local stack. Brings the stack up, applies the schema,
 * creates the topic, starts two workers and the original generator, waits until every partition's
 * checkpoint reaches the log end, and prints the events stored per partition. Ctrl-C stops what it
 * started; the stack stays up (stop it with `exactlyonce stack down`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { applySchema } from '../cassandra/migrate.js';
import { connect } from '../cassandra/session.js';
import { intOption, loadConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { CheckpointStore } from '../engine/checkpoint-store.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { stackUp } from '../stack/index.js';
import { action, formatTable } from './common.js';
import { stackOptionsFrom } from './stack.js';

const cli = fileURLToPath(new URL('../../bin/exactlyonce', import.meta.url));

export function demoCommand(): Command {
  return new Command('demo')
    .description('run the pipeline on the local stack: 2 workers + the original generator, then events stored per partition')
    .addOption(new Option('--workers <n>', 'worker processes').default(2).argParser(intOption('--workers', 1, 16)))
    .addOption(new Option('--events-per-key <n>', "the generator's events per client").default(200).argParser(intOption('--events-per-key', 1, 1e9)))
    .action(
      action(async (opts: Record<string, unknown>) => {
        const out = (s: string) => process.stdout.write(s + '\n');
        const stack = stackOptionsFrom({});
        const up = await stackUp(stack);
        out(`stack: Kafka 127.0.0.1:${stack.kafkaPort}, Cassandra 127.0.0.1:${stack.cassandraPort} (${up.started.length ? `started in ${(up.elapsedMs / 1000).toFixed(1)}s` : 'already up'})`);
        const config = loadConnectionConfig({ brokers: `127.0.0.1:${stack.kafkaPort}`, cassandra: `127.0.0.1:${stack.cassandraPort}` }, {});
        const session = await connect(config);
        const admin = new KafkaAdmin(config);
        const children: ChildProcess[] = [];
        const stopAll = () => children.forEach((c) => c.exitCode === null && c.kill('SIGTERM'));
        process.once('SIGINT', () => {
          out('\nstopping the workers and the generator (the stack stays up)…');
          stopAll();
          process.exitCode = 130;
        });
        try {
          await applySchema(session, config.keyspace, { class: 'SimpleStrategy', replicationFactor: 1 });
          const topic = await admin.ensureTopic({ topic: config.topic, partitions: 3, replicationFactor: 1 });
          out(`schema ${config.keyspace} applied; topic ${config.topic} (${topic.partitions} partitions)`);
          const args = ['--brokers', config.brokers.join(','), '--cassandra', config.cassandra.join(',')];
          for (let i = 0; i < (opts['workers'] as number); i++) {
            children.push(spawn(cli, ['run', ...args], { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, EXACTLYONCE_LOG_LEVEL: 'warn' } }));
          }
          out(`started ${children.length} workers; running the generator (3 clients × ${opts['eventsPerKey'] as number} events, a 500 ms pause every 10 rounds)…`);
          const gen = spawn(cli, ['generate', '--brokers', config.brokers.join(','), '--events-per-key', String(opts['eventsPerKey'])], { stdio: 'inherit' });
          children.push(gen);
          const code = await new Promise<number | null>((r) => gen.on('exit', (c) => r(c)));
          if (code !== 0) throw new ExactlyOnceError('EO_PRODUCE_FAILED', `the generator exited with ${code}`);

          const checkpoints = new CheckpointStore(session, config.keyspace, config.topic);
          const marks = await admin.watermarks(config.topic);
          for (;;) {
            const cps = await checkpoints.readAll();
            const behind = marks.reduce((n, w) => n + Number(w.high - (cps.get(w.partition) ?? w.low)), 0);
            if (behind === 0) break;
            process.stderr.write(`\rwaiting for the workers: ${behind} records behind `);
            await new Promise((r) => setTimeout(r, 250));
          }
          process.stderr.write('\n');
          const rows: unknown[][] = [];
          for (const w of marks) {
            const r = await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.events WHERE partition = ?`, [w.partition], { prepare: true });
            const q = await session.execute(`SELECT COUNT(*) AS n FROM ${config.keyspace}.quarantine WHERE partition = ?`, [w.partition], { prepare: true });
            rows.push([w.partition, String(r.first()['n']), String(q.first()['n']), String(w.high)]);
          }
          out('\n' + formatTable(['partition', 'events stored', 'quarantined', 'log end offset'], rows));
          out(`\nexplore: bin/exactlyonce cql "SELECT * FROM events LIMIT 10"   stop the stack: bin/exactlyonce stack down`);
        } finally {
          stopAll();
          await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.on('exit', r)) : undefined)));
          await admin.close();
          await session.shutdown();
        }
      }),
    );
}
