/**
 * The local stack as the CLI and the other integration tests see it. Assumes the stack is already up
 * (the Makefile starts it); nothing here starts or stops the real servers.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { isExactlyOnceError } from '../../src/errors.js';
import { cliPath, localStack, runProcess } from '../helpers.js';
import { defaultStackOptions, stackLogs, stackStatus, stackUp, startServer, type ServerName } from '../../src/stack/index.js';

const o = await localStack(); // the stack `make test` started (EXACTLYONCE_STACK_DIR or <repo>/.stack)

test('stackUp on a running stack starts nothing and returns quickly', async () => {
  const t0 = Date.now();
  const r = await stackUp(o);
  assert.deepEqual(r.started, []);
  assert.deepEqual(
    r.servers.map((s) => [s.name, s.port, s.running, s.ready]),
    [['kafka', o.kafkaPort, true, true], ['cassandra', o.cassandraPort, true, true]],
  );
  assert.ok(Date.now() - t0 < 10_000, `took ${Date.now() - t0} ms`); // generous: two probes
});

test('stackStatus shows both servers running with live pids', async () => {
  const statuses = await stackStatus(o);
  assert.deepEqual(statuses.map((s) => [s.name, s.running, s.ready]), [['kafka', true, true], ['cassandra', true, true]]);
  for (const s of statuses) {
    assert.ok(s.pid !== null && s.pid > 0, `${s.name} pid ${s.pid}`);
    process.kill(s.pid, 0); // throws if there is no such process
    assert.match(s.version, /^\d+\.\d+\.\d+$/);
    assert.equal(s.logFile, path.join(o.dir, 'logs', `${s.name}.log`));
  }
});

test('`stack status` in a folder without a stack names the stack serving the ports, and how to point at it (not "running: no")', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'eo-elsewhere-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const env = { ...process.env };
  delete env['EXACTLYONCE_STACK_DIR'];
  const r = await runProcess(cliPath, ['stack', 'status'], { cwd: dir, env });
  const lines = r.stdout.split('\n');
  const here = path.join(await import('node:fs/promises').then((f) => f.realpath(dir)), '.stack');
  assert.equal(
    lines[0],
    `no stack runs from ${here} (./.stack of the working directory; --stack-dir or EXACTLYONCE_STACK_DIR point elsewhere); ` +
      `the one serving 127.0.0.1:${o.kafkaPort} is in ${o.dir} (commands here use it; for \`stack\` commands: --stack-dir ${o.dir})`,
    r.stdout + r.stderr,
  );
  assert.equal(lines[1], `stack in ${o.dir}`);
  assert.match(lines[4]!, new RegExp(`^ kafka +\\| [\\d.]+ +\\| \\d+ +\\| 127\\.0\\.0\\.1:${o.kafkaPort} +\\| yes +\\| yes +\\|`));
  assert.equal(r.code, 0);
  // A folder named (--stack-dir, EXACTLYONCE_STACK_DIR) is the stack asked about: not running, exit 1,
  // whatever serves the ports (make cluster-test starts its cluster only when its own folder runs none).
  const named = await runProcess(cliPath, ['stack', 'status', '--stack-dir', path.join(dir, 'cluster')], { cwd: dir, env });
  assert.equal(named.stdout.split('\n')[0], `stack in ${path.join(dir, 'cluster')}`, named.stdout + named.stderr);
  assert.equal(named.code, 1);
});

for (const name of ['kafka', 'cassandra'] as const satisfies readonly ServerName[]) {
  test(`startServer(${name}) on a port held by another process fails with EO_PORT_IN_USE`, async (t) => {
    // A separate stack dir and a port taken by a plain net.Server: the real stack is not involved.
    const dir = await mkdtemp(path.join(os.tmpdir(), 'eo-stack-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const blocker = net.createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => blocker.close(() => resolve())));
    const port = (blocker.address() as net.AddressInfo).port;

    const other = defaultStackOptions({ dir, ...(name === 'kafka' ? { kafkaPort: port } : { cassandraPort: port }) });
    await assert.rejects(startServer(other, name), (e: unknown) => {
      assert.ok(isExactlyOnceError(e, 'EO_PORT_IN_USE'), String(e));
      assert.match(e.message, new RegExp(`^port ${port} is already in use`));
      return true;
    });
    assert.equal(existsSync(path.join(dir, 'run', `${name}.pid`)), false, 'nothing was started');
    assert.equal(existsSync(path.join(dir, 'lib')), false, 'nothing was fetched');
  });
}

test('stackLogs returns the tail of each server log', async () => {
  for (const name of ['kafka', 'cassandra'] as const) {
    const text = await stackLogs(o, name, 30);
    const lines = text.split('\n');
    assert.ok(text.trim() !== '', `${name} log is empty`);
    assert.ok(lines.length <= 30, `${name}: ${lines.length} lines`);
  }
});
