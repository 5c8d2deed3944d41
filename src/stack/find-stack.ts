/**
 * The stack folder of the servers listening on given ports, found from their processes: every server
 * the stack starts carries `-Dexactlyonce.stack=<dir>#<id>` and `-Dexactlyonce.port=<port>` on its
 * command line (src/stack/*-server.ts), so `stack status` run from another folder can say which stack
 * serves 127.0.0.1:9092 instead of `running: no`. Linux only (/proc); elsewhere nothing is found.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** The stack folder of a server of ours serving `port`, or undefined. */
export function stackDirServing(port: number): string | undefined {
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return undefined;
  }
  for (const pid of pids) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue; // ended meanwhile, or not ours to read
    }
    if (!args.includes(`-Dexactlyonce.port=${port}`)) continue;
    const stack = args.find((a) => a.startsWith('-Dexactlyonce.stack='));
    if (stack !== undefined) return stack.slice('-Dexactlyonce.stack='.length).replace(/#[^#]*$/, '');
  }
  return undefined;
}
