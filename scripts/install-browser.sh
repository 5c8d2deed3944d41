#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium for the dashboard's browser test (test/integration/
# dashboard.test.ts drives it with playwright-core). Playwright's own browser download needs hosts
# these machines cannot reach; Debian's package comes through apt like every other system package.
# Idempotent: does nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
"$(dirname "$0")/apt-install.sh" "the browser test" chromium fonts-dejavu-core
/usr/bin/chromium --version >&2
