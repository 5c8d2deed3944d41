// Random sink configs, every column source, mode, TTL, version and filter mixed (seeded): each config
// the schema accepts and `chaos --job` samples must decode its well-formed samples (badRatio 0) as rows,
// deletes or filtered records, never throw, and quarantine few. A config that quarantines every record
// (an upsert key column read from key.id once did: bad_key) is either a codec bug or a config the
// schema should refuse at start. FUZZ_SEED=<n> repeats a run.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sinkConfig, type SinkConfig } from '../../src/jobs/sink/sink-config.js';
import { SinkCodec } from '../../src/jobs/sink/sink-codec.js';
import { SinkJob } from '../../src/jobs/sink/sink-job.js';
import { sampleRecords } from '../../src/jobs/sink/sample.js';
import { prng } from '../../src/prng.js';

const SEED = Number(process.env['FUZZ_SEED'] ?? Math.floor(Math.random() * 2 ** 31));
const TYPES = ['text', 'int', 'bigint', 'double', 'boolean', 'timestamp', 'uuid', 'decimal', 'smallint', 'date', 'blob', 'inet', 'list<text>', 'map<text, int>'];
const KEY_TYPES = ['text', 'int', 'bigint', 'timestamp', 'uuid', 'decimal'];
const META: Record<string, string> = { $offset: 'bigint', $partition: 'int', $timestamp: 'timestamp', $topic: 'text' };

function randomConfig(r: () => number): Record<string, unknown> {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const mode = pick(['log', 'upsert', 'upsert']);
  const columns: Record<string, unknown> = {};
  const key: string[] = [];
  for (let i = 0; i < (mode === 'upsert' ? 1 + Math.floor(r() * 2) : 0); i++) {
    columns[`k${i}`] = { type: pick(KEY_TYPES), field: pick([`k${i}`, `kk.k${i}`, `key.k${i}`, 'key']) };
    key.push(`k${i}`);
  }
  for (let i = 0; i < 1 + Math.floor(r() * 4); i++) {
    const source = pick(['value', 'value', 'nested', 'header', 'meta', 'key']);
    // The record key: its text (any key), a field of a log-mode key object, or an upsert key's field
    // again as another column (of its type: read as another, its values would not fit).
    const keyField = pick(['key', mode === 'log' ? `key.c${i}` : `key.k${Math.floor(r() * key.length)}`]);
    const field = source === 'value' ? `c${i}` : source === 'nested' ? `a.c${i}` : source === 'header' ? `header.h${i}` : source === 'meta' ? pick(Object.keys(META)) : keyField;
    const type = source === 'meta' ? META[field] : field === 'key' ? 'text' : field.startsWith('key.k') ? (columns[field.slice(4)] as { type: string }).type : pick(TYPES);
    columns[`c${i}`] = { type, field, ...(r() < 0.2 ? { required: true } : {}), ...(r() < 0.15 ? { onNull: 'unset' } : {}) };
  }
  const raw: Record<string, unknown> = { topic: 't', table: 'tb', mode, columns, ...(mode === 'upsert' ? { key } : {}) };
  if (r() < 0.3) raw['ttl'] = '1d';
  else if (r() < 0.2) raw['ttlField'] = pick(['header.ttl', 'ttl', 'x.ttl']);
  if (mode === 'upsert' && r() < 0.3) raw['version'] = pick(['header.v', 'v', 'x.v', '$timestamp']);
  // Filters on fields no column reads (beside a nested column too), on a column, around a nested one,
  // on the TTL's or the version's field.
  if (r() < 0.4) {
    raw['where'] = pick([
      { field: 'w', exists: true },
      { field: 'header.w', in: ['a', 1] },
      { not: { field: 'c0', exists: false } },
      { any: [{ field: 'key', exists: true }, { field: 'x.w', equals: 2 }] },
      { field: 'a.w', equals: 'q' },
      { not: { field: 'a', exists: false } },
      { field: 'header.ttl', exists: true },
      { any: [{ field: 'v', in: [1, 2] }, { field: 'x.ttl', exists: true }] },
    ]);
  }
  return raw;
}

test(`random sink configs: each one accepted and sampled decodes its well-formed samples (FUZZ_SEED=${SEED})`, () => {
  const r = prng(SEED);
  let sampled = 0;
  for (let n = 0; n < 600; n++) {
    const raw = randomConfig(r);
    let config: SinkConfig;
    try {
      config = sinkConfig(raw);
    } catch {
      continue; // refused, with its reasons (tested where each rule is)
    }
    assert.equal(typeof new SinkJob(config).audit.sample, 'function', `sampled: ${JSON.stringify(raw)}`);
    sampled++;
    const codec = new SinkCodec(config);
    const outcomes = new Map<string, number>();
    let i = 0;
    for (const s of sampleRecords(config, { seed: SEED + n, count: 200, badRatio: 0 })) {
      const headers = Object.entries(s.headers ?? {}).map(([k, v]) => [k, Buffer.isBuffer(v) ? v : Buffer.from(v)] as const);
      const d = codec.decode({ topic: 't', partition: 1, offset: BigInt(i++), key: s.key === null ? null : Buffer.from(s.key), value: s.value === null ? null : Buffer.from(s.value), timestampMs: Date.now(), headers } as never);
      const what = d.ok ? d.value.kind : `${d.reason}: ${d.detail}`;
      outcomes.set(what, (outcomes.get(what) ?? 0) + 1);
    }
    const written = (outcomes.get('row') ?? 0) + (outcomes.get('delete') ?? 0);
    const stored = written + (outcomes.get('skip') ?? 0);
    const shown = `config ${n} (FUZZ_SEED=${SEED}): ${JSON.stringify(raw)}: ${JSON.stringify([...outcomes].sort((a, b) => b[1] - a[1]).slice(0, 3))}`;
    // (A few are quarantined rightly: a random value past a column's limit, a sampled text that is no inet, …)
    assert.ok(stored >= 160, `${stored} of 200 well-formed samples stored; ${shown}`);
    // And a filter keeps some: a where on a field the samples leave out or overwrite would keep none.
    assert.ok(written >= 40, `${written} of 200 well-formed samples written; ${shown}`);
  }
  assert.ok(sampled > 200, `${sampled} configs of 600 accepted`);
});
