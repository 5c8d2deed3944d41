/**
 * An idempotent producer (enable.idempotence: no duplicates or reordering from the client's own
 * retries; acks=all). `send` resolves when the broker has acknowledged every record given.
 */
import type { ConnectionConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';
import { baseProperties, closeInBackground, kafkaJS, nativeProducer, kafkaSecurityError, kafkaUnavailable, quietLogger, recentRefusal, tapClientErrors, type KafkaJSNamespace, type LibrdkafkaHandle } from './client.js';
import { settleWithin } from '../deadline.js';

export interface OutgoingRecord {
  key: Buffer | string | null;
  value: Buffer | string | null;
  partition?: number;
  /** Record timestamp, epoch ms (default: now). */
  timestampMs?: number;
  /** Kafka headers, name → bytes (or UTF-8 text). */
  headers?: Record<string, Buffer | string>;
}

/**
 * librdkafka error codes that no retry can fix: a record too large for the topic (MSG_SIZE_TOO_LARGE
 * 10, RECORD_LIST_TOO_LARGE 18, INVALID_RECORD 87), a missing permission (TOPIC_AUTHORIZATION_FAILED
 * 29, CLUSTER_AUTHORIZATION_FAILED 31, TRANSACTIONAL_ID_AUTHORIZATION_FAILED 53), an invalid argument
 * (ERR__INVALID_ARG -186). Everything else (timeouts, leaders moving, brokers down) is retried.
 */
const PERMANENT_PRODUCE_ERRORS = new Set([10, 18, 29, 31, 53, 87, -186]);

/** The native client under the handle (node-rdkafka's `_client`), whose poll() serves librdkafka's events. */
interface NativeHandle {
  _client?: { poll?(): unknown };
}

/** The librdkafka handle's delivery reports (one per record). */
interface DeliveryReports {
  on(event: 'delivery-report', listener: (err: unknown, r: { topic: string; partition: number; offset: number }) => void): void;
}

/**
 * librdkafka hands error events over only when polled, and a client starts polling once it is ready:
 * polled every 200 ms meanwhile, so a refused login or handshake is heard while connecting. Cleared
 * with clearInterval once the connect settles.
 */
function pollWhileConnecting(handle: NativeHandle | null | undefined): NodeJS.Timeout {
  return setInterval(() => {
    try {
      handle?._client?.poll?.();
    } catch {
      // not connected yet
    }
  }, 200);
}

/** How long probeRefusal's connection may take, in ms. */
const PROBE_MS = 10_000;
/** When probeRefusal last connected (epoch ms): at most one probe a minute per process. */
let lastProbe = 0;
/** The probe under way: concurrent callers (calls failing together) wait for the same one. */
let probing: Promise<void> | undefined;

/**
 * Finds out, by error code, whether Kafka refuses this client (a login, a certificate) when a call of
 * a client that reports refusals only as log text (the admin client) failed: connects a short-lived
 * producer, whose librdkafka handle is tapped (tapClientErrors), for at most 10 s. Afterwards
 * recentRefusal() has it, if there was one. At most once a minute.
 */
export function probeRefusal(config: ConnectionConfig): Promise<void> {
  if (recentRefusal() !== undefined) return Promise.resolve();
  if (probing !== undefined) return probing;
  if (Date.now() - lastProbe < 60_000) return Promise.resolve();
  lastProbe = Date.now();
  // The client's own producer, not the KafkaJS-style one: its connect takes a deadline for the
  // metadata request it waits on (the KafkaJS-style connect waits up to 30 s for a usable broker,
  // which a refusing broker never becomes), so the probe's client is closed within PROBE_MS.
  let probe: InstanceType<ReturnType<typeof nativeProducer>>;
  try {
    probe = new (nativeProducer())(baseProperties(config, `exactlyonce-probe-${process.pid}`));
  } catch {
    return Promise.resolve(); // (the calls' own clients, made with the same properties, say what is wrong)
  }
  probing = new Promise<void>((resolve) => {
    tapClientErrors(probe as unknown as LibrdkafkaHandle, (e) => {
      if (kafkaSecurityError(config, e) !== undefined) resolve();
    });
    const polling = pollWhileConnecting(probe as unknown as NativeHandle);
    const connected = new Promise<void>((settled) => {
      const done = (err: unknown) => {
        clearInterval(polling);
        resolve();
        // A failed connect has disconnected its client already.
        if (err !== null && err !== undefined) settled();
        else probe.disconnect(() => settled());
      };
      try {
        probe.connect({ timeout: PROBE_MS }, done);
      } catch (e) {
        done(e); // (a probe that cannot start learns nothing; it never fails its caller)
      }
    });
    closeInBackground(connected);
  }).finally(() => (probing = undefined));
  return probing;
}

export class Producer {
  private producer: KafkaJSNamespace.Producer | undefined;
  /** The one connection attempt in progress or done; concurrent callers share it. */
  private connecting: Promise<KafkaJSNamespace.Producer> | undefined;
  private closed: Promise<void> | undefined;
  private readonly properties: Record<string, unknown>;

  /**
   * Told of every record the brokers acknowledged, with the partition and offset they gave it (the
   * client's delivery reports; the KafkaJS-style `send` only returns each partition's lowest offset).
   * Lets a harness name the acknowledged records a log does not hold (src/harness/acked-ledger.ts).
   */
  onDelivered: ((topic: string, partition: number, offset: bigint) => void) | undefined;

  constructor(
    private readonly config: ConnectionConfig,
    extra: Record<string, string | number | boolean> = {},
    /** How long one connection attempt may take, in ms. */
    private readonly connectTimeoutMs = 30_000,
  ) {
    this.properties = {
      kafkaJS: { logger: quietLogger(() => undefined) },
      ...baseProperties(config, `exactlyonce-producer-${process.pid}`),
      'enable.idempotence': true,
      acks: -1,
      'linger.ms': 5,
      'compression.type': 'lz4',
      // A send that cannot complete fails after this long instead of hanging.
      'message.timeout.ms': 60_000,
      ...extra,
    };
    kafkaJS(); // fail early with EO_KAFKA_CLIENT_MISSING
  }

  /**
   * Connects once; concurrent callers share the attempt (the client rejects a second connect() while
   * one is pending). A failed or timed-out attempt discards its client, so the next call starts afresh.
   */
  connect(): Promise<void> {
    this.connecting ??= (async () => {
      const { Kafka } = kafkaJS();
      const producer = new Kafka({}).producer(this.properties as unknown as KafkaJSNamespace.ProducerConstructorConfig);
      // connect() makes the librdkafka handle before it first waits: tapped at once, so a refused login
      // or handshake while connecting is known by its code.
      const connecting = producer.connect();
      const internal = (producer as unknown as { _getInternalClient?(): (LibrdkafkaHandle & DeliveryReports & NativeHandle) | null })._getInternalClient?.();
      // A refusal (by its code) ends the attempt at once, as that error.
      let refused: ((e: Error) => void) | undefined;
      const refusal = new Promise<never>((_, reject) => (refused = reject));
      refusal.catch(() => undefined); // (told after the race settled: nobody waits for it any more)
      tapClientErrors(internal, (e) => {
        if (kafkaSecurityError(this.config, e) !== undefined) refused?.(e);
      });
      internal?.on('delivery-report', (err, r) => {
        if (err === null || err === undefined) this.onDelivered?.(r.topic, r.partition, BigInt(r.offset));
      });
      const polling = pollWhileConnecting(internal);
      try {
        await settleWithin(Promise.race([connecting, refusal]), this.connectTimeoutMs, () => {
          throw new Error(`no answer within ${this.connectTimeoutMs} ms`);
        });
        this.producer = producer;
        return producer;
      } catch (e) {
        this.connecting = undefined;
        // Disconnected only once its connect settled: a client disconnected while connecting throws
        // from its 'ready' callback when the brokers answer later (an uncaught "Ready callback called
        // in invalid state"), which would end the process.
        closeInBackground(
          connecting.then(
            () => producer.disconnect(),
            () => producer.disconnect(),
          ),
        );
        throw kafkaUnavailable(this.config, e);
      } finally {
        clearInterval(polling);
        refused = undefined;
      }
    })();
    return this.connecting.then(() => undefined);
  }

  async send(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    await this.connect();
    try {
      await this.producer!.send({ topic, messages: records.map(toMessage) });
    } catch (e) {
      // A fatal error (librdkafka ERR__FATAL, -150: e.g. the idempotent producer's sequence state is
      // lost) makes every later send fail too: drop this client so the next attempt starts a new one.
      const err = e as { fatal?: boolean; code?: number };
      if (err.fatal === true || err.code === -150) {
        const old = this.producer;
        this.producer = undefined;
        this.connecting = undefined;
        if (old !== undefined) closeInBackground(old.disconnect());
      }
      if (err.code !== undefined && PERMANENT_PRODUCE_ERRORS.has(err.code)) {
        throw new ExactlyOnceError('EO_PERMANENT_ERROR', `sending to ${topic} failed for good: ${(e as Error).message} (Kafka error ${err.code}); retrying cannot fix it`, { cause: e });
      }
      throw new ExactlyOnceError('EO_PRODUCE_FAILED', `sending to ${topic} failed: ${(e as Error).message}`, { cause: e });
    }
  }

  /** Flushes and disconnects. Idempotent. */
  close(): Promise<void> {
    this.closed ??= (this.connecting ?? Promise.resolve(undefined)).then(
      (p) => p?.disconnect().catch(() => undefined),
      () => undefined,
    );
    return this.closed;
  }
}

/** What became of a transaction: 'unknown' only when its commit was cut short and the producer had to be replaced. */
export type TransactionOutcome = 'committed' | 'aborted' | 'unknown';

/** Pause between attempts of a transaction that failed (a broker restarting), in ms. */
const TRANSACTION_BACKOFF_MS = 500;
/** How long one connection attempt (with initTransactions) of the transactional producer may take, in ms. */
const CONNECT_TIMEOUT_MS = 30_000;
/** The transactions' timeout (the broker aborts one left open this long), in ms: librdkafka's default. */
const TRANSACTION_TIMEOUT_MS = 60_000;
/** librdkafka's ERR__TIMED_OUT and ERR__STATE. */
const ERR_TIMED_OUT = -185;
const ERR_STATE = -172;

/**
 * A transactional producer (`transactional.id`), as Kafka Streams and Flink write with exactly-once on:
 * the records of a transaction become readable to a read_committed consumer together when it commits,
 * and never when it aborts (they stay in the log, with a marker after them). The tests and
 * `chaos --transactional` write such topics with it. One transaction at a time.
 *
 * Broker failures are ridden out: a commit that times out is called again (librdkafka's
 * commit_transaction resumes); a transaction that fails otherwise is aborted and written again. When
 * the abort fails too, the producer is replaced (a new one with the same transactional.id fences the
 * old one, and the coordinator aborts its open transaction) — then a transaction whose commit had
 * failed has an unknown outcome: the coordinator may have been completing it.
 */
export class TransactionalProducer {
  private producer: KafkaJSNamespace.Producer | undefined;
  private readonly properties: Record<string, unknown>;
  private closed = false;

  constructor(
    private readonly config: ConnectionConfig,
    transactionalId: string,
    extra: Record<string, string | number | boolean> = {},
    /** How long write() retries a transaction through broker failures before it gives up, in ms. */
    private readonly deadlineMs = 600_000,
  ) {
    this.properties = {
      kafkaJS: { logger: quietLogger(() => undefined) },
      ...baseProperties(config, `exactlyonce-txn-producer-${process.pid}`),
      'transactional.id': transactionalId,
      'linger.ms': 5,
      'compression.type': 'lz4',
      // A record not delivered within the transaction's timeout (librdkafka requires it to be no
      // longer) fails its attempt; write() aborts and writes the transaction again until deadlineMs.
      'transaction.timeout.ms': TRANSACTION_TIMEOUT_MS,
      'message.timeout.ms': TRANSACTION_TIMEOUT_MS,
      ...extra,
    };
    kafkaJS(); // fail early with EO_KAFKA_CLIENT_MISSING
  }

  /** Connects and initialises transactions (fencing any older producer with the same transactional.id). */
  async connect(): Promise<void> {
    await this.connected();
  }

  private async connected(): Promise<KafkaJSNamespace.Producer> {
    if (this.closed) throw new ExactlyOnceError('EO_USAGE', 'the transactional producer is closed');
    if (this.producer !== undefined) return this.producer;
    const { Kafka } = kafkaJS();
    const producer = new Kafka({}).producer(this.properties as unknown as KafkaJSNamespace.ProducerConstructorConfig);
    try {
      // (With the brokers away, connect and its initTransactions can wait without end.)
      await connectWithin(producer, CONNECT_TIMEOUT_MS);
    } catch (e) {
      // The client refuses properties that contradict each other at connect, as ERR__STATE (-172).
      const code = (e as { code?: number }).code;
      if (code !== undefined && (PERMANENT_PRODUCE_ERRORS.has(code) || code === ERR_STATE)) {
        throw new ExactlyOnceError('EO_CONFIG_INVALID', `the transactional producer's properties were refused: ${(e as Error).message} (Kafka error ${code})`, { cause: e });
      }
      throw kafkaUnavailable(this.config, e);
    }
    this.producer = producer;
    return producer;
  }

  /** Drops the current client; the next one's initTransactions aborts what it left open. */
  private replace(): void {
    const old = this.producer;
    this.producer = undefined;
    if (old !== undefined) closeInBackground(old.disconnect());
  }

  /**
   * Writes `records` to `topic` in one transaction and commits it, or aborts it (`commit` false).
   * Retried through broker failures until `deadlineMs` has passed; a permanent refusal throws at once.
   */
  async write(topic: string, records: readonly OutgoingRecord[], commit: boolean): Promise<TransactionOutcome> {
    const deadline = Date.now() + this.deadlineMs;
    for (let attempt = 1; ; attempt++) {
      let committing = false;
      try {
        const p = await this.connected();
        await p.transaction();
        await p.send({ topic, messages: records.map(toMessage) });
        if (!commit) {
          await p.abort();
          return 'aborted';
        }
        committing = true;
        return await this.commit(p, deadline);
      } catch (e) {
        const err = e as { code?: number; message?: string };
        if (e instanceof ExactlyOnceError && !e.retriable) throw e;
        if (typeof err.code === 'number' && PERMANENT_PRODUCE_ERRORS.has(err.code)) {
          this.replace();
          throw new ExactlyOnceError('EO_PERMANENT_ERROR', `a transaction to ${topic} failed for good: ${err.message ?? String(e)} (Kafka error ${err.code}); retrying cannot fix it`, { cause: e });
        }
        // An abort that succeeds proves nothing was committed (the coordinator refuses to abort a
        // transaction it is committing): then it is written again.
        const p = this.producer;
        const aborted = p === undefined ? false : await p.abort().then(() => true, () => false);
        if (!aborted) {
          // The next producer's initTransactions aborts what this one left open; but a commit that
          // failed may have reached the coordinator, which then completes it: only the log can tell.
          this.replace();
          if (committing) return 'unknown';
        }
        if (!commit) return 'aborted';
        if (Date.now() > deadline || this.closed) {
          throw new ExactlyOnceError('EO_PRODUCE_FAILED', `a transaction to ${topic} failed ${attempt} times in ${Math.round(this.deadlineMs / 1000)} s: ${err.message ?? String(e)}`, { cause: e });
        }
        await new Promise((r) => setTimeout(r, TRANSACTION_BACKOFF_MS));
      }
    }
  }

  /**
   * Commits, calling again after a timeout (librdkafka: "retry call to resume"; the client's KafkaJS
   * layer waits 5 s per call and loses the error's retriable flag, so the code is read: ERR__TIMED_OUT).
   */
  private async commit(p: KafkaJSNamespace.Producer, deadline: number): Promise<TransactionOutcome> {
    for (;;) {
      try {
        await p.commit();
        return 'committed';
      } catch (e) {
        if ((e as { code?: number }).code !== ERR_TIMED_OUT || Date.now() > deadline || this.closed) throw e;
      }
    }
  }

  /**
   * Begins a transaction and sends `records` in it, then leaves it open: its records stay unreadable
   * (the last stable offset stops before them) until the producer commits or aborts, or the broker
   * aborts it after the producer's transaction.timeout.ms. What an upstream producer that hangs or
   * dies mid-transaction leaves behind.
   */
  async writeOpen(topic: string, records: readonly OutgoingRecord[]): Promise<void> {
    const p = await this.connected();
    await p.transaction();
    await p.send({ topic, messages: records.map(toMessage) });
  }

  /** Disconnects; an open transaction is left for the broker to abort. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    const p = this.producer;
    this.producer = undefined;
    await p?.disconnect().catch(() => undefined);
  }
}

/** Connects `producer`; when that fails or takes longer than `ms`, disconnects it and rejects. */
async function connectWithin(producer: KafkaJSNamespace.Producer, ms: number): Promise<void> {
  const connecting = producer.connect();
  try {
    await settleWithin(connecting, ms, () => {
      throw new Error(`no answer within ${ms} ms`);
    });
  } catch (e) {
    // Disconnected only once its connect settled: a client disconnected while still connecting throws
    // from its 'ready' callback when the brokers answer later ("Ready callback called in invalid
    // state"), uncaught, which would end the process.
    closeInBackground(
      connecting.then(
        () => producer.disconnect(),
        () => producer.disconnect(),
      ),
    );
    throw e;
  }
}

function toMessage(r: OutgoingRecord): KafkaJSNamespace.Message {
  return {
    key: r.key,
    value: r.value,
    ...(r.partition === undefined ? {} : { partition: r.partition }),
    ...(r.timestampMs === undefined ? {} : { timestamp: String(r.timestampMs) }),
    ...(r.headers === undefined ? {} : { headers: r.headers }),
  };
}
