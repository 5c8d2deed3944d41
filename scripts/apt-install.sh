#!/usr/bin/env bash
# Installs Debian packages with apt-get, as root or through sudo, for the test set-up scripts
# (install-browser.sh: the browser test's Chromium; install-python-avro.sh: the independent
# producer's Python client). Usage: scripts/apt-install.sh "<what they are for>" pkg…
# Prints one line before, says which command failed (and what to run by hand) when one does.
set -euo pipefail
why=$1
shift
sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "$why needs the Debian packages $*; run: apt-get install $* (as root)" >&2
    exit 1
  fi
  sudo=sudo
fi
echo "installing $* (Debian packages) for $why…" >&2
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get update -qq >/dev/null; then
  echo "apt-get update failed; run it by hand, then: apt-get install $*" >&2
  exit 1
fi
if ! $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
  echo "apt-get install $* failed; run it by hand and retry" >&2
  exit 1
fi
