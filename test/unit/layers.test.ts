// The house's two rules about imports, read from the sources (docs/design.md §8, "Shape of the code"): no import
// circle among the files of src/, and no import runs back up the layers — a wing imports only wings
// below it (and its own files), so the engine never learns of events, sinks or the verifier.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** Each wing's rank: a file may import its own wing's files and those of a wing of lower rank. */
export const RANKS: Readonly<Record<string, number>> = {
  // shared utilities
  errors: 0, log: 0, prng: 0, suggest: 0, 'package-root': 0, 'text-table': 0, deadline: 0,
  secrets: 1,
  config: 2,
  // the servers' clients and the local stack
  cassandra: 3, kafka: 3, registry: 3, stack: 3,
  engine: 4,
  formats: 5,
  'jobs/events': 6, 'jobs/sink': 6,
  'job-loader': 7,
  verify: 8, operate: 8,
  dashboard: 9,
  harness: 10,
  worker: 11,
  // the benchmark (bench/, outside src/: the `bench` command runs it)
  bench: 11,
  cli: 12, index: 12,
};

/** `src/jobs/sink/x.ts` → `jobs/sink`, `src/engine/x.ts` → `engine`, `src/log.ts` → `log`. */
export function wingOf(file: string): string {
  if (path.relative(path.join(root, 'bench'), file).split(path.sep)[0] !== '..') return 'bench';
  const parts = path.relative(path.join(root, 'src'), file).split(path.sep);
  if (parts.length === 1) return parts[0]!.replace(/\.ts$/, '');
  return parts[0] === 'jobs' ? `jobs/${parts[1]}` : parts[0]!;
}

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : e.name.endsWith('.ts') ? [p] : [];
  });
}

/** Every relative import and re-export of each file of src/, type-only ones included, as files. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sources(path.join(root, 'src'))) {
    const text = readFileSync(file, 'utf8');
    const specs = [...text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+'(\.{1,2}\/[^']+)'/gm), ...text.matchAll(/import\(\s*'(\.{1,2}\/[^']+)'\s*\)/g)].map((m) => m[1]!);
    graph.set(file, specs.map((s) => path.resolve(path.dirname(file), s).replace(/\.js$/, '.ts')));
  }
  return graph;
}

/** The strongly connected components of more than one file (Tarjan), as lists of files. */
export function circles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component);
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

test('the circle finder finds a circle of three files and none in a chain', () => {
  const chain = new Map([['a', ['b']], ['b', ['c']], ['c', []]]);
  assert.deepEqual(circles(chain), []);
  const ring = new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]);
  assert.deepEqual(circles(ring).map((c) => [...c].sort()), [['a', 'b', 'c']]);
});

test('no import circle among the files of src/', () => {
  const graph = importGraph();
  assert.ok(graph.size > 100, `read ${graph.size} files`);
  const rel = (f: string) => path.relative(root, f);
  assert.deepEqual(circles(graph).map((c) => c.map(rel).sort()), []);
});

test('every file of src/ belongs to a ranked wing, and imports only its own wing or a lower one', () => {
  const problems: string[] = [];
  let crossings = 0;
  for (const [file, imports] of importGraph()) {
    const from = wingOf(file);
    if (RANKS[from] === undefined) {
      problems.push(`${path.relative(root, file)}: wing ${from} has no rank (test/unit/layers.test.ts RANKS)`);
      continue;
    }
    for (const target of imports) {
      const to = wingOf(target);
      if (to === from) continue;
      crossings++;
      if (RANKS[to] === undefined || RANKS[to]! >= RANKS[from]!) problems.push(`${path.relative(root, file)} (${from}, rank ${RANKS[from]}) imports ${path.relative(root, target)} (${to}, rank ${RANKS[to]})`);
    }
  }
  assert.ok(crossings > 100, `${crossings} imports cross wings`);
  assert.deepEqual(problems, []);
});
