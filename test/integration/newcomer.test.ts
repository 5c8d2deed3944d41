// A newcomer following the README's "A sink in five minutes" literally: the commands are the fenced
// blocks under that heading, read from README.md at run time (so the README and this test cannot
// drift), and the config is the section's YAML block, written to the path its first line names. They
// run in order from an empty temporary folder against the test stack, and each step's outcome is
// asserted; so is every hint printed on the way (a command in backquotes, a --flag): it must name a
// command and flags that `exactlyonce <command> --help` lists. Every command's --help examples are
// checked the same way.
//
// Substitution: only what must be fresh for a test beside others on one stack, as whole tokens — the
// topic `shop.orders` (commands and YAML), the keyspace `shop` (the value of --keyspace), the sink's
// `name: orders` (hence its group exactlyonce.<name>), and the metrics ports 9464/9465 (free ones:
// other workers may hold those). `bin/exactlyonce` is this clone's launcher. Where the stack is comes
// from the environment, as the README says (EXACTLYONCE_BROKERS, EXACTLYONCE_CASSANDRA,
// EXACTLYONCE_STACK_DIR), so no command's text changes for it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { freePort } from '../../src/harness/worker-fleet.js';
import { BROKERS, CASSANDRA, cassandraSession, cliPath, localStack, repoRoot, runProcess, suffix, testConfig, topicsAdmin, waitFor } from '../helpers.js';

/** The README's section: its YAML block and its command blocks (fenced without a language). */
export function fiveMinuteSink(readme: string): { yaml: string; commands: string[][] } {
  const start = readme.indexOf('\n## A sink in five minutes\n');
  assert.ok(start >= 0, 'README has "## A sink in five minutes"');
  // Up to the next heading (the Avro subsection, or the next section).
  const ends = ['\n## ', '\n### '].map((h) => readme.indexOf(h, start + 1)).filter((i) => i > 0);
  const section = readme.slice(start, Math.min(...ends));
  const blocks = [...section.matchAll(/\n```(\w*)\n([\s\S]*?)\n```/g)].map((m) => ({ lang: m[1]!, body: m[2]! }));
  const yaml = blocks.find((b) => b.lang === 'yaml')!.body;
  const commands = blocks.filter((b) => b.lang === '').flatMap((b) => b.body.split('\n').filter((l) => l.startsWith('bin/exactlyonce ')).map(shellWords));
  return { yaml, commands };
}

/** A command line's words, as a POSIX shell splits them (single and double quotes; no expansions are used). */
function shellWords(line: string): string[] {
  const words: string[] = [];
  let w: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "'" || c === '"') {
      const close = line.indexOf(c, i + 1);
      w = (w ?? '') + line.slice(i + 1, close);
      i = close;
    } else if (c === ' ') {
      if (w !== undefined) words.push(w);
      w = undefined;
    } else if (c === '#' && w === undefined) {
      break;
    } else {
      w = (w ?? '') + c;
    }
  }
  if (w !== undefined) words.push(w);
  return words;
}

/** Each command path's --help (cached: one run per command). */
const helpCache = new Map<string, Promise<string | undefined>>();
function helpOf(commandPath: string[]): Promise<string | undefined> {
  const key = commandPath.join(' ');
  if (!helpCache.has(key)) helpCache.set(key, runProcess(cliPath, [...commandPath, '--help']).then((r) => (r.code === 0 ? r.stdout : undefined)));
  return helpCache.get(key)!;
}

/** A command path's flags, as its --help lists them (`--no-x` also as `--x`); undefined: no such command. */
async function flagsOf(commandPath: string[]): Promise<Set<string> | undefined> {
  const help = await helpOf(commandPath);
  return help === undefined ? undefined : new Set([...help.matchAll(/^ {2}(?:-\w, )?(--[a-z][a-z0-9-]*)/gm)].map((m) => m[1]!).flatMap((f) => [f, f.replace(/^--no-/, '--')]));
}

/** Every flag of every command (the connection flags are accepted by all, and hidden where unused). */
async function allFlags(): Promise<Set<string>> {
  const { EXAMPLE_PATHS } = await import('../../src/cli/examples.js');
  // Four --help runs at a time (each starts a node).
  for (let i = 0; i < EXAMPLE_PATHS.length; i += 4) await Promise.all(EXAMPLE_PATHS.slice(i, i + 4).map((p) => helpOf(p.split(' '))));
  const all = new Set<string>();
  for (const p of EXAMPLE_PATHS) for (const f of (await flagsOf(p.split(' '))) ?? []) all.add(f);
  return all;
}

/** The commands a command path's --help lists under `Commands:`. */
async function subcommandsOf(commandPath: string[]): Promise<string[]> {
  const help = (await helpOf(commandPath)) ?? '';
  const section = help.split('\nCommands:\n')[1]?.split('\n\n')[0] ?? '';
  return [...section.matchAll(/^ {2}([a-z][a-z-]*)/gm)].map((m) => m[1]!).filter((c) => c !== 'help');
}

/** The command path of `exactlyonce a b --x …` words: the words that name a command and its sub-commands. */
async function commandPath(words: string[]): Promise<string[]> {
  const path: string[] = [];
  for (const w of words) {
    if (!(await subcommandsOf(path)).includes(w)) break;
    path.push(w);
  }
  return path;
}

/** Problems with the hints in a command's output: backquoted commands and flags that do not exist. */
async function badHints(output: string, ranPath: string[]): Promise<string[]> {
  const problems: string[] = [];
  for (const m of output.matchAll(/`(?:bin\/|npx )?exactlyonce ([^`]*)`/g)) {
    const words = shellWords(m[1]!).filter((w) => !/^[<[]/.test(w));
    const p = await commandPath(words);
    // A word after a group (`topic make`) that is none of its commands is no command either.
    const next = words[p.length];
    if (p.length === 0 || (next !== undefined && !next.startsWith('-') && (await subcommandsOf(p)).length > 0)) {
      problems.push(`no such command: \`exactlyonce ${m[1]}\``);
      continue;
    }
    const flags = await flagsOf(p);
    for (const f of words.filter((w) => w.startsWith('--')).map((w) => w.replace(/=.*$/, ''))) if (!flags?.has(f)) problems.push(`\`exactlyonce ${p.join(' ')}\` has no ${f} (in ${m[0]})`);
  }
  // A flag named outside a command line (`(--brokers 127.0.0.1:9092)`) must be one some command takes.
  const known = await allFlags();
  for (const m of output.matchAll(/(?<![\w-])(--[a-z][a-z0-9-]+)/g)) if (!known.has(m[1]!)) problems.push(`a hint names ${m[1]}, which no command takes (ran \`${ranPath.join(' ')}\`)`);
  return [...new Set(problems)];
}

test("the README's five-minute sink, followed literally from an empty folder: each step's outcome, and every hint names a real command and flag", { timeout: 180_000 }, async (t) => {
  const { yaml, commands } = fiveMinuteSink(readFileSync(path.join(repoRoot, 'README.md'), 'utf8'));
  assert.deepEqual(
    commands.map((c) => c.slice(1, 3).join(' ')),
    ['stack up', 'topic create', 'topic produce', 'sink --config', 'schema apply', 'sink --config', 'sink --config', 'verify --job', 'cql --keyspace'],
    'the steps this test knows how to check',
  );
  const s = suffix();
  const topic = `newcomer.orders.${s}`;
  const keyspace = `newcomer_${s}`;
  const name = `orders_${s}`;
  const ports = new Map<string, string>();
  for (const p of ['9464', '9465']) ports.set(p, String(await freePort(20_000 + Math.floor(Math.random() * 20_000), new Set([...ports.values()].map(Number)))));
  const substitute = (w: string, prev: string | undefined) =>
    w === 'shop.orders' ? topic : prev === '--keyspace' && w === 'shop' ? keyspace : prev === '--metrics-port' && ports.has(w) ? ports.get(w)! : w;

  // A clone has the config at that path already: the same config as the README's block.
  const configPath = /^# (\S+)/.exec(yaml)![1]!;
  assert.deepEqual(parseYaml(yaml), parseYaml(readFileSync(path.join(repoRoot, configPath), 'utf8')), `README's config block and ${configPath}`);

  const dir = mkdtempSync(path.join(os.tmpdir(), 'eo-newcomer-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(path.join(dir, path.dirname(configPath)), { recursive: true });
  writeFileSync(path.join(dir, configPath), yaml.replace(/^name: orders\b/m, `name: ${name}`).replace(/^topic: shop\.orders$/m, `topic: ${topic}`));

  const config = testConfig({ topic, keyspace });
  const admin = topicsAdmin(t, config, [topic]);
  const session = await cassandraSession(t, config); // drops the keyspace when the test ends
  const env = { ...process.env, EXACTLYONCE_BROKERS: BROKERS, EXACTLYONCE_CASSANDRA: CASSANDRA, EXACTLYONCE_STACK_DIR: (await localStack()).dir, EXACTLYONCE_LOG_FORMAT: 'json' };
  const argsOf = (words: string[]) => words.slice(1).map((w, i, a) => substitute(w, a[i - 1]));

  const workers: Array<ReturnType<typeof spawn> & { out: string }> = [];
  for (const words of commands) {
    const args = argsOf(words);
    const ran = await commandPath(args);
    if (ran[0] === 'sink' && !args.includes('--print-cql')) {
      // A worker runs until stopped: started in the background, checked below.
      const child = Object.assign(spawn(cliPath, args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] }), { out: '' });
      child.stdout!.on('data', (d) => (child.out += d));
      child.stderr!.on('data', (d) => (child.out += d));
      t.after(() => void (child.exitCode === null && child.kill('SIGKILL')));
      workers.push(child);
      continue;
    }
    if (ran[0] === 'verify' || ran[0] === 'cql') {
      // The proof once the workers have stored the first record (their progress lines say so).
      await waitFor(() => workers.reduce((n, w) => n + Math.max(0, ...[...w.out.matchAll(/progress: (\d+) records stored/g)].map((m) => Number(m[1]))), 0) >= 1, {
        timeoutMs: 90_000,
        message: `a worker's progress line counts the first record stored:\n${workers.map((w) => w.out.slice(-1500)).join('\n---\n')}`,
      });
    }
    const r = await runProcess(cliPath, args, { cwd: dir, env, timeoutMs: 120_000 });
    const out = r.stdout + r.stderr;
    assert.equal(r.code, 0, `${ran.join(' ')}: ${out}`);
    assert.deepEqual(await badHints(out, ran), [], `${ran.join(' ')} printed:\n${out}`);
    switch (ran.join(' ')) {
      case 'topic create':
        assert.equal(r.stdout, `topic ${topic}: created, 3 partitions, replication factor 1, not compacted\n`);
        break;
      case 'topic produce':
        assert.match(r.stdout, new RegExp(`^produced to ${topic.replace(/\./g, '\\.')} partition [0-2] offset 0\\n$`));
        break;
      case 'sink':
        assert.match(r.stdout, new RegExp(`CREATE TABLE IF NOT EXISTS ${keyspace}\\.orders \\(\\n {4}order_id bigint,`));
        break;
      case 'schema apply':
        assert.match(r.stdout, new RegExp(`^keyspace ${keyspace}: created\\n[\\s\\S]*\\n {2}applied ${name}/1_orders\\n$`));
        assert.equal((await session.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ? AND table_name = ?', [keyspace, 'orders'])).rowLength, 1, out);
        break;
      case 'verify':
        assert.match(r.stdout, /^OK: every offset up to the checkpoints is stored exactly once with the record's values$/m, out);
        assert.match(r.stdout, /^ total( +\|){5} +0 +\| 1 +\| 1 +\| 0 +\| 0 +\| 0 +\| 0 +\| 0 +$/m, out);
        assert.match(r.stdout, /^checked 1 records in /m, out);
        break;
      case 'cql':
        assert.equal(r.stdout, ' order_id | customer | total\n----------+----------+------\n 1        | ada      | 9.90 \n(1 row)\n');
        break;
    }
  }
  // Two workers, each on its own port, both running and printing progress; they stop cleanly.
  assert.equal(workers.length, 2);
  for (const w of workers) {
    assert.equal(w.exitCode, null, `a worker exited:\n${w.out.slice(-2000)}`);
    assert.doesNotMatch(w.out, /EO_PORT_IN_USE/);
    assert.deepEqual(await badHints(w.out, ['sink']), [], w.out.slice(-3000));
    w.kill('SIGTERM');
  }
  for (const w of workers) {
    const code = await new Promise<number | null>((resolve) => (w.exitCode !== null ? resolve(w.exitCode) : w.on('exit', (c) => resolve(c))));
    assert.equal(code, 0, w.out.slice(-2000));
    assert.match(w.out, /"msg":"progress: \d+ records stored, 0 quarantined, lag (\d+|unknown), (partitions [0-2](,[0-2])*|no partitions owned \(yet\))"/);
  }
});

test("every command's --help examples name flags that command takes", async () => {
  const { EXAMPLE_PATHS, examplesOf } = await import('../../src/cli/examples.js');
  const problems: string[] = [];
  for (const p of ['', ...EXAMPLE_PATHS]) {
    if ((await flagsOf(p === '' ? [] : p.split(' '))) === undefined) problems.push(`no command ${p}`);
    // A group's examples are its commands': each line's flags against the command it runs.
    for (const line of examplesOf(p)) {
      const words = shellWords(line.trim()).slice(1);
      const ran = await commandPath(words);
      if (p !== '' && !ran.join(' ').startsWith(p)) problems.push(`${p}: an example runs \`${ran.join(' ')}\``);
      const flags = await flagsOf(ran);
      for (const f of words.filter((w) => w.startsWith('--'))) if (!flags?.has(f)) problems.push(`${ran.join(' ')}: ${f}`);
    }
    if (!(await helpOf(p === '' ? [] : p.split(' ')))?.includes('\nExamples:\n')) problems.push(`${p} --help has no examples`);
  }
  assert.deepEqual(problems, []);
});

test('the hint check finds a command or flag that does not exist', async () => {
  assert.deepEqual(await badHints('run `exactlyonce topic create --topic t --no-alerts`; or --brokers', ['sink']), []);
  assert.deepEqual(await badHints('run `exactlyonce topic make --topic t`', ['sink']), ['no such command: `exactlyonce topic make --topic t`']);
  assert.deepEqual(await badHints('run `exactlyonce topic create --partition 3`', ['sink']), ['`exactlyonce topic create` has no --partition (in `exactlyonce topic create --partition 3`)']);
  assert.deepEqual(await badHints('or --partitionz', ['sink']), ['a hint names --partitionz, which no command takes (ran `sink`)']);
  assert.deepEqual(await badHints('`npx exactlyonce frobnicate`', ['sink']), ['no such command: `exactlyonce frobnicate`']);
});
