/**
 * Additive schema evolution of a sink whose columns are derived from the registry (issue 37 item 7):
 * when a newer schema version adds fields, `exactlyonce schema apply --job <config>` adds their columns
 * (`ALTER TABLE … ADD <col> <type>`), never a drop or a type change.
 *
 * The design: the ALTERs are computed outside the job's versioned migrations, by comparing the
 * table's live columns (system_schema.columns) with the columns derived now. Migration 1 stays the
 * table's CREATE as recorded when it was first applied; a derived sink's CREATE text follows the
 * registry, so for it that one recorded checksum is not compared again (src/cli/schema.ts): the check
 * it stood for (the table is what the job declares) is made here, stronger, against the live table.
 * Versioned ALTER migrations derived from the subject's versions were the other choice; they need the
 * version the table was first created from (which the registry does not keep) and break for a table
 * made by hand from `sink --print-cql`. Comparing with the live table is idempotent (a crash between
 * two ALTERs: the next apply adds what is still missing) and works for Avro, Protobuf and JSON Schema.
 *
 * A column the table has that the derived ones lack (a field removed), or one whose type differs (a
 * field's type changed), is refused with EO_SINK_TABLE_INVALID naming the field, the old and the new
 * type; then nothing is altered.
 */
import { ExactlyOnceError } from '../../errors.js';
import { cqlColumnType } from './cql-types.js';
import type { SinkConfig } from './sink-config.js';

/** A type as system_schema.columns spells it, compared without spaces and case (`frozen<map<text, int>>`). */
const norm = (t: string) => t.replace(/\s+/g, '').toLowerCase().replaceAll('varchar', 'text');

/**
 * The statements that bring the live table (`live`: column name → type as system_schema.columns
 * has it) to the config's columns: one `ALTER TABLE … ADD` per column missing, in the config's order.
 * Throws EO_SINK_TABLE_INVALID when a column was removed or changed type. An empty table (`live`
 * empty) is no business of this: migration 1 creates it.
 */
export function evolveStatements(config: SinkConfig, live: ReadonlyMap<string, string>, keyspace: string): string[] {
  if (live.size === 0) return [];
  const own = new Set([...(config.mode === 'log' ? ['partition', 'offset'] : []), ...config.columns.map((c) => c.name)]);
  const problems: string[] = [];
  for (const [name, type] of live) {
    if (!own.has(name)) problems.push(`field for column ${name} was removed (the table has it as ${type}, the schema now has no such field)`);
  }
  const add: string[] = [];
  for (const c of config.columns) {
    const want = cqlColumnType(c.type);
    const have = live.get(c.name);
    if (have === undefined) add.push(`ALTER TABLE ${keyspace}.${config.table} ADD ${c.name} ${want}`);
    else if (norm(have) !== norm(want)) problems.push(`field ${c.spec} (column ${c.name}) changed type: was ${have}, now ${want}`);
  }
  if (problems.length > 0) {
    throw new ExactlyOnceError(
      'EO_SINK_TABLE_INVALID',
      `table ${keyspace}.${config.table} of sink ${config.name}: the registered schema changed in a way a column cannot follow: ${problems.join('; ')}. ` +
        'Only added fields are applied (ALTER TABLE … ADD); nothing was altered. Register a compatible version, or pin the columns in the config (`sink --print-cql` prints them) and give the sink a new table',
    );
  }
  return add;
}
