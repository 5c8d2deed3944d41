/**
 * An unlogged batch of prepared statements whose rows arrive already encoded, in one buffer — how every
 * job writes its rows: the events job (src/jobs/events/event-job.ts, by hand for its fixed columns), the sink
 * (src/jobs/sink/sink-job.ts, through a writer per column type: `bound()`), and the benchmark's ceiling.
 *
 * The driver's `client.batch` costs per row what the row's bytes never need: an awaited prepared-cache
 * lookup and a result object (PrepareHandler.getPreparedMultiple), then per value a 4-byte length
 * buffer, all concatenated at the end (FrameWriter). Here the caller writes each row's entry — kind,
 * statement id, value count, each value with its length — straight into one buffer (BatchRows, in
 * src/cassandra/batch-rows.ts), and the request's body is that buffer between the batch's header and
 * its options. Everything else is the driver's own machinery, reached through its modules: preparing
 * (and re-preparing when a restarted node answers UNPREPARED: the request keeps the statement id the
 * driver looks up), routing to a replica, the execution options, retries, timeouts and the frame
 * header. The frame's body is byte for byte what `client.batch` sends for the same rows
 * (test/unit/prepared-batch.test.ts); these internal modules are those of cassandra-driver 4.10,
 * which package.json pins.
 */
import { createRequire } from 'node:module';
import type { BatchRows } from './batch-rows.js';
import { columnWriter, type ColumnType, type ColumnWriter, type ValueEncoder } from './encode.js';
import type { Client } from './session.js';

const require = createRequire(import.meta.url);

interface ExecutionOptions {
  getLoadBalancingPolicy(): unknown;
  getConsistency(): number;
  getSerialConsistency(): number | undefined;
  getKeyspace(): string | undefined;
  getCustomPayload(): unknown;
  isQueryTracing(): boolean;
}
interface Encoder {
  protocolVersion: number;
}
interface FrameWriterT {
  bodyLength: number;
  add(b: Buffer): void;
  writeByte(n: number): void;
  writeShort(n: number): void;
  writeInt(n: number): void;
  writeLong(n: unknown): void;
  writeString(s: string): void;
  write(version: number, streamId: number, flags: number): Buffer;
}
/** What the driver knows of a prepared statement. */
export interface PreparedInfo {
  queryId: Buffer;
  meta: { columns: unknown[]; partitionKeys?: number[]; keyspace?: string };
}

/** A prepared statement with a writer for each of its parameters, in order. */
export interface Bound extends PreparedInfo {
  writers: readonly ColumnWriter[];
}
type BatchRequestT = { queries: unknown; options: ExecutionOptions; timestamp: unknown; type: number; length: number };

const driver = {
  requests: require('cassandra-driver/lib/requests.js') as { BatchRequest: new (queries: unknown[], options: ExecutionOptions) => BatchRequestT },
  RequestHandler: require('cassandra-driver/lib/request-handler.js') as { send(request: unknown, options: ExecutionOptions, client: Client): Promise<unknown> },
  DefaultExecutionOptions: (require('cassandra-driver/lib/execution-options.js') as { DefaultExecutionOptions: { create(o: object, client: Client): ExecutionOptions } })
    .DefaultExecutionOptions,
  PrepareHandler: require('cassandra-driver/lib/prepare-handler.js') as {
    getPrepared(client: Client, loadBalancing: unknown, query: string, keyspace: string | undefined): Promise<PreparedInfo>;
  },
  FrameWriter: (require('cassandra-driver/lib/writers.js') as { FrameWriter: new (opcode: number) => FrameWriterT }).FrameWriter,
  types: require('cassandra-driver/lib/types/index.js') as {
    opcodes: { batch: number };
    frameFlags: { tracing: number; customPayload: number };
    protocolVersion: { supportsTimestamp(v: number): boolean; supportsKeyspaceInRequest(v: number): boolean; uses4BytesQueryFlags(v: number): boolean };
  },
};

/** The batch flags of the protocol (native_protocol_v4.spec, 4.1.7). */
const WITH_SERIAL_CONSISTENCY = 0x10;
const WITH_DEFAULT_TIMESTAMP = 0x20;
const WITH_KEYSPACE = 0x80;

/** The driver's BatchRequest with the rows' entries taken from BatchRows instead of query objects (exported for its test). */
export class EncodedBatchRequest extends driver.requests.BatchRequest {
  constructor(
    private readonly info: PreparedInfo & { query: string },
    options: ExecutionOptions,
    private readonly rows: { buf: Buffer; at: number; count: number },
  ) {
    // One query item: what the driver reads from a request besides write() (the statement id and text
    // to re-prepare on UNPREPARED; the text for error messages).
    super([{ query: info.query, queryId: info.queryId, meta: info.meta, params: [] }], options);
  }

  /** As BatchRequest.write (lib/requests.js), with the entries copied from the rows' buffer. */
  write(encoder: Encoder, streamId: number): Buffer {
    const { types, FrameWriter } = driver;
    const version = encoder.protocolVersion;
    const fw = new FrameWriter(types.opcodes.batch);
    const options = this.options;
    const headerFlags = options.isQueryTracing() ? types.frameFlags.tracing : 0;
    if (options.getCustomPayload()) throw new Error('a prepared batch takes no custom payload');
    fw.writeByte(this.type);
    fw.writeShort(this.rows.count);
    fw.add(this.rows.buf.subarray(0, this.rows.at));
    fw.writeShort(options.getConsistency());
    if (types.protocolVersion.supportsTimestamp(version)) {
      let flags = options.getSerialConsistency() ? WITH_SERIAL_CONSISTENCY : 0;
      const timestamp = this.timestamp;
      if (timestamp !== null && timestamp !== undefined) flags |= WITH_DEFAULT_TIMESTAMP;
      if (options.getKeyspace() && types.protocolVersion.supportsKeyspaceInRequest(version)) flags |= WITH_KEYSPACE;
      if (types.protocolVersion.uses4BytesQueryFlags(version)) fw.writeInt(flags);
      else fw.writeByte(flags);
      if (flags & WITH_SERIAL_CONSISTENCY) fw.writeShort(options.getSerialConsistency()!);
      if (flags & WITH_DEFAULT_TIMESTAMP) fw.writeLong(timestamp);
      if (flags & WITH_KEYSPACE) fw.writeString(options.getKeyspace()!);
    }
    this.length = fw.bodyLength;
    return fw.write(version, streamId, headerFlags);
  }

  clone(): EncodedBatchRequest {
    return new EncodedBatchRequest(this.info, this.options, this.rows);
  }
}

/** One prepared statement written in batches of pre-encoded rows (`unlogged`, the given consistency). */
export class PreparedBatch {
  private readonly options: { prepare: true; logged: false; consistency: number };

  constructor(
    private readonly client: Client,
    readonly query: string,
    readonly consistency: number,
  ) {
    this.options = { prepare: true, logged: false, consistency };
  }

  /** The statement, prepared on first use (and again, by the driver, after the server forgot it). */
  prepared(): Promise<PreparedInfo> {
    const o = driver.DefaultExecutionOptions.create(this.options, this.client);
    const keyspace = (this.client as unknown as { keyspace?: string }).keyspace;
    return driver.PrepareHandler.getPrepared(this.client, o.getLoadBalancingPolicy(), this.query, keyspace);
  }

  private writers: { id: Buffer; list: ColumnWriter[] } | undefined;

  /**
   * The statement prepared, with a writer for each of its parameters by the type the server gave it
   * (src/cassandra/encode.ts columnWriter): what a job needs to write rows of any table.
   */
  async bound(): Promise<Bound> {
    const info = await this.prepared();
    if (this.writers === undefined || !this.writers.id.equals(info.queryId)) {
      const encoder = (this.client as unknown as { _getEncoder(): ValueEncoder })._getEncoder();
      this.writers = { id: info.queryId, list: (info.meta.columns as Array<{ type: ColumnType }>).map((c) => columnWriter(c.type, encoder)) };
    }
    return { ...info, writers: this.writers.list };
  }

  /**
   * The replicas of the partition `routing` names (the statement's parameters, by index), as one
   * string ('' when unknown): partitions with the same string may share a batch whose coordinator
   * holds them all.
   */
  async replicaSet(info: PreparedInfo, routing: readonly unknown[]): Promise<string> {
    // One node holds every partition: no key to hash.
    if (this.client.hosts.length <= 1) return '';
    const options = driver.DefaultExecutionOptions.create(this.options, this.client);
    await (this.client as unknown as { _setRoutingInfo(o: ExecutionOptions, params: readonly unknown[], meta: PreparedInfo['meta']): Promise<void> })._setRoutingInfo(options, routing, info.meta);
    const key = (options as unknown as { getRoutingKey(): Buffer | undefined }).getRoutingKey();
    const keyspace = options.getKeyspace() ?? info.meta.keyspace;
    if (key === undefined || keyspace === undefined) return '';
    const hosts = this.client.getReplicas(keyspace, key) as Array<{ address: string }> | null;
    return hosts === null ? '' : hosts.map((h) => h.address).join(',');
  }

  /**
   * Sends the rows as one batch. `routing`: the values of the statement's parameters (encoded, by
   * index) that make the partition key, so the batch goes to a replica of it.
   */
  async send(info: PreparedInfo, rows: BatchRows, routing: readonly unknown[]): Promise<void> {
    if (rows.count === 0) return;
    const options = driver.DefaultExecutionOptions.create(this.options, this.client);
    await (this.client as unknown as { _setRoutingInfo(o: ExecutionOptions, params: readonly unknown[], meta: PreparedInfo['meta']): Promise<void> })._setRoutingInfo(
      options,
      routing,
      info.meta,
    );
    const request = new EncodedBatchRequest({ ...info, query: this.query }, options, { buf: rows.buf, at: rows.at, count: rows.count });
    await driver.RequestHandler.send(request, options, this.client);
  }
}
