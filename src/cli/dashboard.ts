/** `exactlyonce dashboard`: a live web page of the pipeline, fed by the workers' /metrics and by Cassandra. */
import { hostname } from 'node:os';
import { Command, Option } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { ExactlyOnceError } from '../errors.js';
import { startDashboard } from '../dashboard/dashboard.js';
import { DEFAULT_SCRAPE_ALLOW } from '../dashboard/scrape.js';
import { accessNotice } from '../engine/http-access.js';
import { action, connection, withConnection } from './common.js';

function addressList(value: string): string[] {
  const list = value.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const bad = list.filter((a) => !/^[A-Za-z0-9.-]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/.test(a));
  if (list.length === 0 || bad.length > 0) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--worker-metrics: expected host:port[,host:port…] (got '${value}')`);
  }
  return list;
}

function hostList(value: string): string[] {
  const list = value.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  const bad = list.filter((h) => !/^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[?[0-9a-fA-F:]+\]?(:\d{1,5})?$/.test(h));
  if (list.length === 0 || bad.length > 0) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--scrape-allow: expected host[,host…] (got '${value}')`);
  return list;
}

function renamedWorkers(value: string): never {
  throw new ExactlyOnceError('EO_USAGE', `--workers is now --worker-metrics (workers' metrics addresses): run \`dashboard --worker-metrics ${value}\``);
}

export function dashboardCommand(): Command {
  return withConnection(
    new Command('dashboard')
      .description("serve a live page: throughput, lag per partition, who owns what, quarantine, latest alerts, last verify (workers found through --worker-metrics and the keyspace's workers table)")
      .addOption(new Option('--port <port>', 'HTTP port (0: any free port)').default(8090).argParser(intOption('--port', 0, 65535)))
      .addOption(
        new Option('--host <address>', 'address to listen on (0.0.0.0: every interface; beyond loopback a token is required, from EXACTLYONCE_HTTP_TOKEN_FILE or EXACTLYONCE_HTTP_TOKEN)').default('127.0.0.1'),
      )
      .addOption(new Option('--worker-metrics <list>', "workers' metrics addresses host:port[,…] (their --metrics-port), besides those that register themselves").default([], 'none').argParser(addressList))
      .addOption(
        new Option('--scrape-allow <hosts>', 'hosts (or host:port) of self-registered workers that are sent the token (EXACTLYONCE_HTTP_TOKEN[_FILE]); others are scraped without it')
          .default(DEFAULT_SCRAPE_ALLOW, DEFAULT_SCRAPE_ALLOW.join(','))
          .argParser(hostList),
      )
      // The old name of --worker-metrics: elsewhere --workers is a count (chaos, demo, bench).
      .addOption(new Option('--workers <list>').hideHelp().argParser(renamedWorkers))
      .addOption(new Option('--interval-ms <ms>', 'how often the workers are scraped').default(1000).argParser(intOption('--interval-ms', 200, 60000))),
    ['brokers', 'cassandra', 'datacenter', 'keyspace', 'topic', 'group', 'cassandraUsername', 'cassandraPassword', 'kafkaConfig'],
  ).action(
    action(async (opts, cmd) => {
      const config = connection(cmd);
      const host = opts.host;
      const dashboard = await startDashboard(config, {
        port: opts.port,
        host,
        workerMetrics: opts.workerMetrics,
        scrapeAllow: opts.scrapeAllow,
        intervalMs: opts.intervalMs,
      });
      const url = host === '0.0.0.0' || host === '::' ? dashboard.url.replace(/\/\/[^/]+:/, `//${hostname()}:`) : dashboard.url;
      process.stdout.write(`dashboard: ${url}  (keyspace ${config.keyspace}, topic ${config.topic}; Ctrl-C stops it)\n`);
      process.stdout.write(`access: ${accessNotice(dashboard.access)}${dashboard.access.token === undefined ? '' : `; in a browser open ${url}?token=<token> once`}\n`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await dashboard.close();
      return 0;
    }),
  );
}
