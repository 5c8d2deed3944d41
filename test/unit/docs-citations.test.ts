// Citations of a guide's section in messages, help texts and comments (issue 40: no stale citations):
// every `docs/<guide>.md, "<section>"` (or `README.md, "<section>"`) of src/, bin/, scripts/ and the
// Makefile names a heading of that file, word for word; and none cites the README by a section it no
// longer holds (`README, "…"`, `README "…"`: the sections moved to the guides of docs/).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The files whose text cites the guides: sources, the command, the scripts, the Makefile. */
function citingFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) return ['node_modules', 'dist', '.git'].includes(e.name) ? [] : walk(p);
      return /\.(ts|js|mjs|sh|cql)$/.test(e.name) || dir.endsWith(`${path.sep}bin`) ? [p] : [];
    });
  return [...['src', 'bin', 'scripts'].flatMap((d) => walk(path.join(root, d))), path.join(root, 'Makefile')].filter((f) => existsSync(f));
}

/** A file's text with comment continuations (` * `, `// `, `# ` at a line's start) joined into one line, so a citation wrapped over two lines is read whole. */
function joined(text: string): string {
  return text.replace(/\n[ \t]*(?:\*(?!\/)|\/\/|#)?[ \t]*/g, ' ');
}

/** The headings of a markdown file (outside fenced code), as written. */
export function headings(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  return new Set([...text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)].map((m) => m[1]!));
}

/**
 * The citations of a text: `docs/<file>.md, "<section>"` or `README.md, "<section>"`, a further
 * `and "<section>"` naming another section of the same file; quotes may be escaped (`\"`) in a string.
 */
export function citations(text: string): Array<{ file: string; section: string }> {
  const out: Array<{ file: string; section: string }> = [];
  const quoted = String.raw`\\?"([^"\\]+)\\?"`;
  for (const m of text.matchAll(new RegExp(String.raw`(?<![\w/.-])((?:docs/[\w-]+|README)\.md),?\s+${quoted}((?:,?\s+and\s+${quoted})*)`, 'g'))) {
    out.push({ file: m[1]!, section: m[2]! });
    for (const more of (m[3] ?? '').matchAll(new RegExp(quoted, 'g'))) out.push({ file: m[1]!, section: more[1]! });
  }
  return out;
}

/** A section cited by the README's name alone (`README, "…"`, `README "…"`, `README's "…"`): the README no longer holds them. */
export function staleCitations(text: string): string[] {
  return [...text.matchAll(/\bREADME(?!\.md)(?:'s)?,?\s*\\?"[^"\\]*\\?"?/g)].map((m) => m[0]);
}

test('every guide section cited in src/, bin/, scripts/ and the Makefile is a heading of that guide', () => {
  const problems: string[] = [];
  let found = 0;
  for (const file of citingFiles()) {
    for (const c of citations(joined(readFileSync(file, 'utf8')))) {
      found++;
      const guide = path.join(root, c.file);
      if (!existsSync(guide)) problems.push(`${path.relative(root, file)}: cites ${c.file}, which does not exist`);
      else if (!headings(guide).has(c.section)) problems.push(`${path.relative(root, file)}: cites ${c.file}, "${c.section}", which is not a heading of ${c.file}`);
    }
  }
  assert.ok(found >= 10, `found ${found} citations: the pattern no longer matches how they are written`);
  assert.deepEqual(problems, [], problems.join('\n'));
});

test('no file of src/, bin/, scripts/ or the Makefile cites the README by a section name (they moved to docs/)', () => {
  const problems: string[] = [];
  for (const file of citingFiles()) {
    for (const s of staleCitations(joined(readFileSync(file, 'utf8')))) {
      problems.push(`${path.relative(root, file)}: ${s}: cite the guide that holds it (docs/README.md lists them), e.g. docs/guarantees.md, "When the topic gains partitions"`);
    }
  }
  assert.deepEqual(problems, [], problems.join('\n'));
});

test('citations and stale citations are recognised as they are written', () => {
  assert.deepEqual(citations('see docs/guarantees.md, "When the topic gains partitions", for the way forward'), [{ file: 'docs/guarantees.md', section: 'When the topic gains partitions' }]);
  assert.deepEqual(citations('(docs/sinks.md, \\"Log and upsert modes\\")'), [{ file: 'docs/sinks.md', section: 'Log and upsert modes' }]);
  assert.deepEqual(citations('(docs/a.md, "One" and "Two")'), [
    { file: 'docs/a.md', section: 'One' },
    { file: 'docs/a.md', section: 'Two' },
  ]);
  assert.deepEqual(citations('(README.md, "A sink in five minutes"); bench/README.md, "Memory"'), [{ file: 'README.md', section: 'A sink in five minutes' }]);
  assert.deepEqual(citations(joined('/**\n * a stop (docs/guarantees.md, "When\n * the topic gains partitions").\n */')), [{ file: 'docs/guarantees.md', section: 'When the topic gains partitions' }]);
  assert.deepEqual(staleCitations('see README, "Alerts"; README "Your own job"; the README\'s "Quick start"; README.md, "Quick start"; bench/README.md, "Latency"'), [
    'README, "Alerts"',
    'README "Your own job"',
    'README\'s "Quick start"',
  ]);
});
