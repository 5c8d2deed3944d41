// The schema cache's negative answers (src/formats/schema-cache.ts): "no such id" is asked again with
// backoff before a record is quarantined, and believed only for a while; a stand-in registry counts
// the questions (the real one: test/integration/sink-registry.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDecoder } from '../../src/formats/decoder.js';
import { SchemaCache } from '../../src/formats/schema-cache.js';
import { withWireHeader } from '../../src/formats/wire.js';
import type { RegisteredSchema, SchemaRegistry } from '../../src/registry/schema-registry.js';

const AVRO = JSON.stringify({ type: 'record', name: 'R', fields: [{ name: 'id', type: 'long' }] });

/** A registry that knows id 7 from its `knownFrom`-th question about it on (Infinity: never), and counts the questions. */
function registry(knownFrom: number) {
  const asked: number[] = [];
  const r = {
    config: { url: 'http://registry.test' },
    knownFrom,
    async byId(id: number): Promise<RegisteredSchema | null> {
      asked.push(id);
      return id === 7 && asked.length >= r.knownFrom ? { id, type: 'AVRO', schema: AVRO, references: [] } : null;
    },
  };
  return { registry: r as unknown as SchemaRegistry & { knownFrom: number }, asked };
}

test('an id the registry does not know yet is asked again with backoff, and found when it is registered within the window', async () => {
  const { registry: r, asked } = registry(3);
  const cache = new SchemaCache(r, { unknownRetryMs: 90 });
  const started = performance.now();
  await cache.fetch([7]);
  assert.equal(cache.get(7)?.kind, 'AVRO');
  assert.deepEqual(asked, [7, 7, 7]);
  assert.ok(performance.now() - started >= 85, 'the third question comes at the end of the window');
  await cache.fetch([7]);
  assert.deepEqual(asked, [7, 7, 7], 'a schema found is kept');
});

test('an id never registered: three questions over the window, then "unknown" believed for its TTL only, then asked again', async () => {
  const { registry: r, asked } = registry(Infinity);
  let now = 1_000;
  const cache = new SchemaCache(r, { unknownRetryMs: 30, unknownTtlMs: 10_000, now: () => now });
  const decoder = createDecoder('avro', cache);
  const bytes = withWireHeader(7, Buffer.from([2]));
  await decoder.prepare([bytes]);
  assert.deepEqual(asked, [7, 7, 7]);
  assert.deepEqual(decoder.decode(bytes), { ok: false, reason: 'unknown_schema', detail: 'schema id 7 is not in the Schema Registry at http://registry.test' });
  now += 9_999;
  await decoder.prepare([bytes]);
  assert.deepEqual(asked, [7, 7, 7], 'within the TTL the answer is believed');
  now += 1;
  // The schema is registered meanwhile: the next batch finds it at the first question.
  r.knownFrom = 4;
  assert.equal(cache.has(7), false);
  assert.equal(cache.get(7)?.kind, 'unknown', 'an expired answer still serves the batch that fetched it');
  await decoder.prepare([bytes]);
  assert.deepEqual(asked, [7, 7, 7, 7]);
  const d = decoder.decode(bytes);
  assert.deepEqual(d.ok ? [{ ...(d.value as object) }, d.schemaId] : d, [{ id: 1n }, 7]);
});

test('a retry window of 0 quarantines at the first "no such id"', async () => {
  const { registry: r, asked } = registry(Infinity);
  const cache = new SchemaCache(r, { unknownRetryMs: 0 });
  await cache.fetch([7, 7]);
  assert.deepEqual(asked, [7]);
  assert.equal(cache.get(7)?.kind, 'unknown');
});
