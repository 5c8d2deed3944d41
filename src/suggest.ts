/**
 * "Did you mean …?" for a name the user mistyped: the closest of the names that exist, by the
 * Damerau-Levenshtein distance, with the thresholds Commander uses for unknown flags and commands
 * (its lib/suggestSimilar.js, which its package does not export): at most 3 edits, and more than 40 %
 * of the longer name kept. The CLI's flags get Commander's own; a sink config's keys get this one.
 */
const MAX_DISTANCE = 3;
const MIN_SIMILARITY = 0.4;

/** Edits (insert, delete, substitute, swap two neighbours) that turn a into b. */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}

/** The closest candidates (ties all kept, sorted), or none when nothing is close. */
export function similar(word: string, candidates: readonly string[]): string[] {
  let best = MAX_DISTANCE;
  let out: string[] = [];
  for (const c of new Set(candidates)) {
    if (c.length <= 1) continue;
    const distance = editDistance(word, c);
    if ((Math.max(word.length, c.length) - distance) / Math.max(word.length, c.length) <= MIN_SIMILARITY) continue;
    if (distance < best) [best, out] = [distance, [c]];
    else if (distance === best) out.push(c);
  }
  return out.sort();
}

/** ` (did you mean table?)`, ` (did you mean one of a, b?)`, or ''. */
export function didYouMean(word: string, candidates: readonly string[]): string {
  const s = similar(word, candidates);
  return s.length === 0 ? '' : s.length === 1 ? ` (did you mean ${s[0]}?)` : ` (did you mean one of ${s.join(', ')}?)`;
}
