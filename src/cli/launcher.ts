/**
 * A worker started by npm (`npx exactlyonce run`, an `npm run` script) follows its launcher. npm runs
 * the command through `sh -c` and, on SIGTERM, forwards the signal to that shell only
 * (@npmcli/run-script's signal manager), which ends without passing it on: the worker would run on,
 * re-parented, still holding its partitions, while npx reports its own exit (143). So when the process
 * that started it ends, the worker stops as on SIGTERM. Outside npm (`exactlyonce run &`, a service
 * manager, a shell that exits after starting it) the parent may well end first on purpose, and nothing
 * is watched.
 */
import type { Logger } from '../log.js';

/** How often the parent is checked, in ms: a launcher's end is noticed within this. */
const CHECK_MS = 500;

/** Aborted once the launcher ends; undefined when not started by npm. */
export function launcherEnded(log: Logger, env: NodeJS.ProcessEnv = process.env): AbortSignal | undefined {
  const launcher = env['npm_lifecycle_event'];
  if (launcher === undefined || launcher === '') return undefined;
  const parent = process.ppid;
  const controller = new AbortController();
  const timer = setInterval(() => {
    // process.ppid asks the system each time: the parent's end re-parents this process.
    if (process.ppid === parent) return;
    clearInterval(timer);
    log.info({ launcher, parent }, `the process that started this worker (${launcher === 'npx' ? 'npx' : `npm run ${launcher}`}, pid ${parent}) ended: stopping as on SIGTERM`);
    controller.abort();
  }, CHECK_MS);
  timer.unref();
  return controller.signal;
}
