/**
 * The collector's (src/dashboard/collector.ts) ways of reading a slow or failing source without being
 * held up by it: a value polled in the background that keeps its last value and error, one request
 * at a time per server, a deadline on a read, and an error said in one line with what to do about it.
 */

/** A value refreshed in the background every `intervalMs`; keeps the last value and the last error. */
export class Polled<T> {
  value: T | undefined;
  error: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private busy: Promise<void> | undefined;

  constructor(
    readonly name: string,
    private readonly intervalMs: number,
    private readonly fetch: () => Promise<T>,
    /** What it reads from, for the page's problems line. */
    readonly source = 'Cassandra',
  ) {}

  refresh(): Promise<void> {
    this.busy ??= this.fetch()
      .then((v) => {
        this.value = v;
        this.error = undefined;
      })
      .catch((e: unknown) => {
        this.error = oneLine(e);
      })
      .finally(() => {
        this.busy = undefined;
      });
    return this.busy;
  }

  start(): void {
    void this.refresh();
    this.timer = setInterval(() => void this.refresh(), this.intervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.busy;
  }
}

export function oneLine(e: unknown): string {
  const msg = (e instanceof Error ? e.message : String(e)).split('\n')[0]!.slice(0, 300);
  // Say what to do about the two problems a new set-up always meets first.
  if (/unknown topic or partition/i.test(msg)) return 'the topic does not exist; run `exactlyonce topic create`';
  if (/keyspace \S+ does not exist|unconfigured table/i.test(msg)) return `${msg}; run \`exactlyonce schema apply\``;
  return msg;
}

/** Runs `fn` unless a previous call is still pending (then shares it): a slow server gets one request at a time. */
export function singleFlight<T>(fn: () => Promise<T>): () => Promise<T> {
  let pending: Promise<T> | undefined;
  return () =>
    (pending ??= fn().finally(() => {
      pending = undefined;
    }));
}

export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]);
}
