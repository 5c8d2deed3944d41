#!/usr/bin/env bash
# `make demo`: the pipeline on the local stack (see `bin/exactlyonce demo --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
exec bin/exactlyonce demo "$@"
