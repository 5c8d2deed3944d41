/**
 * How the auditors talk to Cassandra: every statement prepared, retried while Cassandra is unavailable
 * or slow (an audit runs long and may outlive a node restart), pages streamed one at a time.
 */
import { isRetriableCassandraError, type Client, type QueryOptions, type ResultSet, type Row } from '../cassandra/session.js';
import { retry } from '../engine/retry.js';

/** How long one statement is retried before the audit gives up, in ms. */
const DEADLINE_MS = 120_000;

/** One statement, retried (reads, and the idempotent writes of the proof). */
export function execute(session: Client, query: string, params: unknown[], options: QueryOptions = {}): Promise<ResultSet> {
  return retry(() => session.execute(query, params, { prepare: true, ...options }), { server: 'Cassandra', isRetriable: isRetriableCassandraError, deadlineMs: DEADLINE_MS });
}

/**
 * Every row of a query, a page (`fetchSize` rows) at a time; a page that fails is fetched again. The
 * ledgers take pages: one await per page, not per row (per-row awaits cost a fifth of a full audit's CPU).
 */
export async function* pages<T>(session: Client, query: string, params: unknown[], map: (row: Row) => T, fetchSize = 5000): AsyncGenerator<T[]> {
  let pageState: string | undefined;
  do {
    const r = await execute(session, query, params, { fetchSize, pageState });
    yield r.rows.map(map);
    pageState = r.pageState ?? undefined;
  } while (pageState !== undefined);
}

/** Every row of a query, one by one (see `pages`). */
export async function* pagedRows<T>(session: Client, query: string, params: unknown[], map: (row: Row) => T, fetchSize = 5000): AsyncGenerator<T> {
  for await (const page of pages(session, query, params, map, fetchSize)) yield* page;
}

/** Runs `fn` for every item, at most `limit` at a time; rejects with the first failure. */
export async function inParallel<T>(items: Iterable<T>, limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  const it = items[Symbol.iterator]();
  let failed: unknown;
  const lane = async () => {
    for (let n = it.next(); !n.done && failed === undefined; n = it.next()) {
      try {
        await fn(n.value);
      } catch (e) {
        failed ??= e;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, lane));
  if (failed !== undefined) throw failed;
}
