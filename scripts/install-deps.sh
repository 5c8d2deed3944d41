#!/usr/bin/env bash
# `make deps`: installs the npm packages exactly as locked, on a machine that reaches only the package
# registries, then the Kafka client's native part (scripts/kafka-client.sh: the one build recipe, which
# `exactlyonce setup` runs in a user's project too). The npm packages go in with their install scripts
# off: @confluentinc/kafka-javascript's would download a prebuilt binary from GitHub.
set -euo pipefail
cd "$(dirname "$0")/.."

# Bump when this script's steps change, so a clone installed by an older one is installed again.
STEPS=3
stamp=node_modules/.exactlyonce-deps
want="$STEPS-$(sha256sum package-lock.json | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -f node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node ]; then
  exit 0
fi

now() { date +%s; }
t=$(now)
echo "installing npm packages (npm ci)…"
npm ci --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error
echo "npm packages installed in $(( $(now) - t ))s"

# What `npm install exactlyonce` resolves in a new project (the newest versions its ranges allow, not
# this lock's) goes into the npm cache too, so that the test that installs the packed package into a
# fresh project (test/integration/npm-package.test.ts) can run offline: `npm ci` caches the locked
# tarballs but not the registry's version lists a fresh install needs.
t=$(now)
warm=$(mktemp -d -t exactlyonce-npm-cache.XXXXXX)
trap 'rm -rf "$warm"' EXIT
node -e "const p = require('./package.json'); require('fs').writeFileSync(process.argv[1], JSON.stringify({ name: 'warm', private: true, dependencies: p.dependencies }))" "$warm/package.json"
if (cd "$warm" && npm install --ignore-scripts --prefer-offline --no-audit --no-fund --no-update-notifier --loglevel=error >/dev/null); then
  echo "npm cache holds what a new project's install of the package resolves ($(( $(now) - t ))s)"
else
  echo "warning: the npm cache could not be filled with what a new project's install resolves (offline?); the npm package test will fail" >&2
fi

scripts/kafka-client.sh node_modules/@confluentinc/kafka-javascript
echo "$want" > "$stamp"
