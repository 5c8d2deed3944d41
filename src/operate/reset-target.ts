/**
 * Where `checkpoints reset --to` moves checkpoints: the log start, the log end, an offset, or a point in
 * time. Pure: a time is resolved per partition with Kafka's offsets-for-times (KafkaAdmin.offsetsForTime,
 * KIP-79) by the caller, and the plan is then the engine's (src/engine/checkpoint-store.ts, planResets).
 */
import { planResets, type LogBounds, type ResetPlan, type StoredCheckpoint } from '../engine/checkpoint-store.js';
import { ExactlyOnceError } from '../errors.js';

/** A point in time: epoch ms, and the text the operator gave (for messages). */
export interface TimeTarget {
  readonly atMs: number;
  readonly text: string;
}

export type Target = 'earliest' | 'latest' | bigint | TimeTarget;

export const isTime = (t: Target): t is TimeTarget => typeof t === 'object';

/** The largest time a Date holds (ECMA-262 §21.4.1.1), in ms. */
const MAX_TIME_MS = 8.64e15;

// Date, then optionally a time with a zone: 2026-12-05, 2026-12-05T09:00Z, 2026-12-05T09:00:00.250+01:00.
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/;

const bad = (value: string, why: string) =>
  new ExactlyOnceError(
    'EO_CONFIG_INVALID',
    `--to: expected earliest, latest or an offset (a whole number from 0), or a time: ISO-8601 with its zone (2026-12-05T09:00:00Z, 2026-12-05T09:00+01:00; a date alone is its midnight UTC) or @EPOCH_MS${why === '' ? '' : `; ${why}`} (got '${value}')`,
  );

/**
 * Parses `--to`. A whole number is always an offset; a time is ISO-8601 with an explicit zone (a
 * time without one would depend on the machine the command runs on) or a date alone (midnight UTC), or
 * `@` and epoch milliseconds (`@1733389200000`: a bare number is already an offset).
 */
export function parseTarget(value: string): Target {
  const v = value.trim();
  if (v === 'earliest' || v === 'latest') return v;
  if (/^\d+$/.test(v)) return BigInt(v);
  const epoch = /^@(\d{1,16})$/.exec(v);
  if (epoch !== null) {
    const atMs = Number(epoch[1]);
    if (atMs > MAX_TIME_MS) throw bad(value, 'epoch milliseconds beyond the year 275760');
    return { atMs, text: new Date(atMs).toISOString() };
  }
  const m = ISO.exec(v);
  if (m === null) throw bad(value, '');
  const [, y, mo, d, h, mi, s, frac, zone] = m;
  if (h !== undefined && zone === undefined) throw bad(value, 'a time needs its zone: add Z (UTC) or an offset such as +01:00');
  const iso = h === undefined ? `${y}-${mo}-${d}T00:00:00Z` : `${y}-${mo}-${d}T${h}:${mi}:${s ?? '00'}${frac === undefined ? '' : `.${frac.slice(0, 3)}`}${zone!.length === 5 ? `${zone!.slice(0, 3)}:${zone!.slice(3)}` : zone}`;
  const atMs = Date.parse(iso);
  // Date.parse rolls 2026-02-30 over to March 2: a date must read back as given.
  const check = new Date(Date.UTC(Number(y), Number(mo) - 1, Number(d)));
  if (Number.isNaN(atMs) || check.getUTCMonth() !== Number(mo) - 1 || check.getUTCDate() !== Number(d) || Number(h ?? 0) > 23 || Number(mi ?? 0) > 59 || Number(s ?? 0) > 59) {
    throw bad(value, 'no such date or time');
  }
  if (atMs < 0) throw bad(value, 'before 1970: Kafka timestamps start at the epoch');
  return { atMs, text: v };
}

/**
 * The resets of `partitions` to `target`: a time becomes each partition's offset from `byTime` (the
 * first record at or after it, or the log end), then the engine plans (earliest/latest/an offset inside
 * the log; epoch + 1). `byTime` is needed only for a time.
 */
export function planTargets(
  topic: string,
  partitions: readonly number[],
  target: Target,
  marks: readonly LogBounds[],
  stored: ReadonlyMap<number, StoredCheckpoint>,
  byTime?: ReadonlyMap<number, bigint>,
): ResetPlan[] {
  if (!isTime(target)) return planResets(topic, partitions, target, marks, stored);
  return partitions.flatMap((p) => {
    const at = byTime?.get(p);
    // A partition the topic does not have: planResets names it (--partition).
    if (at === undefined && marks.some((m) => m.partition === p)) {
      throw new ExactlyOnceError('EO_KAFKA_UNAVAILABLE', `Kafka gave no offset of ${topic} partition ${p} for ${target.text}; run the command again`);
    }
    const w = marks.find((m) => m.partition === p);
    // The log may have moved since its bounds were read: a time resolves inside the log as Kafka has it.
    const offset = at === undefined || w === undefined ? (at ?? 0n) : at < w.low ? w.low : at > w.high ? w.high : at;
    return planResets(topic, [p], offset, marks, stored);
  });
}
