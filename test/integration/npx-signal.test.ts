// SIGTERM to `npx exactlyonce run` (issue 43, item 6): npx runs the command through `sh -c` and
// forwards SIGTERM to that shell only, which ends without passing it on. The worker must not run on
// with its partitions: started by npm, it notices its launcher's end and stops as on SIGTERM.
// The launcher here is such a shell (one that cannot exec the command), with npx's environment.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { cliPath, freshKeyspace, freshTopic, testConfig, waitFor } from '../helpers.js';
import { connectionArgs } from '../pipeline.js';

/** Running: not exited (an orphan that exited may stay a zombie until whoever adopted it reaps it). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

test('a worker started through npx stops cleanly when npx (its shell) is sent SIGTERM', async (t) => {
  const config = testConfig();
  await freshKeyspace(t, config);
  await freshTopic(t, config, 2);

  // `; exit $?` keeps the shell as the worker's parent, as npx's `sh -c` is.
  const shell = spawn('sh', ['-c', `"$0" "$@"; exit $?`, cliPath, 'run', ...connectionArgs(config), '--session-timeout-ms', '6000'], {
    env: { ...process.env, EXACTLYONCE_LOG_FORMAT: 'json', npm_lifecycle_event: 'npx', npm_command: 'exec' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  shell.stdout.on('data', (d) => (output += d));
  shell.stderr.on('data', (d) => (output += d));
  // Both pipes close once every process holding them (the shell and the worker) has exited.
  const closed = once(shell, 'close');
  let worker = 0;
  t.after(() => {
    if (worker > 0 && alive(worker)) process.kill(worker, 'SIGKILL');
    if (shell.exitCode === null && shell.signalCode === null) shell.kill('SIGKILL');
  });

  const started = await waitFor(() => output.split('\n').find((l) => l.includes('"msg":"worker started"')), { timeoutMs: 120_000, message: 'the worker starts' });
  worker = (JSON.parse(started) as { pid: number }).pid;
  assert.notEqual(worker, shell.pid, 'the shell did not exec the worker');

  shell.kill('SIGTERM');
  await once(shell, 'exit');
  assert.equal(shell.signalCode, 'SIGTERM', 'the shell ends on SIGTERM, as npx does (143)');
  await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error(`the worker (pid ${worker}) still runs 30 s after its launcher ended:\n${output.slice(-3000)}`)), 30_000))]);
  assert.equal(alive(worker), false);

  const messages = output.split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { msg: string }).msg);
  const from = messages.findIndex((m) => m.startsWith('the process that started this worker'));
  assert.deepEqual(messages.slice(from, from + 2), [
    `the process that started this worker (npx, pid ${shell.pid}) ended: stopping as on SIGTERM`,
    'stopping: finishing the batches in flight, then leaving the group',
  ]);
  assert.doesNotMatch(output, /"level":(50|60)|"level":"(error|fatal)"/, 'a clean stop');
});
