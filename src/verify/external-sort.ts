/**
 * Sorts more lines than fit in memory: lines are buffered up to a byte budget, each full buffer is
 * sorted and written to a temporary file (a run), and the runs are merged back in order, at most
 * FAN_IN at a time (more runs are first merged into fewer). Memory: the buffer, plus one read buffer
 * and one line per run being merged — independent of the number of lines. Lines are compared as
 * JavaScript strings (UTF-16 code units) and must not contain a newline.
 *
 * Hand-written rather than a package: the npm candidates (external-sorting 1.3, external-merge-sort
 * 0.1) are small, rarely updated and load whole runs; this is short and unit-tested
 * (test/unit/external-sort.test.ts).
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { once } from 'node:events';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';

/** Runs merged at once (each holds a read buffer of READ_BUFFER bytes). */
const FAN_IN = 64;
const READ_BUFFER = 64 * 1024;
/** What a buffered line costs beyond its characters (the string header, the array slot), roughly. */
const LINE_OVERHEAD = 64;

export class ExternalSort {
  private buffer: string[] = [];
  private bytes = 0;
  private runs: string[] = [];
  private dir: string | undefined;
  private spilled = 0;

  constructor(
    /** Bytes of lines held before a run is written. */
    private readonly budget: number,
    /** Where the runs' folder is made (default: the OS's temporary folder). */
    private readonly parent = os.tmpdir(),
  ) {}

  /** Runs written to disk so far. */
  get spilledRuns(): number {
    return this.spilled;
  }

  async add(line: string): Promise<void> {
    this.buffer.push(line);
    this.bytes += line.length * 2 + LINE_OVERHEAD;
    if (this.bytes >= this.budget) await this.spill();
  }

  /** Every line added, in order (once; then `close`). */
  async *sorted(): AsyncGenerator<string> {
    if (this.runs.length === 0) {
      const lines = this.buffer.sort(); // the default order is by UTF-16 code units, as `compare`
      this.buffer = [];
      this.bytes = 0;
      yield* lines;
      return;
    }
    if (this.buffer.length > 0) await this.spill();
    while (this.runs.length > FAN_IN) {
      const group = this.runs.splice(0, FAN_IN);
      const file = await this.newRun();
      await writeLines(file, merge(group));
      await Promise.all(group.map((f) => rm(f, { force: true })));
      this.runs.push(file);
    }
    yield* merge(this.runs);
  }

  /** Removes the runs (idempotent). */
  async close(): Promise<void> {
    this.buffer = [];
    if (this.dir !== undefined) await rm(this.dir, { recursive: true, force: true });
    this.dir = undefined;
    this.runs = [];
  }

  private async spill(): Promise<void> {
    const lines = this.buffer.sort(); // the default order is by UTF-16 code units, as `compare`
    this.buffer = [];
    this.bytes = 0;
    const file = await this.newRun();
    await writeLines(file, lines);
    this.runs.push(file);
    this.spilled++;
  }

  private async newRun(): Promise<string> {
    this.dir ??= await mkdtemp(path.join(this.parent, 'exactlyonce-verify-'));
    return path.join(this.dir, `run-${this.runs.length}-${Date.now()}-${Math.random().toString(36).slice(2)}`);
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

async function writeLines(file: string, lines: Iterable<string> | AsyncIterable<string>): Promise<void> {
  const out = createWriteStream(file);
  const failed = once(out, 'error').then(([e]) => Promise.reject(e as Error));
  failed.catch(() => undefined);
  for await (const line of lines) {
    if (!out.write(line + '\n')) await Promise.race([once(out, 'drain'), failed]);
  }
  out.end();
  await Promise.race([once(out, 'finish'), failed]);
}

/** The lines of sorted files, merged in order (a binary heap of the files' current lines). */
async function* merge(files: readonly string[]): AsyncGenerator<string> {
  const readers = files.map((f) => createInterface({ input: createReadStream(f, { highWaterMark: READ_BUFFER }), crlfDelay: Infinity })[Symbol.asyncIterator]());
  const heap: Array<{ line: string; i: number }> = [];
  const up = (k: number) => {
    while (k > 0) {
      const p = (k - 1) >> 1;
      if (compare(heap[p]!.line, heap[k]!.line) <= 0) break;
      [heap[p], heap[k]] = [heap[k]!, heap[p]!];
      k = p;
    }
  };
  const down = (k: number) => {
    for (;;) {
      const l = 2 * k + 1;
      const r = l + 1;
      let m = k;
      if (l < heap.length && compare(heap[l]!.line, heap[m]!.line) < 0) m = l;
      if (r < heap.length && compare(heap[r]!.line, heap[m]!.line) < 0) m = r;
      if (m === k) return;
      [heap[m], heap[k]] = [heap[k]!, heap[m]!];
      k = m;
    }
  };
  try {
    for (const [i, r] of readers.entries()) {
      const n = await r.next();
      if (n.done !== true) {
        heap.push({ line: n.value, i });
        up(heap.length - 1);
      }
    }
    while (heap.length > 0) {
      const top = heap[0]!;
      yield top.line;
      const n = await readers[top.i]!.next();
      if (n.done === true) {
        const last = heap.pop()!;
        if (heap.length > 0) {
          heap[0] = last;
          down(0);
        }
      } else {
        top.line = n.value;
        down(0);
      }
    }
  } finally {
    await Promise.all(readers.map((r) => r.return?.()));
  }
}
