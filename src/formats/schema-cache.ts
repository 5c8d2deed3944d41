/**
 * The schemas a worker has met, by id, compiled once: fetched from the registry before a batch is
 * decoded (`fetch`, async, retried by the engine while the registry does not answer), then read by the
 * decoders synchronously (`get`). A schema id never changes meaning in a registry, so a schema found is
 * kept for the life of the process: while the registry is down, records whose schemas are known keep
 * flowing; only a batch holding an id never seen waits for it.
 *
 * "No such id" is not a fact for ever: the schema may be registered a moment after the record was
 * produced with its id, or a lagging registry replica may not have it yet. So an id the registry says
 * it does not know is asked again with backoff (UNKNOWN_SCHEMA_RETRY_MS) before its records are
 * quarantined as `unknown_schema`; that answer is then kept for UNKNOWN_SCHEMA_TTL_MS only, so a
 * topic full of such records does not ask again for every batch, and a schema registered later is
 * found by the batches after it.
 */
import type { SchemaRegistry } from '../registry/schema-registry.js';
import type { CachedSchema } from './compile.js';

export type { CachedSchema } from './compile.js';

/** How long, in ms, an id the registry does not know is asked again (three tries: at 0, 1/3 and all of it) before its records are quarantined. */
export const UNKNOWN_SCHEMA_RETRY_MS = 5_000;
/** How long, in ms, the answer "no such id" is believed before the registry is asked again. */
export const UNKNOWN_SCHEMA_TTL_MS = 30_000;

export interface SchemaCacheOptions {
  /** See UNKNOWN_SCHEMA_RETRY_MS (0: quarantine at the first "no such id"). */
  unknownRetryMs?: number;
  /** See UNKNOWN_SCHEMA_TTL_MS. */
  unknownTtlMs?: number;
  /** The clock, epoch ms (tests). */
  now?: () => number;
}

export class SchemaCache {
  private readonly schemas = new Map<number, CachedSchema>();
  /** When each id's "no such id" answer stops being believed (Date.now() ms). */
  private readonly unknownUntil = new Map<number, number>();
  private readonly inFlight = new Map<number, Promise<void>>();
  private readonly retryMs: number;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    readonly registry: SchemaRegistry,
    options: SchemaCacheOptions = {},
  ) {
    this.retryMs = options.unknownRetryMs ?? UNKNOWN_SCHEMA_RETRY_MS;
    this.ttlMs = options.unknownTtlMs ?? UNKNOWN_SCHEMA_TTL_MS;
    this.now = options.now ?? Date.now;
  }

  /**
   * The schema fetched for this id, or undefined when it was never fetched. An expired "no such id"
   * is still returned: the batch that fetched it decodes with it; the next `fetch` asks again.
   */
  get(id: number): CachedSchema | undefined {
    return this.schemas.get(id);
  }

  /** Whether `fetch` would not ask the registry about this id: a schema found, or a "no such id" still believed. */
  has(id: number): boolean {
    const until = this.unknownUntil.get(id);
    return this.schemas.has(id) && (until === undefined || this.now() < until);
  }

  /** Fetches and compiles the ids not cached yet (each once, however many batches ask at the same time). */
  async fetch(ids: Iterable<number>): Promise<void> {
    const waits: Promise<void>[] = [];
    for (const id of new Set(ids)) {
      if (this.has(id)) continue;
      let p = this.inFlight.get(id);
      if (p === undefined) {
        p = this.load(id).finally(() => this.inFlight.delete(id));
        this.inFlight.set(id, p);
      }
      waits.push(p);
    }
    await Promise.all(waits);
  }

  private async load(id: number): Promise<void> {
    // Tries at 0, a third of the window and its end: a schema registered within the window is found.
    const waits = this.retryMs > 0 ? [this.retryMs / 3, (this.retryMs * 2) / 3] : [];
    let s = await this.registry.byId(id);
    for (const ms of waits) {
      if (s !== null) break;
      await new Promise((resolve) => setTimeout(resolve, ms));
      s = await this.registry.byId(id);
    }
    if (s === null) {
      this.schemas.set(id, { kind: 'unknown', id });
      this.unknownUntil.set(id, this.now() + this.ttlMs);
      return;
    }
    const { compile } = await import('./compile.js');
    this.schemas.set(id, compile(id, s.type, s.schema, s.references.length));
    this.unknownUntil.delete(id);
  }
}
