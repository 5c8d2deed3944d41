#!/usr/bin/env bash
# Installs the npm packages exactly as locked, on a machine that reaches only the package registries.
#
# @confluentinc/kafka-javascript's own install step downloads a prebuilt binary from GitHub, which is
# not reachable here, and its fallback (a static build) downloads librdkafka's dependencies too. So
# the packages are installed with their scripts off and the client is built from the librdkafka
# source it bundles, linked dynamically against the system's libssl/zlib (CKJS_LINKING=dynamic), about
# 2-3 minutes on 2 cores. The result is kept in ~/.cache/exactlyonce keyed by client version, Node ABI
# and CPU, so a fresh clone on the same machine (CI) copies it in a second instead of rebuilding.
set -euo pipefail
cd "$(dirname "$0")/.."

stamp=node_modules/.exactlyonce-deps
want=$(sha256sum package-lock.json | cut -c1-16)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -f node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node ]; then
  exit 0
fi

echo "installing npm packages (npm ci)…"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

pkg=node_modules/@confluentinc/kafka-javascript
version=$(node -p "require('./$pkg/package.json').version")
key="$version-node$(node -p process.versions.modules)-$(uname -m)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/exactlyonce/kafka-javascript/$key"

if [ -f "$cache/Release/confluent-kafka-javascript.node" ]; then
  echo "Kafka client $version: using the build cached in $cache"
else
  echo "Kafka client $version: building from its bundled librdkafka source (takes 2-3 minutes, once)…"
  start=$(date +%s)
  log=$(mktemp)
  if ! CKJS_LINKING=dynamic npm_config_build_from_source=true npm rebuild @confluentinc/kafka-javascript >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "error EO_KAFKA_CLIENT_MISSING: building @confluentinc/kafka-javascript failed (needs g++, make, python3); full log: $log" >&2
    exit 3
  fi
  rm -f "$log"
  mkdir -p "$cache/Release" "$cache/deps"
  cp "$pkg/build/Release/confluent-kafka-javascript.node" "$cache/Release/"
  cp -P "$pkg"/build/deps/librdkafka*.so* "$cache/deps/"
  echo "Kafka client built in $(( $(date +%s) - start ))s; cached in $cache"
fi
# The addon finds librdkafka through its rpath, $ORIGIN/../deps.
rm -rf "$pkg/build"
mkdir -p "$pkg/build/Release" "$pkg/build/deps"
cp "$cache/Release/confluent-kafka-javascript.node" "$pkg/build/Release/"
cp -P "$cache"/deps/* "$pkg/build/deps/"
echo "$want" > "$stamp"
