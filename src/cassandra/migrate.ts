/**
 * Versioned schema: the CQL files of ./migrations (NNN_name.cql) are applied in order and recorded in
 * `<keyspace>.schema_migrations`, so a second apply is a no-op. Every statement is also written
 * `IF NOT EXISTS`, so a half-applied file (a crash between two statements) is safe to run again.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ExactlyOnceError } from '../errors.js';
import type { Client } from './session.js';

const migrationsDir = fileURLToPath(new URL('./migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  checksum: string;
  statements: string[];
}

/** Keyspace replication, as `SimpleStrategy:RF` or `NetworkTopologyStrategy:dc=RF[,dc=RF…]`. */
export type Replication =
  | { class: 'SimpleStrategy'; replicationFactor: number }
  | { class: 'NetworkTopologyStrategy'; dataCenters: Record<string, number> };

export function parseReplication(spec: string): Replication {
  const fail = () =>
    new ExactlyOnceError(
      'EO_CONFIG_INVALID',
      `--replication: expected SimpleStrategy:RF or NetworkTopologyStrategy:DC=RF[,DC=RF…] (got '${spec}')`,
    );
  const [cls, rest = ''] = spec.split(':', 2);
  if (cls === 'SimpleStrategy' && /^\d+$/.test(rest) && Number(rest) >= 1) {
    return { class: 'SimpleStrategy', replicationFactor: Number(rest) };
  }
  if (cls === 'NetworkTopologyStrategy') {
    const dcs = rest.split(',').map((kv) => /^([A-Za-z0-9_.-]+)=(\d+)$/.exec(kv.trim()));
    if (dcs.length > 0 && dcs.every((m) => m !== null && Number(m[2]) >= 1)) {
      return { class: 'NetworkTopologyStrategy', dataCenters: Object.fromEntries(dcs.map((m) => [m![1], Number(m![2])])) };
    }
  }
  throw fail();
}

export function replicationCql(r: Replication): string {
  if (r.class === 'SimpleStrategy') return `{'class': 'SimpleStrategy', 'replication_factor': ${r.replicationFactor} }`;
  const dcs = Object.entries(r.dataCenters).map(([dc, rf]) => `'${dc}': ${rf}`).join(', ');
  return `{'class': 'NetworkTopologyStrategy', ${dcs} }`;
}

/** Splits a CQL file into statements, dropping `--` comments. */
export function splitStatements(cql: string): string[] {
  return cql
    .split('\n')
    .map((line) => line.replace(/--.*$/, ''))
    .join('\n')
    .split(';')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
}

export function loadMigrations(keyspace: string, dir = migrationsDir): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{3}_[a-z0-9_]+\.cql$/.test(f))
    .sort()
    .map((file) => {
      const text = readFileSync(dir + file, 'utf8');
      return {
        version: Number(file.slice(0, 3)),
        name: file.slice(4, -4),
        checksum: createHash('sha256').update(text).digest('hex').slice(0, 16),
        statements: splitStatements(text.replaceAll('{{keyspace}}', keyspace)),
      };
    });
}

export interface ApplyResult {
  createdKeyspace: boolean;
  applied: string[];
  skipped: string[];
  truncated: string[];
}

export async function applySchema(
  client: Client,
  keyspace: string,
  replication: Replication,
  options: { reset?: boolean } = {},
): Promise<ApplyResult> {
  const existed = (
    await client.execute('SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = ?', [keyspace])
  ).rowLength > 0;
  await client.execute(`CREATE KEYSPACE IF NOT EXISTS ${keyspace} WITH REPLICATION = ${replicationCql(replication)}`);
  await client.execute(
    `CREATE TABLE IF NOT EXISTS ${keyspace}.schema_migrations (version int PRIMARY KEY, name text, checksum text, applied_at timestamp)`,
  );
  const done = new Map(
    (await client.execute(`SELECT version, checksum FROM ${keyspace}.schema_migrations`)).rows.map((r) => [
      r['version'] as number,
      r['checksum'] as string,
    ]),
  );
  const result: ApplyResult = { createdKeyspace: !existed, applied: [], skipped: [], truncated: [] };
  for (const m of loadMigrations(keyspace)) {
    const label = `${String(m.version).padStart(3, '0')}_${m.name}`;
    if (done.has(m.version)) {
      result.skipped.push(label);
      continue;
    }
    for (const statement of m.statements) await client.execute(statement);
    await client.execute(
      `INSERT INTO ${keyspace}.schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, toTimestamp(now()))`,
      [m.version, m.name, m.checksum],
    );
    result.applied.push(label);
  }
  if (options.reset === true) {
    const tables = await client.execute('SELECT table_name FROM system_schema.tables WHERE keyspace_name = ?', [keyspace]);
    for (const row of tables.rows) {
      const table = row['table_name'] as string;
      if (table === 'schema_migrations') continue;
      await client.execute(`TRUNCATE ${keyspace}.${table}`);
      result.truncated.push(table);
    }
  }
  return result;
}

/**
 * Refuses (EO_CASSANDRA_QUERY) a keyspace made by an older version, which lacks columns this version
 * writes (a worker would otherwise fail on its first checkpoint with Cassandra's bare "Undefined column
 * name"). It reads the schema itself, not `schema_migrations`: those rows are ordinary writes, which a
 * crash on the periodic commit log can take back while the tables they record stay (chaos met it).
 * The way out is `exactlyonce schema apply`.
 */
export async function requireSchema(client: Client, keyspace: string, checkpointsTable: 'checkpoints' | 'job_checkpoints'): Promise<void> {
  // The checkpoints table the job writes (the events job keeps the first one: src/engine/engine-tables.ts).
  const r = await client.execute('SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [keyspace, checkpointsTable], { prepare: true });
  // A table that is gone altogether is not an older version's: the planner stops its partitions, coded.
  if (r.rowLength > 0 && !r.rows.some((row) => row['column_name'] === 'replay')) {
    throw new ExactlyOnceError(
      'EO_CASSANDRA_QUERY',
      `keyspace ${keyspace} lacks ${checkpointsTable}.replay (schema migration 060_checkpoint_replay), which this version writes; ` +
        `run \`exactlyonce schema apply --keyspace ${keyspace}\` (it changes nothing already there)`,
    );
  }
}

/** A job's own migration (src/engine/job.ts JobMigration). */
export interface JobMigrationSource {
  readonly version: number;
  readonly name: string;
  readonly cql: string;
}

export interface JobApplyResult {
  applied: string[];
  skipped: string[];
}

/**
 * Applies a job's own migrations to `keyspace` (which `applySchema` made), in version order, each once:
 * recorded under the job's name in `job_schema_migrations` (migration 010), apart from the engine's
 * `schema_migrations`. A recorded migration whose text changed since is refused (EO_CONFIG_INVALID):
 * its tables would silently differ from what the job now declares; add a new version instead.
 */
export async function applyJobMigrations(
  client: Client,
  keyspace: string,
  job: string,
  migrations: readonly JobMigrationSource[],
  /** Recorded versions whose text may have changed since (a derived sink's CREATE, whose table src/jobs/sink/evolve.ts checks live instead). */
  options: { followsRegistry?: readonly number[] } = {},
): Promise<JobApplyResult> {
  const versions = migrations.map((m) => m.version);
  if (versions.some((v) => !Number.isSafeInteger(v) || v < 1) || new Set(versions).size !== versions.length) {
    throw new ExactlyOnceError('EO_CONFIG_INVALID', `job ${job}: migration versions must be distinct whole numbers from 1 (got ${versions.join(', ')})`);
  }
  const done = new Map(
    (await client.execute(`SELECT version, checksum FROM ${keyspace}.job_schema_migrations WHERE job = ?`, [job], { prepare: true })).rows.map((r) => [
      r['version'] as number,
      r['checksum'] as string,
    ]),
  );
  const result: JobApplyResult = { applied: [], skipped: [] };
  for (const m of [...migrations].sort((a, b) => a.version - b.version)) {
    const label = `${job}/${m.version}_${m.name}`;
    const checksum = createHash('sha256').update(m.cql).digest('hex').slice(0, 16);
    const recorded = done.get(m.version);
    if (recorded !== undefined) {
      if (recorded !== checksum && !(options.followsRegistry ?? []).includes(m.version)) {
        throw new ExactlyOnceError('EO_CONFIG_INVALID', `job ${job}: migration ${m.version} (${m.name}) was applied with another text (checksum ${recorded}, now ${checksum}); applied migrations never change: add version ${Math.max(...versions) + 1}`);
      }
      result.skipped.push(label);
      continue;
    }
    for (const statement of splitStatements(m.cql.replaceAll('{{keyspace}}', keyspace))) await client.execute(statement);
    await client.execute(
      `INSERT INTO ${keyspace}.job_schema_migrations (job, version, name, checksum, applied_at) VALUES (?, ?, ?, ?, toTimestamp(now()))`,
      [job, m.version, m.name, checksum],
      { prepare: true },
    );
    result.applied.push(label);
  }
  return result;
}
