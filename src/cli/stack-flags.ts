/**
 * The flags of the local stack (`stack up|down|status|logs`) and the options they give, with the
 * EXACTLYONCE_STACK_DIR / _KAFKA_PORT / _CASSANDRA_PORT environment: also what `demo` and `chaos` use.
 */
import { Command, Option } from 'commander';
import { intOption } from '../config.js';
import { defaultStackOptions, type StackOptions } from '../stack/index.js';

export function stackFlags(cmd: Command): Command {
  return cmd
    .addOption(new Option('--stack-dir <dir>', 'where the stack keeps jars, data and logs (env EXACTLYONCE_STACK_DIR, default <repo>/.stack)'))
    .addOption(new Option('--kafka-port <port>', 'Kafka listener port on 127.0.0.1 (controller on port+1)').argParser(intOption('--kafka-port', 1024, 65534)))
    .addOption(new Option('--cassandra-port <port>', 'Cassandra CQL port on 127.0.0.1').argParser(intOption('--cassandra-port', 3066, 65535)))
    .addOption(new Option('--kafka-heap <mb>', 'Kafka heap in MiB').argParser(intOption('--kafka-heap', 256, 16384)))
    .addOption(new Option('--cassandra-heap <mb>', 'Cassandra heap in MiB').argParser(intOption('--cassandra-heap', 512, 16384)))
    .addOption(new Option('--timeout <seconds>', 'start-up deadline in seconds').argParser(intOption('--timeout', 10, 3600)));
}

export function stackOptionsFrom(opts: Record<string, unknown>): StackOptions {
  const env = process.env;
  const num = (flag: unknown, name: string): number | undefined =>
    typeof flag === 'number' ? flag : env[name] !== undefined ? intOption(name, 1, 65535)(env[name]!) : undefined;
  const o: Partial<StackOptions> = {};
  const dir = (opts['stackDir'] as string | undefined) ?? env['EXACTLYONCE_STACK_DIR'];
  if (dir !== undefined) o.dir = dir;
  const kafkaPort = num(opts['kafkaPort'], 'EXACTLYONCE_KAFKA_PORT');
  if (kafkaPort !== undefined) o.kafkaPort = kafkaPort;
  const cassandraPort = num(opts['cassandraPort'], 'EXACTLYONCE_CASSANDRA_PORT');
  if (cassandraPort !== undefined) o.cassandraPort = cassandraPort;
  if (typeof opts['kafkaHeap'] === 'number') o.kafkaHeapMb = opts['kafkaHeap'];
  if (typeof opts['cassandraHeap'] === 'number') o.cassandraHeapMb = opts['cassandraHeap'];
  if (typeof opts['timeout'] === 'number') o.startTimeoutMs = opts['timeout'] * 1000;
  o.onProgress = (line) => process.stderr.write(`  ${line}\n`);
  return defaultStackOptions(o);
}
