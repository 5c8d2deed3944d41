#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard's browser test (test/integration/
# dashboard.test.ts drives it with playwright-core). Playwright's own browser download needs hosts
# these machines cannot reach; Debian's package comes through apt like every other system package.
# Idempotent: does nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  sudo=sudo
else
  sudo=
fi
echo "installing chromium (Debian package) for the browser test…" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
/usr/bin/chromium --version >&2
