/**
 * The files this package reads at run time (its package.json, the stack's Maven file, the launcher),
 * found from where this module is — src/ in a clone, dist/src/ in a build (a clone's, or an installed
 * package's under node_modules) — never by walking up the directory tree. What a run writes (the
 * stack's folder, bench results) goes under the user's working directory instead (stack/options.ts).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The package's root: the parent of src/ (sources) or of dist/ (the build). */
export const packageRoot = path.basename(path.dirname(here)) === 'dist' ? path.resolve(here, '..', '..') : path.resolve(here, '..');

/** A file shipped with the package, e.g. `packageFile('stack', 'pom.xml')`. */
export function packageFile(...parts: string[]): string {
  return path.join(packageRoot, ...parts);
}

/**
 * Whether this runs from a clone of the repository (its sources are there) rather than from an
 * installed package (the build only): error messages name `make deps` in a clone, `exactlyonce setup`
 * in a package.
 */
export const isClone = existsSync(packageFile('src', 'cli', 'main.ts'));

/** The command that builds the Kafka client's native part, as the user should type it here. */
export const setupCommand = isClone ? 'make deps' : 'npx exactlyonce setup';

/** How the user types the CLI here, for the commands a message suggests. */
export const cliCommand = isClone ? 'bin/exactlyonce' : 'npx exactlyonce';
