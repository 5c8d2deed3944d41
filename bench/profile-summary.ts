/**
 * Summarises V8 CPU profiles (`exactlyonce bench --cpu-prof DIR`, or any `node --cpu-prof` output):
 * self time per function and per module (a package of node_modules, a file of ours, Node's internals,
 * GC, idle), so that "where does the time go" has a short answer.
 *
 *   node --import tsx bench/profile-summary.ts DIR/*.cpuprofile [--top 25] [--skip-seconds 5]
 *
 * --skip-seconds leaves out the first seconds of each profile (start-up: loading and compiling modules).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
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
  const args = process.argv.slice(2);
  const topAt = args.indexOf('--top');
  const top = topAt >= 0 ? Number(args.splice(topAt, 2)[1]) : 25;
  const skipAt = args.indexOf('--skip-seconds');
  const skip = skipAt >= 0 ? Number(args.splice(skipAt, 2)[1]) : 0;
  if (args.length === 0) {
    process.stderr.write('usage: node --import tsx bench/profile-summary.ts FILE.cpuprofile… [--top N] [--skip-seconds S]\n');
    process.exit(2);
  }
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
