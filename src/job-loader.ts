/**
 * Loads the job of `exactlyonce run --job <module>` and `schema apply --job <module>`: any ES module
 * that exports a job factory — `export default function createJob(context) { return job }` (or a
 * named `createJob`), sync or async — or a ready `job`. A `.ts` module is loaded through tsx when the
 * CLI runs from its compiled build, as an ES module whatever the project's `"type"`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { register as registerHooks } from 'node:module';
import path from 'node:path';
import vm from 'node:vm';
import { pathToFileURL } from 'node:url';
import type { ConnectionConfig } from './config.js';
import type { Job } from './engine/job.js';
import { ExactlyOnceError } from './errors.js';
import type { Logger } from './log.js';
import { loadResolvedSinkConfig } from './jobs/sink/sink-config.js';
import { SinkJob } from './jobs/sink/sink-job.js';

/** What a job factory is given. */
export interface JobFactoryContext {
  /** The worker's validated connection settings (brokers, Cassandra, keyspace, topic, group). */
  readonly config: ConnectionConfig;
  /** `--job-option key=value` pairs, as given. */
  readonly options: Readonly<Record<string, string>>;
  readonly log: Logger;
}

export type JobFactory = (context: JobFactoryContext) => Job<any> | Promise<Job<any>>;

function isJob(x: unknown): x is Job<unknown> {
  const j = x as Job<unknown> | null;
  return j !== null && typeof j === 'object' && typeof j.name === 'string' && typeof j.decode === 'function' && typeof j.write === 'function' && typeof j.open === 'function';
}

/** This module runs from TypeScript sources (a clone's bin/exactlyonce through tsx), so tsx is loaded already. */
const underTsx = import.meta.url.endsWith('.ts');
let hooksRegistered = false;

/**
 * A module resolve hook (run in Node's hooks thread, hence plain JavaScript in a data: URL): a `.ts` or
 * `.tsx` file outside node_modules is an ES module, as TypeScript writes it, whatever the `"type"` of
 * its package.json. `npm init` writes `"type": "commonjs"`, under which tsx hands such a file to
 * Node's CommonJS loader, which finds ES syntax and loads it again as ES, inside its own require:
 * ERR_REQUIRE_CYCLE_MODULE. Registered after tsx, so it runs first and adjusts what tsx resolved; tsx
 * then compiles the file as ES.
 */
const TS_AS_ESM_HOOK = `export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  if ((r.format === 'commonjs' || r.format === 'commonjs-typescript') && r.url.startsWith('file:') && !r.url.includes('/node_modules/') && /\\.tsx?$/.test(new URL(r.url).pathname)) return { ...r, format: 'module' };
  return r;
}`;

async function importModule(file: string): Promise<Record<string, unknown>> {
  // From the build, Node cannot load TypeScript by itself; tsx can. It is registered before the first
  // import (Node remembers a failed import of a URL) and for the whole process, not scoped (tsx's
  // `tsImport`): a scoped import loads a second copy of every module the job imports, 'exactlyonce'
  // included, and the job's copy of the engine's state (its metrics, its caches) would not be the
  // worker's. (tsImport would not help the type either: it loads a `.ts` of a CommonJS package as CommonJS.)
  if (/\.[cm]?tsx?$/.test(file) && !hooksRegistered) {
    if (!underTsx) {
      const { register } = (await import('tsx/esm/api')) as { register: () => unknown };
      register();
    }
    registerHooks(`data:text/javascript,${encodeURIComponent(TS_AS_ESM_HOOK)}`);
    hooksRegistered = true;
  }
  if (esSyntaxUnderCommonJs(file)) {
    const name = path.basename(file);
    throw new ExactlyOnceError(
      'EO_CONFIG_INVALID',
      `--job: ${name} is written as an ES module (import/export), but its package.json makes .js files CommonJS (\`"type": "commonjs"\`): ` +
        `rename it ${name.replace(/\.js$/, '.mjs')} (or write it in TypeScript, ${name.replace(/\.js$/, '.ts')}), or set \`"type": "module"\` in package.json`,
    );
  }
  try {
    return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  } catch (e) {
    if (e instanceof ExactlyOnceError) throw e;
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `--job: cannot load ${file}: ${(e instanceof Error ? e.message : String(e)).split('\n')[0]}`, { cause: e });
  }
}

/** The `"type"` the package.json nearest to `dir` names, if any. */
function packageType(dir: string): string | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    const file = path.join(d, 'package.json');
    if (existsSync(file)) {
      try {
        return (JSON.parse(readFileSync(file, 'utf8')) as { type?: string }).type;
      } catch {
        return undefined;
      }
    }
    if (path.dirname(d) === d) return undefined;
  }
}

/**
 * True for a `.js` job that `"type": "commonjs"` makes CommonJS but that is written with ES
 * import/export: Node would refuse it with a warning and a stack trace. Compiled as Node compiles a
 * CommonJS module (inside a function), without running it. (Without a `"type"`, Node loads it as ES.)
 */
function esSyntaxUnderCommonJs(file: string): boolean {
  if (!file.endsWith('.js')) return false;
  if (packageType(path.dirname(file)) !== 'commonjs') return false;
  try {
    new vm.Script(`(function (exports, require, module, __filename, __dirname) {${readFileSync(file, 'utf8')}\n})`, { filename: file });
    return false;
  } catch (e) {
    return e instanceof SyntaxError && /import statement outside a module|Unexpected token 'export'|import\.meta/.test(e.message);
  }
}

/** A sink's config file rather than a module (`.yaml`, `.yml`, `.json`). */
export function isSinkConfig(spec: string): boolean {
  return /\.(ya?ml|json)$/i.test(spec);
}

/**
 * Imports `spec` (a path, relative to the working directory) and makes its job; a sink config
 * (`.yaml`, `.yml`, `.json`) makes the sink's job.
 */
export async function loadJobModule(spec: string, context: JobFactoryContext): Promise<Job<unknown>> {
  const file = path.resolve(spec);
  if (!existsSync(file)) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--job: no such file ${file}`);
  if (isSinkConfig(file)) return new SinkJob(await loadResolvedSinkConfig(file, context.config.schemaRegistry), context.config.schemaRegistry) as Job<unknown>;
  const mod = await importModule(file);
  const factory = mod['default'] ?? mod['createJob'];
  const job = typeof factory === 'function' ? await (factory as JobFactory)(context) : (mod['job'] ?? factory);
  if (!isJob(job)) {
    throw new ExactlyOnceError(
      'EO_CONFIG_INVALID',
      `--job: ${spec} exports no job factory: expected \`export default function createJob(context) { return job }\` (or \`export function createJob\`, or \`export const job\`), the job having name, decode, open and write`,
    );
  }
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(job.name)) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--job: ${spec}: the job's name must be 1-64 letters, digits, _ or - (got '${job.name}')`);
  return job;
}

/** `--job-option key=value` (repeatable) into an object; EO_CONFIG_INVALID for a pair without `=`. */
export function parseJobOptions(pairs: readonly string[] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const kv of pairs ?? []) {
    const i = kv.indexOf('=');
    if (i <= 0) throw new ExactlyOnceError('EO_CONFIG_INVALID', `--job-option: expected key=value (got '${kv}')`);
    out[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return out;
}
