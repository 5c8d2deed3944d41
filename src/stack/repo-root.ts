/**
 * The checkout this code runs from: the stack's default folder (options.ts) and its pom (paths.ts)
 * are found from it.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

let root: string | undefined;

/** The checkout root: the nearest parent holding stack/pom.xml (works from src/ and from a build dir). */
export function repoRoot(): string {
  if (root !== undefined) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, 'stack', 'pom.xml'))) {
    const up = path.dirname(dir);
    if (up === dir) throw new Error('stack/pom.xml not found above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
  return (root = dir);
}
