/**
 * Waiting for something with a deadline: one helper for every "await this, or give up after N ms" of
 * the project (a stop, a client's connect, a disconnect in the background), so each timer is cleared
 * once the work settles and none holds the process open.
 */

/**
 * `work`'s outcome, or, once `ms` have passed without it settling, `late()`'s: what it returns is
 * resolved with, what it throws is rejected with. `work` itself goes on, unobserved.
 */
export function settleWithin<T>(work: Promise<T>, ms: number, late: () => T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<T>((resolve, reject) => {
    timer = setTimeout(() => {
      try {
        resolve(late());
      } catch (e) {
        reject(e);
      }
    }, ms);
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}
