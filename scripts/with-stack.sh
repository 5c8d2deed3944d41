#!/usr/bin/env bash
# Runs a command with the local stack up: starts it when it is not running and, in that case only,
# stops it again when the command ends (whatever way it ends).
set -uo pipefail
cd "$(dirname "$0")/.."
EO=bin/exactlyonce
started=0
if ! $EO stack status >/dev/null 2>&1; then
  $EO stack up || exit $?
  started=1
fi
stop() { if [ "$started" = 1 ]; then $EO stack down; fi; }
trap stop EXIT
trap 'exit 130' INT TERM
"$@"
