/**
 * The Schema Registry adapter: a server like Kafka and Cassandra, below the engine. It reads schemas by
 * id (what a record's Confluent wire header names), the latest schema of a subject, and registers
 * schemas (tests, chaos samples), through the registry client of `@confluentinc/schemaregistry`
 * (imported by its file: the package root also loads the cloud KMS SDKs of field encryption, 1.15 s and
 * 117 MiB at start against 0.28 s and 67 MiB for the client alone, on Node 20).
 *
 * Every answer is classified once, here, from the HTTP status and the registry's error code (never
 * from message text):
 * - the schema id is unknown (404 with error 40403): `null`, a fact about the record (it is
 *   quarantined), never retried;
 * - no answer (refused, reset, timed out) or 5xx / 408 / 429: EO_REGISTRY_UNAVAILABLE, retriable: the
 *   engine retries it like Cassandra, one line when it stops answering and one when it is back;
 * - 401 / 403: EO_REGISTRY_AUTH_FAILED; anything else (a 404 without the registry's error body: a
 *   URL that is not its API): EO_REGISTRY_REFUSED. Neither is retried: the partition stops, coded.
 *
 * The client's own retries are off (the engine's are the ones that log and stop on shutdown). It is
 * loaded on first use (axios and its kin: ~26 MiB), so that a command or a JSON job never loads it.
 */
import type { SchemaMetadata, SchemaRegistryClient } from '@confluentinc/schemaregistry/dist/schemaregistry-client.js';
import type { SchemaRegistryConfig } from '../config.js';
import { ExactlyOnceError } from '../errors.js';

/** The registry's schema types (`schemaType`; absent means AVRO). */
export type SchemaType = 'AVRO' | 'PROTOBUF' | 'JSON';

export interface RegisteredSchema {
  readonly id: number;
  readonly type: SchemaType;
  /** The schema's text: Avro JSON, a .proto file, a JSON Schema. */
  readonly schema: string;
  /** Other schemas it imports (subject, version), if any. */
  readonly references: ReadonlyArray<{ name: string; subject: string; version: number }>;
}

/** Confluent's error codes (io.confluent.kafka.schemaregistry.rest.exceptions.Errors), which Apicurio's ccompat API answers too. */
const SCHEMA_NOT_FOUND = 40403;
const SUBJECT_NOT_FOUND = 40401;
const VERSION_NOT_FOUND = 40402;

/** How long one request may take, in ms, before it counts as "not answering". */
export const REGISTRY_TIMEOUT_MS = 10_000;

/** The client's RestError (told by shape: the module is loaded lazily). */
function isRestError(e: unknown): e is Error & { status: number; errorCode: number } {
  return e instanceof Error && typeof (e as { status?: unknown }).status === 'number' && typeof (e as { errorCode?: unknown }).errorCode === 'number';
}

export class SchemaRegistry {
  private clientLoaded: Promise<SchemaRegistryClient> | undefined;

  constructor(readonly config: SchemaRegistryConfig, private readonly timeoutMs = REGISTRY_TIMEOUT_MS) {}

  private get client(): Promise<SchemaRegistryClient> {
    const config = this.config;
    this.clientLoaded ??= import('@confluentinc/schemaregistry/dist/schemaregistry-client.js').then(
      ({ SchemaRegistryClient }) =>
        new SchemaRegistryClient({
          baseURLs: [config.url],
          maxRetries: 0,
          createAxiosDefaults: { timeout: this.timeoutMs },
          ...(config.username === undefined ? {} : { basicAuthCredentials: { credentialsSource: 'USER_INFO', userInfo: `${config.username}:${config.password ?? ''}` } }),
        }),
    );
    return this.clientLoaded;
  }

  /** The schema with this id, or null when the registry answers that it has none. */
  async byId(id: number): Promise<RegisteredSchema | null> {
    try {
      const info = await (await this.client).getBySubjectAndId('', id);
      return toRegistered(id, info);
    } catch (e) {
      if (isRestError(e) && e.status === 404 && e.errorCode === SCHEMA_NOT_FOUND) return null;
      throw this.classify(e, `schema id ${id}`);
    }
  }

  /** The latest version of a subject (`orders-value`), or null when the subject does not exist. */
  async latest(subject: string): Promise<(RegisteredSchema & { version: number }) | null> {
    try {
      const m = await (await this.client).getLatestSchemaMetadata(subject);
      return { ...toRegistered(m.id ?? 0, m), version: m.version ?? 0 };
    } catch (e) {
      if (isRestError(e) && e.status === 404 && (e.errorCode === SUBJECT_NOT_FOUND || e.errorCode === VERSION_NOT_FOUND)) return null;
      throw this.classify(e, `the latest schema of subject ${subject}`);
    }
  }

  /** Registers a schema under a subject (or finds it registered); its id. */
  async register(subject: string, type: SchemaType, schema: string): Promise<number> {
    try {
      return await (await this.client).register(subject, { schemaType: type, schema });
    } catch (e) {
      throw this.classify(e, `registering a ${type} schema under subject ${subject}`);
    }
  }

  /** One coded error from whatever the client threw. */
  classify(e: unknown, what: string): ExactlyOnceError {
    const url = this.config.url;
    if (isRestError(e)) {
      const said = `HTTP ${e.status}${e.errorCode > 0 ? `, error ${e.errorCode}` : ''}: ${e.message.split('\n')[0]!.slice(0, 200)}`;
      if (e.status >= 500 || e.status === 408 || e.status === 429) {
        return new ExactlyOnceError('EO_REGISTRY_UNAVAILABLE', `the Schema Registry at ${url} failed to answer for ${what} (${said})`, { cause: e });
      }
      if (e.status === 401 || e.status === 403) {
        return new ExactlyOnceError(
          'EO_REGISTRY_AUTH_FAILED',
          `the Schema Registry at ${url} refused ${e.status === 401 ? 'the login' : 'access'} for ${what} (${said}); check --schema-registry-username and the password (file or EXACTLYONCE_SCHEMA_REGISTRY_PASSWORD)`,
          { cause: e },
        );
      }
      const hint = e.errorCode <= 0 && e.status === 404 ? '; is --schema-registry-url the base of its Confluent-compatible API (for Apicurio: …/apis/ccompat/v7)?' : '';
      return new ExactlyOnceError('EO_REGISTRY_REFUSED', `the Schema Registry at ${url} refused ${what} (${said})${hint}`, { cause: e });
    }
    const code = (e as { code?: unknown }).code;
    if (e instanceof Error && (e.name === 'AxiosError' || typeof code === 'string')) {
      return new ExactlyOnceError('EO_REGISTRY_UNAVAILABLE', `the Schema Registry at ${url} does not answer (${typeof code === 'string' ? `${code}: ` : ''}${e.message.split('\n')[0]}); is it up? (\`exactlyonce stack status\` for the local stack)`, { cause: e });
    }
    return new ExactlyOnceError('EO_REGISTRY_REFUSED', `the Schema Registry at ${url}: ${what} failed (${e instanceof Error ? e.message : String(e)})`, { cause: e });
  }
}

function toRegistered(id: number, info: SchemaMetadata): RegisteredSchema {
  const type = (info.schemaType ?? 'AVRO').toUpperCase();
  return {
    id,
    type: type === 'PROTOBUF' || type === 'JSON' ? type : 'AVRO',
    schema: info.schema,
    references: (info.references ?? []).map((r) => ({ name: r.name, subject: r.subject, version: r.version })),
  };
}
