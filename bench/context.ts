/**
 * What every case of one bench run shares: the base connection, one Cassandra session and one admin
 * client for set-up and polling, the abort signal of Ctrl-C, progress output, and a register of what
 * the run created (topics, keyspaces, processes) so that it is all removed however the run ends.
 */
import { randomBytes } from 'node:crypto';
import { applySchema, parseReplication } from '../src/cassandra/migrate.js';
import { connect, type Client } from '../src/cassandra/session.js';
import type { ConnectionConfig } from '../src/config.js';
import { describe } from '../src/errors.js';
import { KafkaAdmin } from '../src/kafka/admin.js';
import { localCluster } from '../src/stack/cluster.js';

/** On the local cluster stack (`stack up --cassandra-nodes 3 --kafka-brokers 3`), replicated as a cluster is (up to 3); else 1. */
const cluster = localCluster();
const KEYSPACE_REPLICATION = cluster === null ? ({ class: 'SimpleStrategy', replicationFactor: 1 } as const) : parseReplication(cluster.keyspaceReplication);
const TOPIC_REPLICATION = cluster?.topicReplication ?? 1;
import { bounded } from './abort.js';
import type { BenchOptions } from './options.js';
import { cpuSeconds, type BenchProcess } from './processes.js';

// The run's stop helpers, for the cases and bench/commitlog-runs.ts, which import them along with the context.
export { BenchAborted, bounded, pause } from './abort.js';

/** A signal that never fires: for clean-up, which must run even after Ctrl-C. */
const NEVER = new AbortController().signal;

export class BenchContext {
  /** Random part of every name this run creates, so runs never collide with each other or with tests. */
  readonly runId = randomBytes(3).toString('hex');
  private readonly topics = new Set<string>();
  private readonly keyspaces = new Set<string>();
  private readonly processes = new Set<BenchProcess>();
  private lastLine = '';
  /** Pids of the local stack's servers (for their CPU time) and their logs, when the run uses the local stack. */
  servers: Array<{ name: string; pid: number; logFile: string }> = [];

  private constructor(
    readonly base: ConnectionConfig,
    readonly options: BenchOptions,
    readonly session: Client,
    readonly admin: KafkaAdmin,
    readonly signal: AbortSignal,
  ) {}

  static async open(base: ConnectionConfig, options: BenchOptions, signal: AbortSignal): Promise<BenchContext> {
    const admin = new KafkaAdmin(base);
    await admin.listTopics(); // fails early, naming the brokers, when Kafka is not there
    const session = await connect(base);
    return new BenchContext(base, options, session, admin, signal);
  }

  private cases = 0;

  /**
   * The connection of one case: its own keyspace, consumer group and alerts topic (and topic, unless
   * given), never used before, not even by an earlier run of the same case (--repeat): a group that
   * has committed offsets, or a keyspace dropped and re-created under the same name, would not be fresh.
   */
  caseConfig(name: string, topic?: string): ConnectionConfig {
    const id = `${this.runId}_${++this.cases}_${name.toLowerCase()}`;
    const dashed = id.replace(/_/g, '-');
    return Object.freeze({
      ...this.base,
      keyspace: `eo_bench_${id}`,
      topic: topic ?? `eo-bench-${dashed}`,
      alertsTopic: `eo-bench-${dashed}-alerts`,
      group: `eo-bench-${dashed}`,
    });
  }

  /** Creates the config's keyspace with the project's schema; dropped at the end of the run. */
  async freshKeyspace(config: ConnectionConfig): Promise<void> {
    this.keyspaces.add(config.keyspace);
    await applySchema(this.session, config.keyspace, KEYSPACE_REPLICATION);
  }

  /** Creates the config's alerts topic, compacted like `topic create` makes it; deleted at the end of the run. */
  async freshAlertsTopic(config: ConnectionConfig, partitions: number): Promise<void> {
    this.topics.add(config.alertsTopic);
    await this.admin.ensureTopic({ topic: config.alertsTopic, partitions, replicationFactor: TOPIC_REPLICATION, configs: { 'cleanup.policy': 'compact' } });
  }

  /** Creates the config's topic; deleted at the end of the run. */
  async freshTopic(config: ConnectionConfig, partitions: number): Promise<void> {
    this.topics.add(config.topic);
    await this.admin.ensureTopic({ topic: config.topic, partitions, replicationFactor: TOPIC_REPLICATION });
  }

  /**
   * Drops one case's keyspace now (big ones would otherwise slow Cassandra down for later cases). If
   * that fails, it stays registered: the clean-up at the end tries again and says so if it cannot.
   */
  async dropKeyspace(keyspace: string): Promise<void> {
    if (this.options.keep || !this.keyspaces.has(keyspace)) return;
    await bounded(this.session.execute(`DROP KEYSPACE IF EXISTS ${keyspace}`), 60_000, `dropping ${keyspace}`, NEVER).then(
      () => this.keyspaces.delete(keyspace),
      () => undefined,
    );
  }

  /** Deletes one case's topic now (or, failing that, at the end). */
  async deleteTopic(topic: string): Promise<void> {
    if (this.options.keep || !this.topics.has(topic)) return;
    await bounded(this.admin.deleteTopic(topic), 60_000, `deleting ${topic}`, NEVER).then(
      () => this.topics.delete(topic),
      () => undefined,
    );
  }

  /** CPU seconds used so far by each local server. */
  serverCpu(): Record<string, number | undefined> {
    return Object.fromEntries(this.servers.map((s) => [s.name, cpuSeconds(s.pid)]));
  }

  track(p: BenchProcess): BenchProcess {
    this.processes.add(p);
    void p.exited.then(() => this.processes.delete(p));
    return p;
  }

  /** A finished line of progress (on stderr, so that stdout carries only the table). */
  say(line: string): void {
    this.clearStatus();
    process.stderr.write(`${line}\n`);
  }

  /** A line that is replaced by the next one on a terminal, and printed every few seconds otherwise. */
  status(line: string): void {
    if (process.stderr.isTTY) {
      process.stderr.write(`\r${line.padEnd(this.lastLine.length)}`);
      this.lastLine = line;
    } else if (Date.now() - this.lastStatusAt >= 5000) {
      this.lastStatusAt = Date.now();
      process.stderr.write(`  ${line}\n`);
    }
  }
  private lastStatusAt = 0;

  private clearStatus(): void {
    if (process.stderr.isTTY && this.lastLine !== '') process.stderr.write(`\r${' '.repeat(this.lastLine.length)}\r`);
    this.lastLine = '';
    this.lastStatusAt = 0;
  }

  /** Stops every process still running, then removes the topics and keyspaces. Safe to call twice. */
  async cleanup(): Promise<void> {
    await Promise.all([...this.processes].map((p) => p.stop()));
    if (!this.options.keep) {
      const remove = (what: string, work: Promise<unknown>) =>
        bounded(work, 60_000, what, NEVER).catch((e: unknown) => this.say(`  could not remove ${what} (remove it by hand): ${describe(e)}`));
      for (const ks of this.keyspaces) await remove(`keyspace ${ks}`, this.session.execute(`DROP KEYSPACE IF EXISTS ${ks}`));
      for (const t of this.topics) await remove(`topic ${t}`, this.admin.deleteTopic(t));
      this.keyspaces.clear();
      this.topics.clear();
    } else if (this.keyspaces.size + this.topics.size > 0) {
      this.say(`kept (--keep): keyspaces ${[...this.keyspaces].join(', ')}; topics ${[...this.topics].join(', ')}`);
    }
  }

  /** Kills every process at once (a second Ctrl-C). */
  killAll(): void {
    for (const p of this.processes) p.kill();
  }

  async close(): Promise<void> {
    await this.admin.close();
    await this.session.shutdown().catch(() => undefined);
  }
}
