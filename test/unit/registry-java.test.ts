import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isExactlyOnceError } from '../../src/errors.js';
import { registryJava } from '../../src/stack/registry-server.js';

test('the Schema Registry needs Java 21+: a JDK named that is older is refused with a coded line naming what is needed', async () => {
  process.env['EXACTLYONCE_REGISTRY_JAVA_HOME'] = '/nonexistent-jdk';
  await assert.rejects(registryJava(), (e: unknown) => {
    assert.ok(isExactlyOnceError(e, 'EO_TOOL_MISSING'));
    assert.equal(e.message, 'EXACTLYONCE_REGISTRY_JAVA_HOME=/nonexistent-jdk: no runnable bin/java there; the Schema Registry needs Java 21 or newer');
    return true;
  });
  delete process.env['EXACTLYONCE_REGISTRY_JAVA_HOME'];
});
