/**
 * Apache Kafka 4 in KRaft combined mode (broker + controller in one JVM), single node, 127.0.0.1 only.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ExactlyOnceError } from '../errors.js';
import type { StackOptions } from './options.js';
import { serverPaths, serverVersion } from './paths.js';
import { javaCommand } from './fetch.js';
import { lastLines, run } from './process.js';
import { kafkaReady } from './ready.js';
import { formatSecureKafka, isSecure, kafkaSecureProperties, kafkaTlsReady, setupKafka } from './secure.js';
import type { KafkaNode } from './cluster.js';
import { serverPorts, stackTags, type ServerSpec } from './server.js';

/** The single broker (no `node`), or one broker of a KRaft cluster (cluster.ts gives its id, ports, voters, replication). */
export function kafkaServer(o: StackOptions, node?: KafkaNode): ServerSpec {
  const id = node?.id ?? 'kafka';
  const p = serverPaths(o.dir, id);
  const port = node?.port ?? o.kafkaPort;
  const controllerPort = port + 1;
  const rf = node?.replication ?? 1;
  const minIsr = node?.minIsr ?? 1;
  const properties = path.join(p.conf, 'server.properties');
  const log4j = path.join(p.conf, 'log4j2.xml');

  const serverProperties = `# Written by exactlyonce stack on every start; edit src/stack/kafka-server.ts instead.
process.roles=broker,controller
node.id=${node?.nodeId ?? 1}
listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}
advertised.listeners=PLAINTEXT://127.0.0.1:${port},CONTROLLER://127.0.0.1:${controllerPort}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
controller.listener.names=CONTROLLER
# A static voter set (not --standalone's dynamic quorum): the voter address lives in this file, not
# in the metadata log, so changing --kafka-port later keeps working with the same data.
controller.quorum.voters=${node?.voters ?? `1@127.0.0.1:${controllerPort}`}
log.dirs=${p.data}
${
  node === undefined
    ? '# One node: every internal topic has one replica.'
    : `# A cluster: internal topics on ${rf} brokers; a write needs ${minIsr} in sync.\ndefault.replication.factor=${rf}\nmin.insync.replicas=${minIsr}`
}
offsets.topic.replication.factor=${rf}
transaction.state.log.replication.factor=${rf}
transaction.state.log.min.isr=${minIsr}
share.coordinator.state.topic.replication.factor=${rf}
share.coordinator.state.topic.min.isr=${minIsr}
# Fewer internal partitions than the default 50: the first group join / transactional producer
# creates them, which on a 2-core machine is seconds of test time for nothing.
offsets.topic.num.partitions=8
transaction.state.log.num.partitions=8
share.coordinator.state.topic.num.partitions=8
# Tests join groups constantly; the default 3 s delay before the first rebalance only slows them.
group.initial.rebalance.delay.ms=0
# Let crash tests use short session timeouts (default floor 6 s) to notice a SIGKILLed worker sooner.
group.min.session.timeout.ms=1000
${
  node === undefined
    ? `# After a SIGKILL the restarted broker cannot register until its old session expires (default 9 s);
# crash tests kill Kafka, so expire sooner. Controller and broker share the JVM: heartbeats are local.
broker.session.timeout.ms=4000
broker.heartbeat.interval.ms=1000`
    : `# The defaults: with heartbeats going to another JVM's controller, 4000/1000 fenced live brokers under load.
broker.session.timeout.ms=9000
broker.heartbeat.interval.ms=2000
# A broker SIGKILLed and started again must register with the active controller and catch up with the
# metadata log before this deadline, or it exits ("fatal error while waiting for the controller to
# acknowledge that we are caught up"; default 60 s). On a loaded 2-core machine a restarted active
# controller took longer (the quorum elects a new leader while the JVMs compete for the cores); the
# stack also starts a broker again that exits during start-up (src/stack/stack.ts).
initial.broker.registration.timeout.ms=300000`
}
# Topics are created explicitly through the Admin API, so a typo cannot create a stray topic.
auto.create.topics.enable=false
`;

  // Console only: the process's stdout/stderr go to logs/kafka.log (see spawnDetached).
  const log4jXml = `<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="warn">
  <Appenders>
    <Console name="out" target="SYSTEM_OUT"><PatternLayout pattern="[%d] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Root level="info"><AppenderRef ref="out"/></Root>
    <!-- The full config dump (hundreds of lines per start) is in conf/kafka/server.properties anyway. -->
    <Logger name="org.apache.kafka.common.config.AbstractConfig" level="warn"/>
    <Logger name="kafka.request.logger" level="warn"/>
  </Loggers>
</Configuration>
`;

  // JVM options shared by the broker and the one-off storage format tool.
  const jvm = (lib: string): string[] => [
    '-XX:+ExitOnOutOfMemoryError', // a dead broker is easier to diagnose than a thrashing one
    `-Djava.io.tmpdir=${p.tmp}`,
    `-Dlog4j2.configurationFile=${log4j}`,
    '-cp',
    `${lib}/*`,
  ];

  return {
    name: 'kafka',
    id,
    host: '127.0.0.1',
    version: serverVersion('kafka'),
    port,
    ports: serverPorts('--kafka-port', port, { port: controllerPort, role: 'the Kafka controller, --kafka-port + 1' }),
    stopGraceMs: 60_000,
    async prepare(lib) {
      await Promise.all([p.conf, p.data, p.tmp, path.dirname(p.logFile)].map((d) => mkdir(d, { recursive: true })));
      // Secured, the listener lines are replaced and the file holds passwords: only its owner may read it.
      const secured = isSecure(o)
        ? serverProperties.split('\n').filter((l) => !/^(listeners|advertised\.listeners|listener\.security\.protocol\.map|inter\.broker\.listener\.name)=/.test(l)).join('\n') + kafkaSecureProperties(o)
        : serverProperties;
      await writeFile(properties, secured, { mode: 0o600 });
      await writeFile(log4j, log4jXml);
      // KRaft needs its log dir formatted once; meta.properties (written last by the format) holds
      // the random cluster id from then on.
      if (existsSync(path.join(p.data, 'meta.properties'))) return;
      o.onProgress?.(`formatting ${node === undefined ? 'Kafka' : id} storage (first start)…`);
      // Kafka's Uuid format: 22 chars; never starting with '-', which the format tool would read as an option.
      let clusterId = node?.clusterId() ?? '';
      while (clusterId === '' || clusterId.startsWith('-')) clusterId = randomBytes(16).toString('base64url');
      if (isSecure(o) && node === undefined) return formatSecureKafka(o, lib, clusterId, properties); // with the SCRAM users
      const r = await run(javaCommand(), ['-Xmx256m', ...jvm(lib), 'kafka.tools.StorageTool', 'format', '-t', clusterId, '-c', properties]);
      await appendFile(p.logFile, r.output);
      if (r.code !== 0) {
        throw new ExactlyOnceError('EO_SERVER_EXITED', `formatting Kafka storage in ${p.data} failed (exit ${r.code})`, { details: lastLines(r.output, 20) });
      }
    },
    javaArgs: (lib) => [`-Xms${o.kafkaHeapMb}m`, `-Xmx${o.kafkaHeapMb}m`, ...jvm(lib), ...stackTags(path.resolve(o.dir), id, port), 'kafka.Kafka', properties],
    probe: () => (isSecure(o) && node === undefined ? kafkaTlsReady(o) : kafkaReady(port)),
    afterReady: (lib) => (isSecure(o) && node === undefined ? setupKafka(o, lib, o.startTimeoutMs) : Promise.resolve()),
  };
}
