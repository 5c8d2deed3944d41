// A job of a default project (issue 43, item 1): `npm init` writes `"type": "commonjs"`, and the
// package's CLI (its build, as installed) must load a `.ts` job whatever the project's module type;
// an ES `.js` job that the project's type makes CommonJS gets one coded line naming the fix.
// The package is laid out as npm installs it (bin/exactlyonce, dist/, package.json) from a build of
// the sources: a clone's bin/exactlyonce runs through tsx's loader, where the failure did not show.
import assert from 'node:assert/strict';
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { ConnectionConfig } from '../../src/config.js';
import { freshKeyspace, repoRoot, runProcess, testConfig } from '../helpers.js';

/** A folder holding node_modules/exactlyonce as npm installs it, its dependencies those of this clone. */
async function installedPackage(t: TestContext): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'eo-module-type-'));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const pkg = join(root, 'node_modules', 'exactlyonce');
  mkdirSync(join(pkg, 'bin'), { recursive: true });
  // tsc emits even when it reports a type error elsewhere (`make typecheck` judges those).
  const tsc = await runProcess(process.execPath, [join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(repoRoot, 'tsconfig.build.json'), '--outDir', join(pkg, 'dist')]);
  assert.ok(existsSync(join(pkg, 'dist', 'src', 'cli', 'main.js')), `the build: ${tsc.stdout}${tsc.stderr}`);
  cpSync(join(repoRoot, 'src', 'cassandra', 'migrations'), join(pkg, 'dist', 'src', 'cassandra', 'migrations'), { recursive: true });
  copyFileSync(join(repoRoot, 'bin', 'exactlyonce'), join(pkg, 'bin', 'exactlyonce'));
  chmodSync(join(pkg, 'bin', 'exactlyonce'), 0o755);
  copyFileSync(join(repoRoot, 'package.json'), join(pkg, 'package.json'));
  symlinkSync(join(repoRoot, 'node_modules'), join(pkg, 'node_modules'));
  return root;
}

/** A project folder beside the package with `package.json` (its "type", or none) and one job file. */
function project(root: string, dir: string, type: string | undefined, file: string, source: string): string {
  const cwd = join(root, dir);
  mkdirSync(cwd);
  writeFileSync(join(cwd, 'package.json'), JSON.stringify({ name: dir, version: '1.0.0', ...(type === undefined ? {} : { type }) }));
  writeFileSync(join(cwd, file), source);
  return cwd;
}

/** An ES job that imports a value from the package (so its resolution from the job is exercised too). */
const job = (name: string, table: string) => `import type { Job } from 'exactlyonce';
import { toLong } from 'exactlyonce';

export default function createJob(): Job<string> {
  return {
    name: '${name}-' + toLong(7n).toString(),
    topic: 'unused',
    migrations: [{ version: 1, name: '${table}', cql: 'CREATE TABLE IF NOT EXISTS {{keyspace}}.${table} (k int PRIMARY KEY);' }],
    decode: (record) => ({ ok: true, value: String(record.offset) }),
    async open() {},
    async write() {},
  };
}
`;

function schemaApply(root: string, cwd: string, config: ConnectionConfig, file: string) {
  return runProcess(join(root, 'node_modules', 'exactlyonce', 'bin', 'exactlyonce'), ['schema', 'apply', '--job', file, '--cassandra', config.cassandra.join(','), '--keyspace', config.keyspace], { cwd });
}

test('the installed CLI loads a .ts job from a CommonJS project and from one without a type; an ES .js job under CommonJS gets one line naming the fix', async (t) => {
  const config = testConfig();
  const session = await freshKeyspace(t, config);
  const root = await installedPackage(t);

  for (const [dir, type] of [['commonjs-project', 'commonjs'], ['untyped-project', undefined]] as const) {
    const table = dir.replace('-project', '_t');
    const cwd = project(root, dir, type, 'job.ts', job(dir, table));
    const r = await schemaApply(root, cwd, config, 'job.ts');
    assert.equal(r.stderr, '', dir);
    assert.equal(r.code, 0, dir);
    assert.deepEqual(r.stdout.split('\n').filter((l) => l.includes(dir)), [`  applied ${dir}-7/1_${table}`], `${dir}: ${r.stdout}`);
    const tables = await session.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?', [config.keyspace, table]);
    assert.equal(tables.rowLength, 1, `${dir}: table ${table} created`);
  }

  const cwd = project(root, 'commonjs-js', 'commonjs', 'job.js', "export default function createJob() { return {}; }\n");
  const r = await schemaApply(root, cwd, config, 'job.js');
  assert.equal(
    r.stderr,
    'error EO_CONFIG_INVALID: --job: job.js is written as an ES module (import/export), but its package.json makes .js files CommonJS (`"type": "commonjs"`): ' +
      'rename it job.mjs (or write it in TypeScript, job.ts), or set `"type": "module"` in package.json\n',
  );
  assert.equal(r.code, 2);
});
