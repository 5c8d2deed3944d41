// docs/reference.md is generated from the code (`make docs`, scripts/docs.ts): every command's --help and
// the sink config's keys. This regenerates it in memory and fails when the committed file differs, so a
// new flag, command or sink config key cannot be left out of it.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { referencePath, renderReference } from '../../scripts/docs.js';
import { sinkConfigKeysHelp } from '../../src/jobs/sink/sink-config-keys.js';

test('docs/reference.md is what `make docs` generates from the code', () => {
  const generated = renderReference();
  let committed = '';
  try {
    committed = readFileSync(referencePath, 'utf8');
  } catch {
    assert.fail('docs/reference.md is stale: run make docs (the file is missing)');
  }
  if (committed !== generated) {
    const a = committed.split('\n');
    const b = generated.split('\n');
    const at = a.findIndex((line, i) => line !== b[i]);
    const line = at === -1 ? Math.min(a.length, b.length) : at;
    assert.fail(`docs/reference.md is stale: run make docs (first difference at line ${line + 1}: committed ${JSON.stringify(a[line] ?? '<end>')}, generated ${JSON.stringify(b[line] ?? '<end>')})`);
  }
});

test('the reference is deterministic and holds every command and every sink config key', () => {
  const text = renderReference();
  assert.equal(renderReference(), text, 'two generations differ');
  assert.doesNotMatch(text, /\x1b\[/, 'no colour codes');
  assert.doesNotMatch(text, new RegExp(process.cwd().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')), 'no absolute path of the checkout');
  for (const cmd of ['exactlyonce sink', 'exactlyonce stack up', 'exactlyonce checkpoints reset', 'exactlyonce quarantine redrive', 'exactlyonce verify']) assert.match(text, new RegExp(`^### ${cmd}$`, 'm'), cmd);
  assert.ok(text.includes(sinkConfigKeysHelp()), 'the sink config keys, as the schema describes them');
});
