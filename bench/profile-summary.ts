/**
 * Summarises V8 CPU profiles (`exactlyonce bench --cpu-prof DIR`, or any `node --cpu-prof` output):
 * self time per function and per module (a package of node_modules, a file of ours, Node's internals,
 * GC, idle), so that "where does the time go" has a short answer.
 *
 *   node --import tsx bench/profile-summary.ts DIR/*.cpuprofile [--top 25] [--skip-seconds 5]
 *
 * --skip-seconds leaves out the first seconds of each profile (start-up: loading and compiling modules).
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { packageRoot } from '../src/package-root.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples?: number[];
  timeDeltas?: number[];
}

// The package's root (with a trailing slash), also when this runs from a build under dist/.
const repoRoot = `${packageRoot}/`;

/** Which module a frame belongs to: `pkg:<name>`, `src/...` / `bench/...`, `node:<x>`, or a V8 pseudo-frame. */
export function moduleOf(url: string, fn: string): string {
  if (url === '') return fn.startsWith('(') ? fn : '(native)';
  const u = url.replace(/^file:\/\//, '');
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(u);
  if (nm !== null) return `pkg:${nm[1]}`;
  if (u.startsWith('node:')) return u.split('/')[0]!;
  if (u.startsWith(repoRoot)) return u.slice(repoRoot.length);
  return u;
}

export function summarise(profile: Profile, skipMs = 0): { totalMs: number; byFunction: Map<string, number>; byModule: Map<string, number> } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<number, number>();
  if (profile.samples !== undefined && profile.timeDeltas !== undefined) {
    // Each sample's time is the delta to the next sample.
    let at = 0;
    for (let i = 0; i < profile.samples.length; i++) {
      at += profile.timeDeltas[i]!;
      const dt = profile.timeDeltas[i + 1] ?? 0;
      if (at < skipMs * 1000) continue;
      selfUs.set(profile.samples[i]!, (selfUs.get(profile.samples[i]!) ?? 0) + dt);
    }
  } else {
    const per = (profile.endTime - profile.startTime) / Math.max(1, profile.nodes.reduce((n, x) => n + (x.hitCount ?? 0), 0));
    for (const n of profile.nodes) selfUs.set(n.id, (n.hitCount ?? 0) * per);
  }
  const byFunction = new Map<string, number>();
  const byModule = new Map<string, number>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const f = byId.get(id)!.callFrame;
    const mod = moduleOf(f.url, f.functionName);
    const name = `${f.functionName || '(anonymous)'}  ${mod}${f.url === '' ? '' : `:${f.lineNumber + 1}`}`;
    byFunction.set(name, (byFunction.get(name) ?? 0) + us / 1000);
    byModule.set(mod, (byModule.get(mod) ?? 0) + us / 1000);
    total += us / 1000;
  }
  return { totalMs: total, byFunction, byModule };
}

function table(title: string, m: Map<string, number>, total: number, busy: number, top: number): string {
  const rows = [...m].sort((a, b) => b[1] - a[1]).slice(0, top);
  const lines = rows.map(([k, ms]) => `${(ms / 1000).toFixed(2).padStart(8)} s ${((ms / total) * 100).toFixed(1).padStart(5)} % ${((ms / busy) * 100).toFixed(1).padStart(5)} %  ${k}`);
  return [`${title}`, `  self time   total   of busy`, ...lines].join('\n');
}

const isMain = process.argv[1] !== undefined && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url);
if (isMain) {
  const usage = 'usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile… [--top N] [--skip-seconds S]';
  const fail = (message: string): never => {
    process.stderr.write(`profile-summary: ${message}\n${usage}\n`);
    process.exit(2);
  };
  let parsed: { values: { top?: string; 'skip-seconds'?: string; help?: boolean }; positionals: string[] } | undefined;
  try {
    parsed = parseArgs({ options: { top: { type: 'string' }, 'skip-seconds': { type: 'string' }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true });
  } catch (e) {
    fail((e as Error).message);
  }
  const { values, positionals: args } = parsed!;
  if (values.help === true) {
    process.stdout.write(`${usage}\n\nSelf time per module and per function of V8 CPU profiles (bench --cpu-prof DIR).\n  --top N            rows per table (25)\n  --skip-seconds S   leave out each profile's first S seconds (start-up)\n`);
    process.exit(0);
  }
  const top = Number(values.top ?? 25);
  if (!Number.isInteger(top) || top < 1) fail(`--top must be a whole number of rows, not ${values.top}`);
  const skip = Number(values['skip-seconds'] ?? 0);
  if (!Number.isFinite(skip) || skip < 0) fail(`--skip-seconds must be a number of seconds, not ${values['skip-seconds']}`);
  if (args.length === 0) fail('no profile given');
  for (const file of args) if (!existsSync(file)) fail(`no such file: ${file}`);
  const byFunction = new Map<string, number>();
  const byModule = new Map<string, number>();
  let total = 0;
  for (const file of args) {
    const s = summarise(JSON.parse(readFileSync(file, 'utf8')) as Profile, skip);
    total += s.totalMs;
    for (const [k, v] of s.byFunction) byFunction.set(k, (byFunction.get(k) ?? 0) + v);
    for (const [k, v] of s.byModule) byModule.set(k, (byModule.get(k) ?? 0) + v);
  }
  const busy = total - (byModule.get('(idle)') ?? 0);
  process.stdout.write(`${args.length} profile(s), ${(total / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s busy (not idle)\n\n`);
  process.stdout.write(`${table('by module', byModule, total, busy, top)}\n\n${table('by function', byFunction, total, busy, top)}\n`);
}
