// Which worker addresses the dashboard sends its token to (src/dashboard/scrape.ts tokenAllowed):
// hosts, or exact host:port entries, of --scrape-allow; names compared without case or brackets.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addressHost, DEFAULT_SCRAPE_ALLOW, tokenAllowed } from '../../src/dashboard/scrape.js';

test('tokenAllowed: by host or by exact address; the default is this machine by name, not every 127/8 address', () => {
  assert.deepEqual(['127.0.0.1:9100', 'LOCALHOST:1', '[::1]:9100', 'box.example:9100', '[fe80::1]:80'].map(addressHost), ['127.0.0.1', 'localhost', '::1', 'box.example', 'fe80::1']);
  const cases: Array<[string, readonly string[], boolean]> = [
    ['127.0.0.1:9100', DEFAULT_SCRAPE_ALLOW, true],
    ['localhost:9100', DEFAULT_SCRAPE_ALLOW, true],
    ['[::1]:9100', DEFAULT_SCRAPE_ALLOW, true],
    ['127.0.0.2:9100', DEFAULT_SCRAPE_ALLOW, false],
    ['evil.example:9100', DEFAULT_SCRAPE_ALLOW, false],
    ['127.0.0.1.evil.example:9100', DEFAULT_SCRAPE_ALLOW, false],
    ['worker-1.prod:9100', ['worker-1.prod'], true],
    ['Worker-1.PROD:9100', ['worker-1.prod'], true],
    ['worker-1.prod:9100', ['worker-1.prod:9100'], true],
    ['worker-1.prod:9101', ['worker-1.prod:9100'], false],
    ['[fe80::1]:9100', ['[fe80::1]'], true],
    ['[fe80::1]:9100', ['fe80::1'], true],
    ['127.0.0.1:9100', [], false],
  ];
  for (const [address, allow, want] of cases) assert.equal(tokenAllowed(address, allow), want, `${address} with ${allow.join(',')}`);
});
