#!/usr/bin/env bash
# Makes the Kafka client's native part, offline: `exactlyonce setup` in a project that installed the
# package, and `make deps` (scripts/install-deps.sh) in a clone, both run this one recipe.
#
#   scripts/kafka-client.sh <folder of the installed @confluentinc/kafka-javascript>
#
# @confluentinc/kafka-javascript's own install step downloads a prebuilt binary from GitHub, and its
# fallback (a static build) downloads librdkafka's dependencies too; neither works where only the
# package registries are reachable. So the client is built from the librdkafka source it bundles,
# linked dynamically against the system's libraries (CKJS_LINKING=dynamic), about 2-3 minutes on 2 cores:
#   - against the headers of the Node that runs this script (its installation's include/node), so
#     node-gyp never downloads them;
#   - with every codec Kafka producers use (gzip, snappy, lz4, zstd) and SASL (PLAIN, SCRAM,
#     OAUTHBEARER, GSSAPI): the Debian development packages it needs are installed first when missing;
#   - checked after the build: the client's builtin.features must list them all.
# A client that already loads with every feature (a build of ours, or the prebuilt binary where the
# install could download it) is left as it is. A build is kept in $XDG_CACHE_HOME/exactlyonce (~/.cache
# by default) keyed by client version, build recipe, Node ABI and CPU, so another project or a fresh
# clone on the same machine copies it in a second.
set -euo pipefail

# Bump when the build recipe changes, so a cached build made by an older recipe is not reused.
RECIPE=2
# What the client must be able to do; checked against librdkafka's builtin.features.
FEATURES="gzip snappy lz4 zstd ssl sasl_plain sasl_scram sasl_oauthbearer sasl_gssapi oidc"
# Debian development packages the build links against (zlib, OpenSSL, zstd, lz4, Cyrus SASL for
# GSSAPI, libcurl for OAUTHBEARER/OIDC token retrieval).
APT_PACKAGES="zlib1g-dev libssl-dev libzstd-dev liblz4-dev libsasl2-dev libcurl4-openssl-dev"

fail() { echo "error EO_KAFKA_CLIENT_MISSING: $*" >&2; exit 3; }
now() { date +%s; }

[ $# -eq 1 ] || { echo "usage: $0 <folder of @confluentinc/kafka-javascript>" >&2; exit 2; }
pkg=$(cd "$1" && pwd) || fail "no such folder: $1"
[ -f "$pkg/package.json" ] || fail "$pkg is not the installed @confluentinc/kafka-javascript (no package.json)"
# `npm rebuild` runs in the project whose node_modules holds the client.
case "$pkg" in
  */node_modules/@confluentinc/kafka-javascript) project=${pkg%/node_modules/@confluentinc/kafka-javascript} ;;
  *) fail "$pkg is not inside a node_modules folder" ;;
esac
addon=build/Release/confluent-kafka-javascript.node
version=$(node -p "require('$pkg/package.json').version")

# The features of the client as installed, empty when it does not load.
features() { node -p "require('$pkg').features.join(' ')" 2>/dev/null || true; }
# The features of FEATURES that `$1` lacks.
lacking() {
  local f out=""
  for f in $FEATURES; do case " $1 " in *" $f "*) ;; *) out="$out $f" ;; esac; done
  echo "${out# }"
}

if [ -f "$pkg/$addon" ]; then
  have=$(features)
  if [ -n "$have" ] && [ -z "$(lacking "$have")" ]; then
    echo "Kafka client $version: ready ($pkg) with: $have"
    exit 0
  fi
  if [ -n "$have" ]; then echo "Kafka client $version: the installed build lacks $(lacking "$have"); building it from source"; fi
fi

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

# Names the first real cause found in a failed build's log: the first pattern (an extended regular
# expression) that matches a line gives the message, with the line (cut to 160 characters) for %s.
BUILD_CAUSES=(
  'gyp (http|ERR!).*(GET|download|connect|network)|EAI_AGAIN|ENOTFOUND|ECONNREFUSED'
  'node-gyp tried to download something (%s); the Node headers at NODEDIR were not used'
  'g\+\+: (command )?not found|c\+\+: (command )?not found|No C\+\+ compiler|not find any Visual Studio|make: (command )?not found|gyp ERR! stack Error: not found: make'
  'a compiler or make is missing (%s); install g++ and make (Debian: build-essential)'
  'Python is not set|find Python|python3?: (command )?not found'
  'python3 is missing (%s); install python3'
  'fatal error: [^ ]+\.h: No such file'
  'a header is missing: %s'
  'cannot find -l|undefined reference'
  'linking failed: %s'
  'error:|ERR!'
  'the build failed: %s'
)
build_cause() {
  local log=$1 m i
  shopt -u patsub_replacement 2>/dev/null || true   # bash 5.2: an & of the line is text, not the match
  for ((i = 0; i < ${#BUILD_CAUSES[@]}; i += 2)); do
    if m=$(grep -m1 -E "${BUILD_CAUSES[i]}" "$log"); then
      local text=${BUILD_CAUSES[i + 1]//NODEDIR/$nodedir}
      echo "${text//%s/${m:0:160}}"
      return
    fi
  done
  echo "the build failed"
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
  if ! (cd "$project" && CKJS_LINKING=dynamic npm_config_build_from_source=true npm_config_nodedir="$nodedir" \
       npm rebuild @confluentinc/kafka-javascript) >"$log" 2>&1; then
    tail -n 20 "$log" >&2
    fail "building @confluentinc/kafka-javascript failed: $(build_cause "$log"); full log: $log"
  fi
  # librdkafka's configure picks each optional library only when it finds it: check what it got.
  have=$(features)
  [ -n "$have" ] || fail "the built Kafka client does not load; full log: $log"
  [ -z "$(lacking "$have")" ] || fail "the built Kafka client lacks $(lacking "$have") (it has: $have); are the packages $APT_PACKAGES installed? full log: $log"
  rm -f "$log"
  mkdir -p "$cache/Release" "$cache/deps"
  cp "$pkg/$addon" "$cache/Release/"
  cp -P "$pkg"/build/deps/librdkafka*.so* "$cache/deps/"
  echo "Kafka client built in $(( $(now) - t ))s with: $have; cached in $cache"
fi
# The addon finds librdkafka through its rpath, $ORIGIN/../deps.
rm -rf "$pkg/build"
mkdir -p "$pkg/build/Release" "$pkg/build/deps"
cp "$cache/Release/confluent-kafka-javascript.node" "$pkg/build/Release/"
cp -P "$cache"/deps/* "$pkg/build/deps/"
have=$(features)
[ -z "$(lacking "$have")" ] || fail "the Kafka client copied from $cache does not load with every feature (it has: ${have:-nothing}); remove that folder and run this again"
echo "Kafka client $version: ready ($pkg) with: $have"
