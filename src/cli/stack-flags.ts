/**
 * The flags of the local stack (`stack up|down|status|logs`) and the options they give. The stack
 * directory and ports are bound to EXACTLYONCE_STACK_DIR / _KAFKA_PORT / _CASSANDRA_PORT with
 * Commander's `Option.env()`; `demo` and `chaos`, which have no port flags, read the same variables
 * through `stackOptionsFrom`.
 */
import { Command, Option, type OptionValues } from '@commander-js/extra-typings';
import { intOption } from './flags.js';
import { CLUSTER_HEAP_MB, isCluster, readLayout } from '../stack/cluster.js';
import { defaultStackOptions, type StackOptions } from '../stack/index.js';

/** The stack flags' values as Commander leaves them (absent: the stack's default). */
export interface StackFlags {
  stackDir?: string;
  kafkaPort?: number;
  cassandraPort?: number;
  kafkaHeap?: number;
  cassandraHeap?: number;
  /** Seconds. */
  timeout?: number;
  cassandraNodes?: number;
  kafkaBrokers?: number;
  /** `stack up --schema-registry` / `--no-schema-registry`; absent: the layout's. */
  schemaRegistry?: boolean;
  registryPort?: number;
}

export function stackFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(cmd: Command<A, O, G>): Command<A, O & StackFlags, G> {
  const d = defaultStackOptions();
  cmd
    .addOption(new Option('--stack-dir <dir>', 'where the stack keeps jars, data and logs').env('EXACTLYONCE_STACK_DIR').default(d.dir, './.stack of the working directory'))
    .addOption(
      new Option('--kafka-port <port>', 'Kafka listener port on 127.0.0.1 (controller on port+1); broker i of a cluster: port + 20000 + 100·i').env('EXACTLYONCE_KAFKA_PORT').default(d.kafkaPort).argParser(intOption('--kafka-port', 1024, 65534)),
    )
    .addOption(new Option('--cassandra-port <port>', 'Cassandra CQL port on 127.0.0.1 (node i of a cluster: on 127.0.0.(1+i))').env('EXACTLYONCE_CASSANDRA_PORT').default(d.cassandraPort).argParser(intOption('--cassandra-port', 3066, 65535)))
    .addOption(
      new Option('--registry-port <port>', 'Schema Registry HTTP port on 127.0.0.1 (its management interface on port+1), with --schema-registry')
        .env('EXACTLYONCE_REGISTRY_PORT')
        .default(d.registryPort)
        .argParser(intOption('--registry-port', 1024, 65534)),
    )
    .addOption(new Option('--kafka-heap <mb>', `Kafka heap in MiB, per broker (default: ${d.kafkaHeapMb}, ${CLUSTER_HEAP_MB.kafka} in a cluster)`).argParser(intOption('--kafka-heap', 256, 16384)))
    .addOption(new Option('--cassandra-heap <mb>', `Cassandra heap in MiB, per node (default: ${d.cassandraHeapMb}, ${CLUSTER_HEAP_MB.cassandra} in a cluster)`).argParser(intOption('--cassandra-heap', 512, 16384)))
    .addOption(new Option('--timeout <s>', 'start-up deadline in seconds').default(d.startTimeoutMs / 1000).argParser(intOption('--timeout', 10, 3600)));
  return cmd as unknown as Command<A, O & StackFlags, G>;
}

/** The stack's options from its flags; what a flag leaves out comes from the environment, then the default. */
export function stackOptionsFrom(flags: StackFlags, env: NodeJS.ProcessEnv = process.env): StackOptions {
  const num = (flag: number | undefined, name: string): number | undefined => flag ?? (env[name] !== undefined ? intOption(name, 1, 65535)(env[name]!) : undefined);
  const o: Partial<StackOptions> = {};
  const dir = flags.stackDir ?? env['EXACTLYONCE_STACK_DIR'];
  if (dir !== undefined) o.dir = dir;
  const kafkaPort = num(flags.kafkaPort, 'EXACTLYONCE_KAFKA_PORT');
  if (kafkaPort !== undefined) o.kafkaPort = kafkaPort;
  const cassandraPort = num(flags.cassandraPort, 'EXACTLYONCE_CASSANDRA_PORT');
  if (cassandraPort !== undefined) o.cassandraPort = cassandraPort;
  const registryPort = num(flags.registryPort, 'EXACTLYONCE_REGISTRY_PORT');
  if (registryPort !== undefined) o.registryPort = registryPort;
  // The layout: the flags of `stack up`, else the one the stack was last started with (cluster.json).
  const layout = o.dir === undefined ? readLayout(defaultStackOptions().dir) : readLayout(o.dir);
  o.cassandraNodes = flags.cassandraNodes ?? layout?.cassandraNodes ?? 1;
  o.kafkaBrokers = flags.kafkaBrokers ?? layout?.kafkaBrokers ?? 1;
  o.schemaRegistry = flags.schemaRegistry ?? layout?.registryPort !== undefined;
  const cluster = isCluster({ cassandraNodes: o.cassandraNodes, kafkaBrokers: o.kafkaBrokers });
  if (flags.kafkaHeap !== undefined) o.kafkaHeapMb = flags.kafkaHeap;
  else if (cluster) o.kafkaHeapMb = CLUSTER_HEAP_MB.kafka;
  if (flags.cassandraHeap !== undefined) o.cassandraHeapMb = flags.cassandraHeap;
  else if (cluster) o.cassandraHeapMb = CLUSTER_HEAP_MB.cassandra;
  if (flags.timeout !== undefined) o.startTimeoutMs = flags.timeout * 1000;
  o.onProgress = (line) => process.stderr.write(`  ${line}\n`);
  return defaultStackOptions(o);
}
