/** `exactlyonce stack up | down | status | logs`: the local Kafka + Cassandra servers. */
import path from 'node:path';
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { ExactlyOnceError } from '../errors.js';
import { formatTable } from '../text-table.js';
import { clusterDefaults, stackNodes } from '../stack/cluster.js';
import { COMMITLOG_SYNCS, isSecure, secureSummary, stackCommitlogPeriodMs, stackCommitlogSync, stackDown, stackLogs, stackStatus, stackUp, stopServer, type ServerStatus, type StackOptions } from '../stack/index.js';
import { registryUrl } from '../stack/registry-server.js';
import { stackDirServing } from '../stack/find-stack.js';
import { action } from './common.js';
import { stackFlags, stackOptionsFrom } from './stack-flags.js';

/** One line: the commit log the stack's Cassandra runs with, and what it means. */
function commitlogLine(o: StackOptions, servers: readonly ServerStatus[]): string {
  const nodes = servers.filter((s) => s.name === 'cassandra');
  const modes = [...new Set(nodes.map((s) => stackCommitlogSync(o, s.id) ?? 'periodic'))];
  const periods = [...new Set(nodes.map((s) => stackCommitlogPeriodMs(o, s.id) / 1000))];
  const what = modes.includes('periodic')
    ? `synced every ${periods.join(' / ')} s: a crashed node forgets recent acknowledged writes, which workers find and write again`
    : 'synced before each acknowledgement';
  return `Cassandra commit log: ${modes.join(', ')} (${what}; \`stack up --commitlog periodic|batch\` on a stopped stack to change it)\n`;
}

function printStatus(servers: ServerStatus[]): void {
  process.stdout.write(
    formatTable(
      ['server', 'version', 'pid', 'address', 'running', 'ready', 'log'],
      servers.map((s) => [s.id, s.version, s.pid ?? '-', `${s.host}:${s.port}`, s.running ? 'yes' : 'no', s.ready ? 'yes' : 'no', s.logFile]),
    ) + '\n',
  );
}

export function stackCommand(): Command {
  const stack = new Command('stack').description('run a local Kafka + Cassandra for development and tests (no Docker)');

  stackFlags(
    stack
      .command('up')
      .description('fetch the servers from Maven Central if needed, start them, wait until ready (reuses running ones)')
      .addOption(
        new Option('--commitlog <mode>', "Cassandra's commit log sync: periodic (Cassandra's default, synced every 10 s) or batch (synced before each acknowledgement); applies to nodes started now (default: the mode a node last ran with, else periodic)").choices(COMMITLOG_SYNCS),
      )
      .addOption(new Option('--commitlog-sync-period-ms <ms>', "the periodic commit log's sync period: a longer one widens the window of acknowledged writes a crashed node forgets (chaos and the loss tests use 60000); applies to nodes started now (default: the period a node last ran with, else Cassandra's 10000)").argParser(intOption('--commitlog-sync-period-ms', 100, 3_600_000)))
      .option('--secure', 'TLS and authentication on both servers: a local CA, Cassandra TLS + passwords + grants, Kafka SASL_SSL (SCRAM-SHA-512) + ACLs; the stack dir stays secured (one node and one broker only)')
      .addOption(new Option('--cassandra-nodes <n>', 'Cassandra nodes in one ring, node i on 127.0.0.(1+i) (default: 1, or the layout the stack was last started with)').argParser(intOption('--cassandra-nodes', 1, 9)))
      .addOption(new Option('--kafka-brokers <n>', 'Kafka brokers (each also a KRaft controller) in one cluster (default: 1, or the layout the stack was last started with)').argParser(intOption('--kafka-brokers', 1, 9)))
      .option('--schema-registry', 'a Schema Registry beside them (Apicurio Registry, Confluent-compatible API; needs Java 21+), for Avro, Protobuf and JSON Schema topics; kept in the layout: later `stack up`s start it too')
      .option('--no-schema-registry', 'stop starting the Schema Registry with this stack (its schemas stay in the stack dir)'),
  ).action(
    action(async (opts) => {
      const o = { ...stackOptionsFrom(opts), secure: opts.secure === true, ...(opts.commitlog === undefined ? {} : { commitlogSync: opts.commitlog }), ...(opts.commitlogSyncPeriodMs === undefined ? {} : { commitlogSyncPeriodMs: opts.commitlogSyncPeriodMs }) };
      // Leaving the registry out of the layout: stop it if it runs, so the stack matches the layout.
      if (opts.schemaRegistry === false) await stopServer(o, 'registry');
      const r = await stackUp(o);
      const secs = (r.elapsedMs / 1000).toFixed(1);
      process.stdout.write(
        r.started.length === 0
          ? `stack already up (checked in ${secs}s)\n`
          : `stack up: started ${r.started.join(', ').replace(/, ([^,]*)$/, ' and $1')} in ${secs}s\n`,
      );
      process.stdout.write(`  jars, data and logs in ${path.resolve(o.dir)} (--stack-dir, EXACTLYONCE_STACK_DIR)\n`);
      const servers = await stackStatus(o);
      const kept = servers.filter((s) => s.name === 'cassandra' && o.commitlogSync !== undefined && stackCommitlogSync(o, s.id) !== o.commitlogSync);
      if (kept.length > 0) process.stdout.write(`  ${kept.map((s) => s.id).join(', ')} kept running with its commit log; run \`exactlyonce stack down\` first to start it with --commitlog ${o.commitlogSync}\n`);
      process.stdout.write(`  ${commitlogLine(o, servers)}`);
      if (isSecure(o)) {
        process.stdout.write(`${(await secureSummary(o)).join('\n')}\n`);
        return;
      }
      const cluster = clusterDefaults(o.dir);
      if (cluster === null) {
        process.stdout.write(`  Kafka      127.0.0.1:${o.kafkaPort}    (--brokers 127.0.0.1:${o.kafkaPort})\n`);
        process.stdout.write(`  Cassandra  127.0.0.1:${o.cassandraPort}    (--cassandra 127.0.0.1:${o.cassandraPort})\n`);
      } else {
        for (const n of stackNodes(o).filter((x) => x.kind !== 'registry')) process.stdout.write(`  ${n.id.padEnd(11)}${n.host}:${n.port}\n`);
        process.stdout.write(`  the other commands default to this cluster while EXACTLYONCE_STACK_DIR points here: --brokers ${cluster.brokers} --cassandra ${cluster.cassandra}\n`);
      }
      if (o.schemaRegistry) process.stdout.write(`  Schema Registry ${registryUrl(o.registryPort)}    (--schema-registry-url ${registryUrl(o.registryPort)})\n`);
    }),
  );

  stackFlags(stack.command('down').description('stop every server of the stack cleanly (idempotent)')).action(
    action(async (opts) => {
      const r = await stackDown(stackOptionsFrom(opts));
      process.stdout.write(r.stopped.length === 0 ? 'stack was not running\n' : `stopped ${r.stopped.join(', ').replace(/, ([^,]*)$/, ' and $1')}\n`);
    }),
  );

  stackFlags(stack.command('status').description('show each server: pid, port, readiness (of the stack in --stack-dir; without it, of ./.stack, else of the stack serving the ports)')).action(
    action(async (opts, cmd) => {
      let o = stackOptionsFrom(opts);
      let servers = await stackStatus(o);
      // None of ./.stack's servers runs: the ports may be served by a stack started elsewhere. Not when
      // a folder was named (--stack-dir, EXACTLYONCE_STACK_DIR): that stack is the one asked about, and
      // scripts tell from the exit code whether it runs (make cluster-test, with-stack.sh).
      const named = cmd.getOptionValueSource('stackDir') !== 'default';
      const elsewhere = named || servers.some((s) => s.running) ? undefined : stackDirServing(o.kafkaPort) ?? stackDirServing(o.cassandraPort);
      if (elsewhere !== undefined && path.resolve(elsewhere) !== path.resolve(o.dir)) {
        process.stdout.write(
          `no stack runs from ${path.resolve(o.dir)} (./.stack of the working directory; --stack-dir or EXACTLYONCE_STACK_DIR point elsewhere); ` +
            `the one serving 127.0.0.1:${o.kafkaPort} is in ${elsewhere} (commands here use it; for \`stack\` commands: --stack-dir ${elsewhere})\n`,
        );
        o = { ...o, dir: elsewhere };
        servers = await stackStatus(o);
      }
      process.stdout.write(`stack in ${path.resolve(o.dir)}\n`);
      printStatus(servers);
      process.stdout.write(commitlogLine(o, servers));
      process.stdout.write(isSecure(o) ? `${(await secureSummary(o)).join('\n')}\n` : 'not secured: plaintext, no authentication (`stack up --secure` on a new --stack-dir for TLS and logins)\n');
      return servers.every((s) => s.ready) ? 0 : 1;
    }),
  );

  stackFlags(
    stack
      .command('logs')
      .description("show the tail of a server's log")
      .argument('<server>', 'kafka, cassandra or registry; in a cluster kafka1…, cassandra1…')
      .addOption(new Option('-n, --lines <n>', 'how many lines').default(50).argParser(intOption('--lines', 1, 100000))),
  ).action(
    action(async (server, opts) => {
      const o = stackOptionsFrom(opts);
      const ids = stackNodes(o).map((n) => n.id);
      if (!ids.includes(server)) throw new ExactlyOnceError('EO_USAGE', `server: expected ${ids.join(', ')} (got '${server}')`);
      process.stdout.write((await stackLogs(o, server, opts.lines)).replace(/\n?$/, '\n'));
    }),
  );
  return stack;
}
