// Every relative link of the documentation points at a file of the repository, and every #anchor at a
// heading of its target (GitHub's heading slugs); no document cites one outside the repository (a
// `../shared/…` path, a DESIGN.md the repository does not hold).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

function markdownUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? markdownUnder(p) : e.name.endsWith('.md') ? [p] : [];
  });
}

/** The documents checked: the README, every guide under docs/, and the benchmark's README. */
const documents = () => [path.join(root, 'README.md'), ...markdownUnder(path.join(root, 'docs')), path.join(root, 'bench', 'README.md')].filter((f) => existsSync(f));

/** Text outside fenced code blocks and inline code: links are not looked for inside them. */
function prose(text: string): string {
  return text.replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor of a heading: markup dropped, lower case, punctuation removed, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/[`*_]/g, (c) => (c === '_' ? '_' : ''))
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a markdown file: one per heading, repeated headings numbered as GitHub does (-1, -2, …). */
function anchors(file: string): Set<string> {
  const text = readFileSync(file, 'utf8').replace(/^(`{3,}|~{3,})[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

/** The links of a document: inline `[text](target)` and `![alt](target)`, and reference definitions `[x]: target`. */
function links(text: string): string[] {
  const p = prose(text);
  const inline = [...p.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const refs = [...p.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!);
  return [...inline, ...refs];
}

/** What is wrong with one link of `file`, or undefined. */
function problem(file: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto: — not checked here
  const [rawPath, anchor] = target.split('#', 2) as [string, string | undefined];
  const linkPath = decodeURIComponent(rawPath);
  const resolved = linkPath === '' ? file : path.resolve(path.dirname(file), linkPath);
  if (!resolved.startsWith(root + path.sep) && resolved !== root) return `${target}: outside the repository`;
  if (!existsSync(resolved)) return `${target}: no such file (${path.relative(root, resolved)})`;
  if (anchor !== undefined && anchor !== '' && resolved.endsWith('.md') && statSync(resolved).isFile()) {
    if (!anchors(resolved).has(anchor.toLowerCase())) return `${target}: no heading #${anchor} in ${path.relative(root, resolved)}`;
  }
  return undefined;
}

test('every relative link and #anchor of README.md, docs/ and bench/README.md resolves', () => {
  const problems: string[] = [];
  for (const file of documents()) {
    for (const target of links(readFileSync(file, 'utf8'))) {
      const p = problem(file, target);
      if (p !== undefined) problems.push(`${path.relative(root, file)}: ${p}`);
    }
  }
  assert.deepEqual(problems, [], `broken links:\n  ${problems.join('\n  ')}`);
});

/** Files of the repository that may cite documents: sources, tests, scripts, docs, the READMEs, the Makefile. */
function citingFiles(): string[] {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) return ['node_modules', 'dist', '.git', 'results'].includes(e.name) ? [] : walk(p);
      return /\.(ts|js|mjs|sh|md|ya?ml|cql|json|html|css)$|^Makefile$|^Containerfile$/.test(e.name) ? [p] : [];
    });
  return [...['src', 'test', 'scripts', 'docs', 'bench', 'deploy', 'examples', 'monitoring', 'bin', 'stack'].filter((d) => existsSync(path.join(root, d))).flatMap((d) => walk(path.join(root, d))), ...['README.md', 'Makefile'].map((f) => path.join(root, f)).filter((f) => existsSync(f))];
}

test('no file cites a document outside the repository (../shared/…, a DESIGN.md the repository lacks)', () => {
  const self = fileURLToPath(import.meta.url);
  const problems: string[] = [];
  for (const file of citingFiles()) {
    if (file === self) continue;
    const text = readFileSync(file, 'utf8');
    text.split('\n').forEach((line, i) => {
      const where = `${path.relative(root, file)}:${i + 1}`;
      if (/(^|[\s(`'"])\.\.\/shared\b/.test(line)) problems.push(`${where}: cites ../shared, outside the repository`);
      for (const m of line.matchAll(/[\w./-]*DESIGN\.md/g)) {
        const cited = m[0];
        const candidates = [path.resolve(path.dirname(file), cited), path.resolve(root, cited)];
        if (!candidates.some((c) => c.startsWith(root + path.sep) && existsSync(c))) problems.push(`${where}: cites ${cited}, which is not in the repository (the design is docs/design.md)`);
      }
    });
  }
  assert.deepEqual(problems, [], problems.join('\n'));
});

test("the slugs are GitHub's", () => {
  assert.equal(slug('In your own project: `npm install exactlyonce`'), 'in-your-own-project-npm-install-exactlyonce');
  assert.equal(slug('One job, one configuration — and changing the rule'), 'one-job-one-configuration--and-changing-the-rule');
  assert.equal(slug("The local stack's commit log"), 'the-local-stacks-commit-log');
  assert.equal(slug('A local cluster: 3 Cassandra nodes, 3 Kafka brokers'), 'a-local-cluster-3-cassandra-nodes-3-kafka-brokers');
  assert.equal(slug('Goals (issue 23)'), 'goals-issue-23');
});
