/**
 * The sink's table (src/jobs/sink/sink-job.ts): the CQL that creates it, and the checks at start that
 * the table is one the sink can write (every column it writes is there; in upsert mode no write at
 * wall-clock time, rule 2 of the sink). A file of its own so that the job reads as what it does with
 * records, apart from what it requires of its table.
 */
import type { Client } from '../../cassandra/session.js';
import { ExactlyOnceError } from '../../errors.js';
import { closingTable } from './aggregate-close.js';
import { cqlColumnType } from './cql-types.js';
import type { SinkConfig } from './sink-config.js';
import { WALL_CLOCK_FLOOR } from './row-version.js';
import { aggregateTablesCql, partialsTable } from './sink-aggregate.js';


/** The CQL that creates the sink's table (`sink --print-cql`, and the job's migration 1). */
export function createTableCql(config: SinkConfig, keyspace = '{{keyspace}}'): string {
  if (config.mode === 'aggregate') return aggregateTablesCql(config, keyspace);
  const cols = config.columns.map((c) => `    ${c.name} ${cqlColumnType(c.type)}`);
  if (config.mode === 'log') {
    return [
      `-- Sink ${config.name}: topic ${config.topic}, log mode: one row per record, keyed by its Kafka partition and offset.`,
      `CREATE TABLE IF NOT EXISTS ${keyspace}.${config.table} (`,
      '    partition int,',
      '    offset bigint,',
      ...cols.map((c) => `${c},`),
      '    PRIMARY KEY (partition, offset)',
      ') WITH CLUSTERING ORDER BY (offset DESC);',
      '',
    ].join('\n');
  }
  return [
    `-- Sink ${config.name}: topic ${config.topic}, upsert mode: one row per ${config.key.join(', ')}, the record with the highest ${config.version === undefined ? 'offset' : `version (${config.version.spec})`}.`,
    `-- Every write is USING TIMESTAMP <${config.version === undefined ? 'offset' : 'version'}>: never write this table with wall-clock timestamps.`,
    `CREATE TABLE IF NOT EXISTS ${keyspace}.${config.table} (`,
    ...cols.map((c) => `${c},`),
    `    PRIMARY KEY ((${config.key.join(', ')}))`,
    ');',
    '',
  ].join('\n');
}

/**
 * Refuses a table the sink cannot write: one missing, or lacking a column the sink writes, and in
 * upsert mode one holding a write at wall-clock time (EO_SINK_TABLE_INVALID).
 */
export async function checkSinkTable(session: Client, keyspace: string, config: SinkConfig): Promise<void> {
  for (const [table, want] of tablesWritten(config)) {
    const r = await session.execute('SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?', [keyspace, table], { prepare: true });
    const have = new Set(r.rows.map((row) => row['column_name'] as string));
    const missing = want.filter((c) => !have.has(c));
    if (missing.length > 0) {
      throw new ExactlyOnceError(
        'EO_SINK_TABLE_INVALID',
        have.size === 0
          ? `table ${keyspace}.${table} does not exist; run \`exactlyonce schema apply --job <this config>\` (or create it with \`exactlyonce sink --config <file> --print-cql\`)`
          : `table ${keyspace}.${table} lacks the column${missing.length > 1 ? 's' : ''} ${missing.join(', ')} the sink writes`,
      );
    }
  }
  if (config.mode === 'upsert') await checkNoWallClockWrites(session, keyspace, config);
}

/** The tables a sink writes, each with the columns it writes there. */
function tablesWritten(config: SinkConfig): Array<[string, string[]]> {
  if (config.mode !== 'aggregate') return [[config.table, [...(config.mode === 'log' ? ['partition', 'offset'] : []), ...config.columns.map((c) => c.name)]]];
  const spec = config.aggregate!;
  const group = spec.groupBy.map((i) => config.columns[i]!.name);
  const window = spec.window === undefined ? [] : ['window_start'];
  return [
    [config.table, [...group, ...window, ...(spec.window === undefined ? [] : ['window_end']), ...spec.aggregates.map((a) => a.name)]],
    [partialsTable(config), [...group, ...window, 'partition', 'through_offset', 'records']],
    ...(spec.close === undefined ? [] : [[closingTable(config), ['partition', 'close_at', ...group, 'window_start', 'watermark', 'through_offset']] as [string, string[]]]),
  ];
}

/** Rule 2 of the sink (src/jobs/sink/sink-job.ts), on a sample: a cell written at wall-clock time would win over every later record. */
async function checkNoWallClockWrites(session: Client, keyspace: string, config: SinkConfig): Promise<void> {
  // A scalar column (a collection's WRITETIME is one per element, and refused before Cassandra 5).
  const col = config.columns.find((c) => c.type.kind === 'scalar' && !config.key.includes(c.name))?.name;
  if (col === undefined) return;
  const r = await session.execute(`SELECT ${config.key.join(', ')}, WRITETIME(${col}) AS wt FROM ${keyspace}.${config.table} LIMIT 1000`, [], { prepare: true });
  const foreign = r.rows.find((row) => row['wt'] !== null && BigInt(String(row['wt'])) >= WALL_CLOCK_FLOOR);
  if (foreign !== undefined) {
    throw new ExactlyOnceError(
      'EO_SINK_TABLE_INVALID',
      `table ${keyspace}.${config.table} holds a write at wall-clock time (${config.key.map((k) => `${k}=${String(foreign[k])}`).join(', ')}, ${col} written at ${String(foreign['wt'])} µs): ` +
        'an upsert sink writes USING TIMESTAMP <offset>, and such a write would win over every later record of its key. Only the sink may write this table; truncate it and let the sink replay the topic.',
    );
  }
}
