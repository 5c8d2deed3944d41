// Every error and log code of the code base (`EO_…` in src/) is in docs/operations.md, with its cause and
// its way out: a code added to src/ without a line in the operations guide fails here, by name.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ErrorCodes } from '../../src/errors.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * `EO_` names in src/ that are not codes: environment variables src/stack/secure.ts hands to keytool and
 * to Kafka's scripts, so that no password is on a command line.
 */
const NOT_CODES = new Set(['EO_STORE_PASSWORD', 'EO_KAFKA_ADMIN_PASSWORD', 'EO_KAFKA_WORKER_PASSWORD']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sourceFiles(p) : /\.(ts|cql|js|mjs|html|css)$/.test(e.name) ? [p] : [];
  });
}

/** Every `EO_…` word of src/ (a whole word: `EO_REGISTRY_*` in a comment is no code). */
function codesInSrc(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of sourceFiles(path.join(root, 'src'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/\bEO_[A-Z][A-Z0-9_]*[A-Z0-9]\b/g)) {
      if (!found.has(m[0])) found.set(m[0], path.relative(root, file));
    }
  }
  return found;
}

/** The codes docs/operations.md names in a table row or a list item. */
function documented(): Set<string> {
  const text = readFileSync(path.join(root, 'docs', 'operations.md'), 'utf8');
  const lines = text.split('\n').filter((l) => /^\s*(\||[-*] )/.test(l));
  return new Set(lines.flatMap((l) => [...l.matchAll(/\bEO_[A-Z][A-Z0-9_]*[A-Z0-9]\b/g)].map((m) => m[0])));
}

test('every EO_ code in src/ is in docs/operations.md, in a table or a list', () => {
  const docs = documented();
  const missing = [...codesInSrc()].filter(([code]) => !NOT_CODES.has(code) && !docs.has(code)).map(([code, file]) => `${code} (first seen in ${file})`);
  assert.deepEqual(missing, [], `codes missing from docs/operations.md (add each with its cause and its way out):\n  ${missing.join('\n  ')}`);
});

test('every code of the error registry is found by the scan, and each table row gives a cause and a way out', () => {
  const codes = codesInSrc();
  for (const code of Object.keys(ErrorCodes)) assert.ok(codes.has(code), code);
  const text = readFileSync(path.join(root, 'docs', 'operations.md'), 'utf8');
  const section = text.slice(text.indexOf('\n## Error codes and stop codes\n'), text.indexOf('\n## Exit codes\n'));
  assert.ok(section.length > 100, 'docs/operations.md has "## Error codes and stop codes" before "## Exit codes"');
  for (const row of section.split('\n').filter((l) => /^\| `EO_/.test(l))) {
    const cells = row.split(' | ');
    assert.equal(cells.length, 3, `a row is | code | cause | way out |: ${row}`);
    assert.ok(cells.every((c) => c.replace(/[|\s]/g, '').length > 0), `an empty cell: ${row}`);
  }
});

test('the names that are not codes are still in src/ and are not codes of the registry', () => {
  const codes = codesInSrc();
  for (const name of NOT_CODES) {
    assert.ok(codes.has(name), `${name} is no longer in src/: drop it from NOT_CODES`);
    assert.ok(!(name in ErrorCodes), `${name} is an error code: document it in docs/operations.md`);
  }
});
