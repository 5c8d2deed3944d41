/**
 * The one Kafka record key an upsert sink accepts for each key of its table (JSON key format).
 *
 * Why: the producer's partitioner places a record by its key's bytes, and the sink's upsert lets the
 * highest offset win, which orders a key's records only while they share one partition (rule 1 of
 * src/jobs/sink/sink-job.ts). If two different byte strings named the same key ("007" and "7" for a bigint,
 * `"7"` and `7`, " 7", an upper-case UUID, an ISO time and its epoch ms), a key's records could sit on
 * two partitions, and an older record at a higher offset of one partition would silently win over a
 * newer one of the other. So a record key must be exactly the canonical text of the key it names, and
 * any other spelling is quarantined (`non_canonical_key`): then one key has one byte string, hence one
 * partition.
 *
 * The canonical text:
 * - one key column (unless it reads a field of the key, `key.x`: then the key is an object as below):
 *   the value's text: text as is; int and bigint in decimal digits without leading
 *   zeros or `+` (`-` for negatives; 0, never -0); decimal with its digits as written in plain notation
 *   (1.50, not 1.5E0 or 01.50: 1.50 and 1.5 are two keys in Cassandra); boolean `true`/`false`; a
 *   timestamp as epoch milliseconds; a uuid or timeuuid in lower case; smallint and tinyint as int;
 * - several key columns: a JSON object of the key fields (nested by their field paths), in the order of
 *   the config's `key`, without spaces, each value as above, numbers bare (`{"shop":"s1","id":7}`;
 *   JavaScript's JSON.stringify of such an object, Python's `json.dumps(key, separators=(',', ':'),
 *   ensure_ascii=False)`).
 * Keys of a registry format (keyFormat avro, protobuf, json-schema) are the serializer's binary encoding,
 * one per value and schema, and are not checked here.
 */
import type { types } from '../../cassandra/session.js';
import { scalarKey } from './column-source.js';
import { decimalText } from './cql-types.js';
import type { SinkColumn } from './sink-config.js';

/** The canonical text of one converted key value (see above). */
function scalarText(col: SinkColumn, v: unknown): { text: string; quoted: boolean } {
  const name = col.type.kind === 'scalar' ? col.type.name : 'text';
  switch (name) {
    case 'text':
    case 'uuid':
    case 'timeuuid':
      return { text: String(v), quoted: true };
    case 'timestamp':
      return { text: String((v as Date).getTime()), quoted: false };
    case 'decimal':
      return { text: decimalText(v as InstanceType<typeof types.BigDecimal>), quoted: false };
    default:
      // int (a number), bigint (a Long), boolean: their text is canonical.
      return { text: String(v), quoted: false };
  }
}

type Tree = Map<string, Tree | string>;

/** The canonical record key of a converted key (`key` follows `columns`). */
export function canonicalKeyText(columns: readonly SinkColumn[], key: readonly unknown[]): string {
  if (scalarKey(columns)) return scalarText(columns[0]!, key[0]).text;
  const root: Tree = new Map();
  for (const [i, col] of columns.entries()) {
    let node = root;
    for (const p of col.field.slice(0, -1)) {
      let next = node.get(p);
      if (!(next instanceof Map)) node.set(p, (next = new Map()));
      node = next;
    }
    const s = scalarText(col, key[i]);
    node.set(col.field[col.field.length - 1]!, s.quoted ? JSON.stringify(s.text) : s.text);
  }
  const render = (t: Tree): string => `{${[...t].map(([k, v]) => `${JSON.stringify(k)}:${typeof v === 'string' ? v : render(v)}`).join(',')}}`;
  return render(root);
}
