/**
 * The schemas a worker has met, by id, compiled once: fetched from the registry before a batch is
 * decoded (`fetch`, async, retried by the engine while the registry does not answer), then read by the
 * decoders synchronously (`get`). A schema id never changes meaning in a registry, so an entry is kept
 * for the life of the process: while the registry is down, records whose schemas are known keep
 * flowing; only a batch holding an id never seen waits for it.
 *
 * An id the registry answers it does not know is cached as unknown too (its records are quarantined),
 * so a topic full of such records does not ask again for every batch.
 */
import type { SchemaRegistry } from '../registry/schema-registry.js';
import type { CachedSchema } from './compile.js';

export type { CachedSchema } from './compile.js';

export class SchemaCache {
  private readonly schemas = new Map<number, CachedSchema>();
  private readonly inFlight = new Map<number, Promise<void>>();

  constructor(readonly registry: SchemaRegistry) {}

  get(id: number): CachedSchema | undefined {
    return this.schemas.get(id);
  }

  /** Fetches and compiles the ids not cached yet (each once, however many batches ask at the same time). */
  async fetch(ids: Iterable<number>): Promise<void> {
    const waits: Promise<void>[] = [];
    for (const id of new Set(ids)) {
      if (this.schemas.has(id)) continue;
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
    const s = await this.registry.byId(id);
    const { compile } = await import('./compile.js');
    this.schemas.set(id, s === null ? { kind: 'unknown', id } : compile(id, s.type, s.schema, s.references.length));
  }
}
