/**
 * The public face of the exactlyonce engine: what a user's own job and program import
 * (`import { runWorker, type Job } from 'exactlyonce'`). Everything else under src/ is internal and
 * may change between versions.
 *
 * A job decodes records and writes their outputs idempotently; the engine owns partitions,
 * checkpoints, fencing, retries and quarantine (docs/library.md, "The job contract").
 */

// The job contract and what the engine gives a job.
export type { Decoded, DecodedRecord, Job, JobContext, JobMigration, PublishRecord, SourceRecord } from './engine/job.js';
export type { SettingValue, Settings } from './engine/job-binding.js';
// The proof: what each record must produce, for `verify --job` and `chaos --job`.
export type { Expectation, JobAudit } from './engine/job-audit.js';

// Formats are decoders (bytes → typed values) any job plugs in: JSON, and Avro, Protobuf and JSON
// Schema through a Schema Registry, whose schemas the job's `lookup` fetches before each batch is
// decoded (docs/sinks.md, "Avro, Protobuf and JSON Schema topics through a Schema Registry").
export type { DecodeLookup } from './engine/job.js';
export { createDecoder, decoderLookup, FORMATS, schemaCache, type Decoder, type DecodeResult, type Format } from './formats/decoder.js';
export { SchemaRegistry, type RegisteredSchema, type SchemaType } from './registry/schema-registry.js';
export { withWireHeader } from './formats/wire.js';
export type { SchemaRegistryConfig } from './config.js';

// Running a worker, and loading jobs as `exactlyonce run --job` does.
export { runWorker, type WorkerOptions } from './worker.js';
export type { JobFactory, JobFactoryContext } from './job-loader.js';
export { defaultRunnerOptions, type RunnerOptions } from './engine/runner.js';
export { EngineMetrics } from './engine/metrics.js';
export { loadConnectionConfig, type ConnectionConfig } from './config.js';
export { createLogger, type Logger } from './log.js';

// The error codes (one registry; `retriable` decides whether the engine retries a job's failed write).
export { ErrorCodes, ExactlyOnceError, isExactlyOnceError, type ErrorCode } from './errors.js';

// Cassandra helpers a job's `write` needs (the session is the cassandra-driver Client).
export { consistencies, fromLong, toLong, type Client } from './cassandra/session.js';
