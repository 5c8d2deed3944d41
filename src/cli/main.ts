#!/usr/bin/env node
/** The `exactlyonce` command: one sub-command per file of this folder, put together in ./program.ts. */
import { CommanderError } from '@commander-js/extra-typings';
import { reportError } from './common.js';
import { buildProgram } from './program.js';

const program = buildProgram();
// Output piped into a reader that stops early (`--help | head`, `quarantine list | less` quit): the
// reader has what it wanted; end quietly rather than with a stack trace.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
}

try {
  await program.parseAsync(process.argv);
} catch (e) {
  if (e instanceof CommanderError) {
    // Commander has already printed its one-line message (bad flag, missing argument, --help).
    process.exitCode = e.exitCode === 0 ? 0 : 2;
  } else {
    process.exitCode = reportError(e);
  }
}
