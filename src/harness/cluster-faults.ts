/**
 * Which servers a chaos server fault hits (src/harness/chaos-schedule.ts). On a single-node stack,
 * the one Kafka or the one Cassandra. On a cluster stack (src/stack/cluster.ts): a Cassandra node
 * drawn by the fault's pick; the Kafka broker leading the partition being read, or the active KRaft
 * controller; for an outage, two of the three Cassandra nodes (so no range keeps a LOCAL_QUORUM).
 */
import type { Fault } from './chaos-schedule.js';
import type { ConnectionConfig } from '../config.js';
import { KafkaAdmin } from '../kafka/admin.js';
import { activeController, isCluster } from '../stack/cluster.js';
import type { StackOptions } from '../stack/index.js';

/** The ids of the servers to SIGKILL (see stackNodes), with a phrase saying which they are. */
export async function faultTargets(
  stack: StackOptions,
  f: Extract<Fault, { kind: 'restart' | 'outage' }>,
  config: ConnectionConfig,
  partitions: number,
): Promise<{ ids: string[]; what: string }> {
  if (f.kind === 'outage') {
    if (stack.cassandraNodes !== 3) throw new Error(`an outage of two Cassandra nodes needs a 3-node stack (this one has ${stack.cassandraNodes})`);
    const keep = 1 + Math.floor(f.pick * 3);
    const ids = [1, 2, 3].filter((i) => i !== keep).map((i) => `cassandra${i}`);
    return { ids, what: `${ids.join(' and ')} (only cassandra${keep} left: no quorum)` };
  }
  if (!isCluster(stack) || f.server === 'registry') return { ids: [f.server], what: f.server };
  if (f.server === 'cassandra') {
    if (stack.cassandraNodes === 1) return { ids: ['cassandra'], what: 'cassandra' };
    const id = `cassandra${1 + Math.floor(f.pick * stack.cassandraNodes)}`;
    return { ids: [id], what: id };
  }
  if (stack.kafkaBrokers === 1) return { ids: ['kafka'], what: 'kafka' };
  if (f.role === 'controller') {
    const id = activeController(stack);
    if (id === null) throw new Error(`no broker of the stack at ${stack.dir} names an active controller (quorum-state)`);
    return { ids: [`kafka${id}`], what: `kafka${id} (the active controller)` };
  }
  const partition = Math.floor(f.pick * partitions);
  const admin = new KafkaAdmin(config);
  try {
    const leader = (await admin.leaders(config.topic)).get(partition);
    if (leader === undefined || leader < 0) throw new Error(`partition ${partition} of ${config.topic} has no leader to kill`);
    return { ids: [`kafka${leader}`], what: `kafka${leader} (leader of partition ${partition})` };
  } finally {
    await admin.close();
  }
}
