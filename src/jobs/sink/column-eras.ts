/**
 * The columns a derived sink gained after it first ran, and from which offset of each partition they
 * are stored (issue 37 item 7): what lets a worker restart on the new columns after `schema apply --job`
 * added them, with every row still a pure function of its record.
 *
 * Workers with the old columns wrote each record's row without the new columns (onUnknown: ignore) or
 * quarantined it (onUnknown: quarantine). Writing the records from the switch on with the new columns
 * is what the user wants; writing a record from before it again (a replay after a crash or a reset)
 * with the new columns would make its row depend on when it was written, and `verify --job` could not
 * tell a right row from a stale one. So the switch is an offset per partition, stored with the job's
 * settings (`columnsFrom`): a record below it is decoded as the old columns decoded it (the added
 * columns left unset, their fields unknown), one at or past it with every column. The offsets are the
 * partitions' log ends when `schema apply --job` moves the columns forward, with no worker running
 * (see `moveColumnsForward`); a partition added later has every column from offset 0.
 *
 * The move (`moveColumnsForward`), like `alerts rule`: a mark in the stored settings first (from then on
 * every worker that starts refuses, EO_JOB_CONFIG_MISMATCH), then no partition may have an owner, then
 * the log ends are read and the new columns and their offsets stored, which removes the mark. An
 * interrupted move leaves the mark; the next `schema apply --job` finishes it or removes it.
 */
import type { Client } from '../../cassandra/session.js';
import { CheckpointStore, OWNER_TTL_S } from '../../engine/checkpoint-store.js';
import { JobBinding, type Settings } from '../../engine/job-binding.js';
import { ExactlyOnceError } from '../../errors.js';

/** Column name → partition → the first offset whose record the column is stored for. */
export type ColumnsFrom = ReadonlyMap<string, ReadonlyMap<number, bigint>>;

/** The stored setting's key, and the mark of a move under way. */
export const COLUMNS_FROM = 'columnsFrom';
export const COLUMNS_MOVING = 'columnsMoving';

/** The stored setting (`{"channel":{"0":"17","1":"0"}}`), or undefined when no column was added. */
export function columnsFromSetting(from: ColumnsFrom): string | undefined {
  if (from.size === 0) return undefined;
  return JSON.stringify(Object.fromEntries([...from].map(([c, parts]) => [c, Object.fromEntries([...parts].sort((a, b) => a[0] - b[0]).map(([p, o]) => [String(p), String(o)]))])));
}

/** The setting read back; throws EO_JOB_CONFIG_MISMATCH when it is not one `columnsFromSetting` writes. */
export function parseColumnsFrom(text: string | number | boolean | undefined): ColumnsFrom {
  if (text === undefined) return new Map();
  const refuse = () => new ExactlyOnceError('EO_JOB_CONFIG_MISMATCH', `the job's stored ${COLUMNS_FROM} is not what schema apply --job writes: ${String(text).slice(0, 200)}`);
  let raw: unknown;
  try {
    raw = JSON.parse(String(text));
  } catch {
    throw refuse();
  }
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw refuse();
  const out = new Map<string, Map<number, bigint>>();
  for (const [column, parts] of Object.entries(raw as Record<string, unknown>)) {
    if (parts === null || typeof parts !== 'object' || Array.isArray(parts)) throw refuse();
    const m = new Map<number, bigint>();
    for (const [p, o] of Object.entries(parts as Record<string, unknown>)) {
      if (!/^(0|[1-9]\d{0,9})$/.test(p) || typeof o !== 'string' || !/^(0|[1-9]\d{0,18})$/.test(o)) throw refuse();
      m.set(Number(p), BigInt(o));
    }
    out.set(column, m);
  }
  return out;
}

/**
 * The columns (by name) a record at `offset` of `partition` is not stored for: added after its
 * partition's switch. Empty for most records (none was added, or the record is past the switch).
 */
export function inactiveColumns(from: ColumnsFrom, partition: number, offset: bigint): string[] {
  let out: string[] | undefined;
  for (const [column, parts] of from) if (offset < (parts.get(partition) ?? 0n)) (out ??= []).push(column);
  return out ?? [];
}

/** The stored `columns` setting's entries: [name, type, source, required, default, …]. */
type ColumnEntry = readonly unknown[];

/**
 * The columns `now` adds to `stored` (both `columns` settings), or undefined when `now` is not
 * `stored` plus columns: a column removed or changed is no forward move (the worker then refuses).
 * Their order does not matter (rows are written and read by column name).
 */
export function addedColumns(stored: string, now: string): string[] | undefined {
  let before: ColumnEntry[];
  let after: ColumnEntry[];
  try {
    before = JSON.parse(stored) as ColumnEntry[];
    after = JSON.parse(now) as ColumnEntry[];
  } catch {
    return undefined;
  }
  if (!Array.isArray(before) || !Array.isArray(after)) return undefined;
  const kept = new Set(before.map((c) => JSON.stringify(c)));
  const same = after.filter((c) => kept.has(JSON.stringify(c)));
  if (same.length !== before.length) return undefined;
  return after.filter((c) => !kept.has(JSON.stringify(c))).map((c) => String(c[0]));
}

export interface ColumnsMove {
  /** The columns moved forward (empty: nothing moved; `why` says why, when there was something to say). */
  readonly added: readonly string[];
  /** Each partition's first offset stored with them. */
  readonly from: ReadonlyMap<number, bigint>;
  readonly why?: string;
}

/**
 * After `schema apply --job` added a derived sink's new columns to its table: stores them with the job
 * (its `columns` setting, and their offsets in `columnsFrom`) so that a worker started with them is
 * not refused. Nothing when the job has not run yet (its first worker stores them) or has them
 * already, or when its stored settings differ in more than added columns (`why` says so). Refused,
 * with nothing stored, while a worker owns a partition.
 *
 * The switch is each partition's log end (`logEnds`, read after the owners): every record a worker
 * with the old columns could have fetched is below it, also one whose batch a worker stopping (its
 * ownership already given up) or paused past its ownership's TTL still writes, and one a crashed
 * worker wrote past its checkpoint. So the records waiting in the topic at the move are stored with
 * the old columns too; those produced after it, with every column.
 */
export async function moveColumnsForward(
  session: Client,
  keyspace: string,
  job: { name: string; topic: string; settings: Readonly<Record<string, string>> },
  logEnds: () => Promise<ReadonlyMap<number, bigint>>,
): Promise<ColumnsMove> {
  const binding = new JobBinding(session, keyspace);
  const bound = await binding.read(job.name);
  const none = (why?: string): ColumnsMove => ({ added: [], from: new Map(), ...(why === undefined ? {} : { why }) });
  if (bound === null) return none();
  const { [COLUMNS_MOVING]: mark, [COLUMNS_FROM]: storedFrom, ...stored } = bound.settings;
  const { [COLUMNS_FROM]: _, ...given } = job.settings;
  const settings: Settings = { ...stored, ...(storedFrom === undefined ? {} : { [COLUMNS_FROM]: storedFrom }) };
  const added = typeof stored['columns'] === 'string' ? addedColumns(stored['columns'], given['columns'] ?? '') : undefined;
  const others = Object.keys({ ...stored, ...given }).filter((k) => k !== 'columns' && stored[k] !== given[k]);
  if (added === undefined || added.length === 0 || others.length > 0) {
    // A mark left by an interrupted move only blocks (nothing was stored past it): it goes.
    if (mark !== undefined) await binding.updateSettings(job.name, settings);
    if (added === undefined) return none(`its stored columns are not these columns minus some added ones (a column removed, or its type, field or default changed): its workers refuse (EO_JOB_CONFIG_MISMATCH); give the sink a new name and table`);
    if (added.length === 0) return none();
    return none(`its stored settings differ in more than the added columns (${others.join(', ')}): its workers refuse (EO_JOB_CONFIG_MISMATCH)`);
  }
  // From the mark on, a worker that starts refuses (its settings lack it), and one assigned a
  // partition after recording itself as its owner stops it (AssignmentPlanner's settings check).
  await binding.updateSettings(job.name, { ...settings, [COLUMNS_MOVING]: `started ${new Date().toISOString()}, adding ${added.join(', ')}` });
  const store = new CheckpointStore(session, keyspace, job.topic, job.name);
  const owned = [...(await store.readStates())].filter(([, s]) => s.owner !== null);
  if (owned.length > 0) {
    await binding.updateSettings(job.name, settings);
    const list = owned.slice(0, 6).map(([p, s]) => `partition ${p} by ${s.owner}`).join(', ');
    throw new ExactlyOnceError(
      'EO_USAGE',
      `job ${job.name} has workers running (${list}${owned.length > 6 ? ', …' : ''}): the columns ${added.join(', ')} were added to the table, but the job keeps its columns until its workers stop ` +
        `(one still running would store records past the switch without them). Stop every worker of job ${job.name}, then run schema apply --job again (an owner SIGKILLed is forgotten after ${OWNER_TTL_S} s)`,
    );
  }
  const from = new Map(await logEnds());
  const next = new Map(parseColumnsFrom(storedFrom));
  for (const c of added) next.set(c, from);
  await binding.updateSettings(job.name, { ...stored, columns: given['columns']!, [COLUMNS_FROM]: columnsFromSetting(next)! });
  return { added, from };
}
