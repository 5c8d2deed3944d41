/**
 * The seed job's TestMessageGenerator, its format and defaults kept, as a pure, seeded stream: for
 * each round, one event per client, keyed by client, source "My Router", health Critical, ts now.
 * Options add more clients and sources, a health mix and malformed records of every kind the codec
 * quarantines.
 */
import { encodeEvent, MAX_SOURCE_BYTES, type HealthCode, type QuarantineReason } from './event.js';
import { prng } from '../../prng.js';

/** The seed generator's three clients; more are named "Client Network N". */
export const ORIGINAL_CLIENTS = [
  'Airmiles Rewards Network',
  "Spongebob's Undersea Adventure Network",
  "Dr. Evil's Secret Comms Network",
];
export const ORIGINAL_SOURCE = 'My Router';

export interface GeneratorOptions {
  /** Events per client (the seed generator's events-per-key, default 200); ignored when `count` is set. */
  eventsPerKey: number;
  /** Total events, spread over the clients round by round. */
  count?: number | undefined;
  clients: number;
  sources: number;
  /** Relative weights of health 0, 1, 2 (default all Critical, as the seed generator sends). */
  healthMix: readonly [number, number, number];
  /** Fraction of records replaced by a malformed one, 0..1. */
  badRatio: number;
  seed: number;
  /** Fraction of events sent late: their ts is `lateByMs` (± half) in the past, 0..1. */
  lateRatio?: number;
  lateByMs?: number;
  /** Event time of each record, epoch ms (default: the wall clock). */
  now?: () => number;
}

export interface GeneratedRecord {
  key: string;
  value: Buffer;
  /** 'valid', or the reason the pipeline must quarantine it for. */
  kind: 'valid' | QuarantineReason;
}

/** The malformed kinds `--bad-ratio` cycles through, so that every kind appears. */
export const BAD_KINDS = [
  'invalid_json',
  'not_utf8',
  'missing_field',
  'wrong_type',
  'invalid_health',
  'id_out_of_range',
  'null_value',
  'too_large',
  'not_object',
  'empty',
  'invalid_unicode',
  'empty_source',
  'field_too_long',
] as const satisfies readonly QuarantineReason[];

export function clientNames(n: number): string[] {
  return Array.from({ length: n }, (_, i) => ORIGINAL_CLIENTS[i] ?? `Client Network ${i + 1}`);
}

export function sourceNames(n: number): string[] {
  return n === 1 ? [ORIGINAL_SOURCE] : Array.from({ length: n }, (_, i) => `${ORIGINAL_SOURCE} ${i + 1}`);
}

export function totalEvents(o: GeneratorOptions): number {
  return o.count ?? o.eventsPerKey * o.clients;
}

/** A random signed 64-bit id from two 32-bit draws. */
function randomId(rand: () => number): bigint {
  const hi = BigInt(Math.floor(rand() * 2 ** 32));
  const lo = BigInt(Math.floor(rand() * 2 ** 32));
  return BigInt.asIntN(64, (hi << 32n) | lo);
}

function malformed(kind: (typeof BAD_KINDS)[number], id: bigint, ts: number): Buffer {
  const base = `"ts":${ts},"source":"${ORIGINAL_SOURCE}","client":"bad"`;
  switch (kind) {
    case 'invalid_json':
      return Buffer.from(`{"id":${id},${base}`);
    case 'not_utf8':
      return Buffer.concat([Buffer.from(`{"id":${id},"ts":${ts},"source":"`), Buffer.from([0xc3, 0x28]), Buffer.from('","client":"bad","health":2}')]);
    case 'missing_field':
      return Buffer.from(`{"id":${id},${base}}`);
    case 'wrong_type':
      return Buffer.from(`{"id":"${id}",${base},"health":2}`);
    case 'invalid_health':
      return Buffer.from(`{"id":${id},${base},"health":7}`);
    case 'id_out_of_range':
      return Buffer.from(`{"id":9${'9'.repeat(19)},${base},"health":2}`);
    case 'null_value':
      return Buffer.from(`{"id":${id},${base},"health":null}`);
    case 'too_large':
      return Buffer.from(`{"id":${id},${base},"health":2,"pad":"${'x'.repeat(70 * 1024)}"}`);
    case 'not_object':
      return Buffer.from(`[${id}]`);
    case 'empty':
      return Buffer.alloc(0);
    case 'invalid_unicode': // a lone surrogate, as the JSON escape (valid JSON, valid UTF-8)
      return Buffer.from(`{"id":${id},"ts":${ts},"source":"\\ud800","client":"bad","health":2}`);
    case 'empty_source':
      return Buffer.from(`{"id":${id},"ts":${ts},"source":"","client":"bad","health":2}`);
    case 'field_too_long': // 2 UTF-8 bytes per character: over the limit in bytes, not in characters
      return Buffer.from(`{"id":${id},"ts":${ts},"source":"${'é'.repeat(MAX_SOURCE_BYTES / 2 + 1)}","client":"bad","health":2}`);
  }
}

/** The records to send, in order. The same options and seed give the same ids, keys and kinds. */
export function* generate(o: GeneratorOptions): Generator<GeneratedRecord> {
  const rand = prng(o.seed);
  const clients = clientNames(o.clients);
  const sources = sourceNames(o.sources);
  const weight = o.healthMix[0] + o.healthMix[1] + o.healthMix[2];
  const now = o.now ?? Date.now;
  const total = totalEvents(o);
  let badIndex = 0;
  for (let i = 0; i < total; i++) {
    const client = clients[i % clients.length]!;
    const id = randomId(rand);
    let ts = now();
    if (o.lateRatio !== undefined && o.lateRatio > 0 && rand() < o.lateRatio) {
      ts -= Math.round((o.lateByMs ?? 120_000) * (0.5 + rand()));
    }
    const source = sources[Math.floor(rand() * sources.length)]!;
    const h = rand() * weight;
    const health: HealthCode = h < o.healthMix[0] ? 0 : h < o.healthMix[0] + o.healthMix[1] ? 1 : 2;
    if (o.badRatio > 0 && rand() < o.badRatio) {
      const kind = BAD_KINDS[badIndex++ % BAD_KINDS.length]!;
      yield { key: client, value: malformed(kind, id, ts), kind };
    } else {
      yield { key: client, value: Buffer.from(encodeEvent({ id, ts, source, client, health })), kind: 'valid' };
    }
  }
}

/** Parses `--health-mix 0:70,1:20,2:10` into weights for health 0, 1, 2. */
export function parseHealthMix(spec: string): [number, number, number] | undefined {
  const w: [number, number, number] = [0, 0, 0];
  for (const part of spec.split(',')) {
    const m = /^\s*([012])\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(part);
    if (m === null) return undefined;
    w[Number(m[1]) as 0 | 1 | 2] = Number(m[2]);
  }
  return w[0] + w[1] + w[2] > 0 ? w : undefined;
}
