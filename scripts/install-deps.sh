#!/usr/bin/env bash
# Installs the npm packages exactly as locked, on a machine that reaches only the package registries.
#
# @confluentinc/kafka-javascript's own install step downloads a prebuilt binary from GitHub, which is
# not reachable here, and its fallback (a static build) downloads librdkafka's dependencies too. So
# the packages are installed with their scripts off and the client is built from the librdkafka
# source it bundles, linked dynamically against the system's libraries (CKJS_LINKING=dynamic), about
# 2-3 minutes on 2 cores:
#   - against the headers of the Node that runs this script (its installation's include/node), so
#     node-gyp never downloads them;
#   - with every codec Kafka producers use (gzip, snappy, lz4, zstd) and SASL (PLAIN, SCRAM,
#     OAUTHBEARER, GSSAPI): the Debian development packages it needs are installed first when missing;
#   - checked after the build: the client's builtin.features must list them all.
# The result is kept in $XDG_CACHE_HOME/exactlyonce (~/.cache by default) keyed by client version,
# build recipe, Node ABI and CPU, so a fresh clone on the same machine copies it in a second.
set -euo pipefail
cd "$(dirname "$0")/.."

# Bump when the build recipe changes, so a cached build made by an older recipe is not reused.
RECIPE=2
# What the client must be able to do; checked against librdkafka's builtin.features after the build.
FEATURES="gzip snappy lz4 zstd ssl sasl_plain sasl_scram sasl_oauthbearer sasl_gssapi oidc"
# Debian development packages the build links against (zlib, OpenSSL, zstd, lz4, Cyrus SASL for
# GSSAPI, libcurl for OAUTHBEARER/OIDC token retrieval).
APT_PACKAGES="zlib1g-dev libssl-dev libzstd-dev liblz4-dev libsasl2-dev libcurl4-openssl-dev"

fail() { echo "error EO_KAFKA_CLIENT_MISSING: $*" >&2; exit 3; }
now() { date +%s; }

stamp=node_modules/.exactlyonce-deps
want="$RECIPE-$(sha256sum package-lock.json | cut -c1-16)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] \
   && [ -f node_modules/@confluentinc/kafka-javascript/build/Release/confluent-kafka-javascript.node ]; then
  exit 0
fi

t=$(now)
echo "installing npm packages (npm ci)…"
npm ci --ignore-scripts --no-audit --no-fund --no-update-notifier --loglevel=error
echo "npm packages installed in $(( $(now) - t ))s"

pkg=node_modules/@confluentinc/kafka-javascript
version=$(node -p "require('./$pkg/package.json').version")
key="$version-r$RECIPE-node$(node -p process.versions.modules)-$(uname -m)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/exactlyonce/kafka-javascript/$key"

# The Node headers node-gyp compiles against: those of the Node running this script. Its installation
# prefix is two levels above the executable (e.g. /usr/bin/node -> /usr, ~/.nvm/…/bin/node -> ~/.nvm/…).
node_headers() {
  local prefix
  prefix=$(node -p "require('path').resolve(process.execPath, '..', '..')")
  if [ ! -f "$prefix/include/node/node.h" ] || [ ! -f "$prefix/include/node/common.gypi" ]; then
    local owner=""
    if command -v dpkg >/dev/null 2>&1; then owner=$(dpkg -S "$(readlink -f "$(command -v node)")" 2>/dev/null | cut -d: -f1 || true); fi
    fail "the headers of Node $(node -v) are missing: $prefix/include/node/node.h not found (they come with Node's own installation: the Debian/NodeSource package ${owner:-nodejs}, or the official tarball; distributions that split them ship them as libnode-dev / nodejs-devel)"
  fi
  echo "$prefix"
}

# Installs the Debian development packages the build needs, when some are missing.
system_packages() {
  local missing=() p
  command -v dpkg-query >/dev/null 2>&1 || return 0   # not Debian: the build's own checks will say
  for p in $APT_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "the client build needs the Debian packages ${missing[*]}; run: apt-get install ${missing[*]} (as root)"
    sudo=sudo
  fi
  local t0; t0=$(now)
  echo "installing the build's system packages: ${missing[*]} (apt-get)…"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null || fail "apt-get update failed; run it by hand, then: apt-get install ${missing[*]}"
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed; run it by hand and retry"
  echo "system packages installed in $(( $(now) - t0 ))s"
}

# Names the first real cause found in a failed build's log.
build_cause() {
  local log=$1 m
  if m=$(grep -m1 -E 'gyp (http|ERR!).*(GET|download|connect|network)|EAI_AGAIN|ENOTFOUND|ECONNREFUSED' "$log"); then
    echo "node-gyp tried to download something (${m:0:160}); the Node headers at $nodedir were not used"
  elif m=$(grep -m1 -E 'g\+\+: (command )?not found|c\+\+: (command )?not found|No C\+\+ compiler|not find any Visual Studio|make: (command )?not found|gyp ERR! stack Error: not found: make' "$log"); then
    echo "a compiler or make is missing (${m:0:160}); install g++ and make (Debian: build-essential)"
  elif m=$(grep -m1 -E 'Python is not set|find Python|python3?: (command )?not found' "$log"); then
    echo "python3 is missing (${m:0:160}); install python3"
  elif m=$(grep -m1 -E 'fatal error: [^ ]+\.h: No such file' "$log"); then
    echo "a header is missing: ${m:0:200}"
  elif m=$(grep -m1 -E 'cannot find -l|undefined reference' "$log"); then
    echo "linking failed: ${m:0:200}"
  elif m=$(grep -m1 -E 'error:|ERR!' "$log"); then
    echo "the build failed: ${m:0:200}"
  else
    echo "the build failed"
  fi
}

if [ -f "$cache/Release/confluent-kafka-javascript.node" ]; then
  echo "Kafka client $version: using the build cached in $cache"
else
  nodedir=$(node_headers)
  system_packages
  echo "Kafka client $version: building from its bundled librdkafka source against the Node headers in $nodedir/include/node (takes 2-3 minutes, once)…"
  t=$(now)
  log=$(mktemp -t exactlyonce-client-build.XXXXXX.log)
  # npm_config_nodedir: node-gyp takes the headers from there instead of downloading them.
  if ! CKJS_LINKING=dynamic npm_config_build_from_source=true npm_config_nodedir="$nodedir" \
       npm rebuild @confluentinc/kafka-javascript >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "building @confluentinc/kafka-javascript failed: $(build_cause "$log"); full log: $log"
  fi
  # librdkafka's configure picks each optional library only when it finds it: check what it got.
  have=$(node -p "require('./$pkg').features.join(' ')" 2>>"$log") \
    || fail "the built Kafka client does not load; full log: $log"
  for f in $FEATURES; do
    case " $have " in *" $f "*) ;; *) fail "the built Kafka client lacks '$f' (it has: $have); are the packages $APT_PACKAGES installed? full log: $log" ;; esac
  done
  rm -f "$log"
  mkdir -p "$cache/Release" "$cache/deps"
  cp "$pkg/build/Release/confluent-kafka-javascript.node" "$cache/Release/"
  cp -P "$pkg"/build/deps/librdkafka*.so* "$cache/deps/"
  echo "Kafka client built in $(( $(now) - t ))s with: $have; cached in $cache"
fi
# The addon finds librdkafka through its rpath, $ORIGIN/../deps.
rm -rf "$pkg/build"
mkdir -p "$pkg/build/Release" "$pkg/build/deps"
cp "$cache/Release/confluent-kafka-javascript.node" "$pkg/build/Release/"
cp -P "$cache"/deps/* "$pkg/build/deps/"
echo "$want" > "$stamp"
