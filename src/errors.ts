/**
 * Every error the project raises on purpose: one registry of codes, each with a `retriable` flag and
 * the `cause`. The CLI prints `code: message` and exits non-zero; retry loops decide from
 * `retriable`, never from the message text (the habit of kafkajs' src/errors.js and fastify's
 * FST_ERR_ registry).
 */
export const ErrorCodes = {
  EO_CONFIG_INVALID: { retriable: false, exitCode: 2 },
  EO_USAGE: { retriable: false, exitCode: 2 },
  EO_TOOL_MISSING: { retriable: false, exitCode: 3 },
  EO_PORT_IN_USE: { retriable: false, exitCode: 3 },
  EO_SERVER_EXITED: { retriable: false, exitCode: 3 },
  EO_STARTUP_TIMEOUT: { retriable: false, exitCode: 3 },
  EO_FETCH_FAILED: { retriable: false, exitCode: 3 },
  EO_KAFKA_UNAVAILABLE: { retriable: true, exitCode: 4 },
  EO_CASSANDRA_UNAVAILABLE: { retriable: true, exitCode: 4 },
  /** Too few replicas alive for the consistency level (2 of 3 nodes down at LOCAL_QUORUM): writes wait for them. */
  EO_CASSANDRA_QUORUM_LOST: { retriable: true, exitCode: 4 },
  EO_CASSANDRA_QUERY: { retriable: false, exitCode: 4 },
  EO_KAFKA_CLIENT_MISSING: { retriable: false, exitCode: 3 },
  /** An npm package the command needs is not installed (bin/exactlyonce says so before Node starts, in the same words). */
  EO_DEPS_MISSING: { retriable: false, exitCode: 3 },
  EO_TOPIC_MISMATCH: { retriable: false, exitCode: 5 },
  EO_CHECKPOINT_OUT_OF_RANGE: { retriable: false, exitCode: 6 },
  /** The input topic was deleted and re-created (its topic ID changed) under the job. */
  EO_TOPIC_RECREATED: { retriable: false, exitCode: 6 },
  EO_PARTITIONS_ADDED: { retriable: false, exitCode: 6 },
  /** The consumer's fetch position is outside the log while running (the log was truncated or deleted). */
  EO_POSITION_OUT_OF_RANGE: { retriable: false, exitCode: 6 },
  /** A worker's or verify's settings differ from the job stored in the keyspace. */
  EO_JOB_CONFIG_MISMATCH: { retriable: false, exitCode: 5 },
  /** A server refused an operation for good (invalid request, unauthorized, write failure, record too large). */
  EO_PERMANENT_ERROR: { retriable: false, exitCode: 10 },
  /** Planning where assigned partitions resume failed, or the Kafka client refused to assign them; they are stopped instead of read from a default position. */
  EO_ASSIGNMENT_FAILED: { retriable: false, exitCode: 6 },
  EO_PRODUCE_FAILED: { retriable: true, exitCode: 7 },
  EO_FENCED: { retriable: false, exitCode: 8 },
  EO_VERIFY_FAILED: { retriable: false, exitCode: 9 },
  /** Cassandra refused the login: wrong or missing username/password. */
  EO_CASSANDRA_AUTH_FAILED: { retriable: false, exitCode: 11 },
  /** Kafka refused the SASL login: wrong or missing credentials, or the wrong mechanism. */
  EO_KAFKA_AUTH_FAILED: { retriable: false, exitCode: 11 },
  /** A server's TLS certificate is not trusted (unknown CA, expired, issued for another name), or TLS is not spoken. */
  EO_TLS_UNTRUSTED: { retriable: false, exitCode: 11 },
  /** Authenticated, but a permission (Cassandra grant, Kafka ACL) is missing. */
  EO_NOT_AUTHORIZED: { retriable: false, exitCode: 12 },
  /** A sink's table is missing, lacks a column, or holds writes that break the sink's rules (wall-clock timestamps). */
  EO_SINK_TABLE_INVALID: { retriable: false, exitCode: 5 },
  /** The Schema Registry does not answer (connection refused, timeout, HTTP 5xx/408/429): retried like Kafka and Cassandra. */
  EO_REGISTRY_UNAVAILABLE: { retriable: true, exitCode: 4 },
  /** A stopping worker still waited on a server (a batch in flight, the group leave) when its stop deadline passed: it exits all the same, as after a crash. */
  EO_STOP_TIMEOUT: { retriable: false, exitCode: 4 },
  /** The Schema Registry refused the login (HTTP 401) or a permission (403). */
  EO_REGISTRY_AUTH_FAILED: { retriable: false, exitCode: 11 },
  /** The Schema Registry answered something no retry changes (a URL that is not its API, a schema it rejects). */
  EO_REGISTRY_REFUSED: { retriable: false, exitCode: 10 },
  /** A job declares a table that another job of the keyspace writes (src/engine/job-binding.ts). */
  EO_TABLE_OWNED: { retriable: false, exitCode: 5 },
  /** A failure nothing handled (a bug, ours or a library's): a worker logs it at error level, counts it and goes on. */
  EO_INTERNAL: { retriable: false, exitCode: 70 },
  /** A batch began past the offset a partition resumes at, and nothing proves the gap holds no record (src/engine/partition-task.ts). */
  EO_OFFSET_GAP: { retriable: false, exitCode: 6 },
} as const satisfies Record<string, { retriable: boolean; exitCode: number }>;

export type ErrorCode = keyof typeof ErrorCodes;

/**
 * Marks our errors across copies of this module: a job may load another copy of the package (a `.ts`
 * job in a clone resolves 'exactlyonce' to the sources through tsconfig `paths` while the CLI runs the
 * build; a project may hold two installed versions), and the engine must still see a retriable error
 * it throws as ours (`instanceof`), not as an unknown one that stops the partition.
 */
const BRAND = Symbol.for('exactlyonce.ExactlyOnceError');

export class ExactlyOnceError extends Error {
  static override [Symbol.hasInstance](x: unknown): boolean {
    return typeof x === 'object' && x !== null && (x as { [BRAND]?: unknown })[BRAND] === true;
  }

  readonly [BRAND] = true;
  readonly code: ErrorCode;
  readonly retriable: boolean;
  readonly exitCode: number;
  /** Extra lines shown under the message (e.g. the tail of a server log). */
  readonly details: string | undefined;

  constructor(code: ErrorCode, message: string, options: { cause?: unknown; details?: string } = {}) {
    super(message, { cause: options.cause });
    this.name = 'ExactlyOnceError';
    this.code = code;
    this.retriable = ErrorCodes[code].retriable;
    this.exitCode = ErrorCodes[code].exitCode;
    this.details = options.details;
  }
}

export function isExactlyOnceError(e: unknown, code?: ErrorCode): e is ExactlyOnceError {
  return e instanceof ExactlyOnceError && (code === undefined || e.code === code);
}

/** A one-line description of any thrown value, for logs. */
export function describe(e: unknown): string {
  if (e instanceof ExactlyOnceError) return `${e.code}: ${e.message}`;
  if (e instanceof Error) return e.message;
  return String(e);
}
