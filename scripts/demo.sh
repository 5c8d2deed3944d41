#!/usr/bin/env bash
# `make demo`: brings the local stack up, applies the schema, creates the topic, shows the stack.
set -euo pipefail
cd "$(dirname "$0")/.."
EO=bin/exactlyonce
$EO stack up
$EO schema apply
$EO topic create
$EO stack status
echo
echo "The stack stays up; stop it with: bin/exactlyonce stack down"
