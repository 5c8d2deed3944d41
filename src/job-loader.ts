/**
 * Loads the job of `exactlyonce run --job <module>` and `schema apply --job <module>`: any ES module
 * that exports a job factory — `export default function createJob(context) { return job }` (or a
 * named `createJob`), sync or async — or a ready `job`. A `.ts` module is loaded through tsx when the
 * CLI runs from its compiled build.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import type { ConnectionConfig } from './config.js';
import type { Job } from './engine/job.js';
import { ExactlyOnceError } from './errors.js';
import type { Logger } from './log.js';
import { loadResolvedSinkConfig } from './sink/sink-config.js';
import { SinkJob } from './sink/sink-job.js';

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
let tsxRegistered = false;

async function importModule(file: string): Promise<Record<string, unknown>> {
  // From the build, Node cannot load TypeScript by itself; tsx can. It is registered before the first
  // import (Node remembers a failed import of a URL) and for the whole process, not scoped (tsx's
  // `tsImport`): a scoped import loads a second copy of every module the job imports, 'exactlyonce'
  // included, and an ExactlyOnceError the job throws would then not be one to the engine
  // (`instanceof`): a retriable error would stop the partition instead of being retried.
  if (/\.[cm]?tsx?$/.test(file) && !underTsx && !tsxRegistered) {
    const { register } = (await import('tsx/esm/api')) as { register: () => unknown };
    register();
    tsxRegistered = true;
  }
  return (await import(pathToFileURL(file).href)) as Record<string, unknown>;
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
