#!/usr/bin/env bash
# `make image`: the worker's container image (deploy/image/Containerfile), built with podman.
#
#   scripts/image.sh            builds exactlyonce:<package version> (skipped when its inputs did not change)
#   scripts/image.sh --base     only makes the local base image and prints its name
#
# Elsewhere the Containerfile builds FROM the public node:20-bookworm-slim (`podman build` or `docker
# build` with no --build-arg). Where no registry can be pulled from (our machines; docs/deployment.md,
# "The image") the base is made here from Debian's package archive with mmdebstrap,
# and Node 20 is copied in from the machine's own installation (/usr/bin/node, npm, corepack and the
# headers node-gyp compiles against; NodeSource's Debian build, linked against Debian 12's libraries):
# Debian 12's archive serves Node 18 only, and the installed package cannot be repacked as it is (npm
# was upgraded in place, so dpkg's file list no longer matches). Everything this needs is installed
# through apt-get when missing, and the two podman settings this kernel needs are written to
# /etc/containers/containers.conf.
#
# Both images are kept in podman's storage and reused: the base is named after what it is made of, the
# image is labelled with a hash of its inputs (the Containerfile, the package files, the sources).
set -euo pipefail
cd "$(dirname "$0")/.."

# Bump when the base's recipe below changes.
BASE_RECIPE=1
# What the base holds beside Node: the Kafka client's runtime libraries (it links them dynamically,
# scripts/kafka-client.sh), CA certificates for TLS, and libstdc++ for node itself.
BASE_PACKAGES="ca-certificates,libssl3,libsasl2-2,libsasl2-modules,libzstd1,liblz4-1,zlib1g,libcurl4,libstdc++6"
# What is copied from the machine's Node installation (prefix /usr).
NODE_FILES="usr/bin/node usr/lib/node_modules/npm usr/lib/node_modules/corepack usr/include/node"
SUITE=bookworm

now() { date +%s; }
fail() { echo "error EO_IMAGE_FAILED: $*" >&2; exit 3; }
[ "$(id -u)" = 0 ] || fail "podman here runs as root (rootless podman is not tried: docs/deployment.md); run as root"

# The tools, installed through apt-get when missing.
tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  [ -x /usr/sbin/runc ] || missing+=(runc)
  command -v mmdebstrap >/dev/null || missing+=(mmdebstrap)
  [ ${#missing[@]} -eq 0 ] && return 0
  local t0; t0=$(now)
  echo "installing ${missing[*]} (apt-get)…"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null || fail "apt-get update failed; run it by hand, then: apt-get install ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" uidmap fuse-overlayfs slirp4netns catatonit >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
  echo "installed in $(( $(now) - t0 ))s"
}

# podman 4.3.1 on this kernel: the default ulimits cannot be set (crun: setrlimit RLIMIT_NOFILE:
# Operation not permitted) and crun refuses hybrid cgroups; runc with cgroupfs works.
containers_conf() {
  local f=/etc/containers/containers.conf
  if [ -f "$f" ] && grep -q '^default_ulimits = \[\]' "$f" && grep -q '^runtime = "runc"' "$f" \
     && grep -q '^cgroup_manager = "cgroupfs"' "$f"; then return 0; fi
  if [ -f "$f" ]; then cp "$f" "$f.before-exactlyonce"; echo "kept the previous $f as $f.before-exactlyonce"; fi
  mkdir -p /etc/containers
  printf '# Written by exactlyonce scripts/image.sh: podman 4.3.1 on this machine needs these two settings.\n[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\n' > "$f"
  echo "wrote $f (default_ulimits = [], runtime runc, cgroupfs)"
}

# The local base: Debian 12 minbase + Node 20 + the client's runtime libraries, as an image.
base() {
  local node_bin node_version npm_version
  node_bin=$(readlink -f "$(command -v node)")
  [ "$node_bin" = /usr/bin/node ] || fail "the base copies Node from /usr (NodeSource's or Debian's package); this node is $node_bin"
  node_version=$(node -v); npm_version=$(npm -v)
  case "$node_version" in v20.*) ;; *) fail "the installed node is $node_version, not 20.x" ;; esac
  local key tag
  key=$(printf '%s\n' "$BASE_RECIPE" "$SUITE" "$BASE_PACKAGES" "$NODE_FILES" "$node_version" "$npm_version" | sha256sum | cut -c1-12)
  tag="localhost/exactlyonce-base:node${node_version#v}-$key"
  if podman image exists "$tag"; then echo "$tag"; return 0; fi
  local t0 tmp; t0=$(now)
  tmp=$(mktemp -d -t exactlyonce-base.XXXXXX)
  trap 'rm -rf "$tmp"' RETURN
  echo "making the base image $tag from the Debian archive (mmdebstrap $SUITE minbase) and this machine's Node $node_version…" >&2
  (cd / && tar -cf "$tmp/node.tar" $NODE_FILES) || fail "cannot read the Node installation ($NODE_FILES)"
  mmdebstrap --quiet --variant=minbase --include="$BASE_PACKAGES" \
    --customize-hook="tar-in $tmp/node.tar /" \
    --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1"/usr/bin/npm; ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1"/usr/bin/npx; ln -s ../lib/node_modules/corepack/dist/corepack.js "$1"/usr/bin/corepack' \
    --customize-hook='chroot "$1" node -e "process.exit(0)"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin' \
    "$SUITE" "$tmp/rootfs.tar" >&2 || fail "mmdebstrap failed"
  podman import --quiet --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tmp/rootfs.tar" "$tag" >/dev/null || fail "podman import failed"
  echo "base image $tag made in $(( $(now) - t0 ))s: $(( $(podman image inspect --format '{{.Size}}' "$tag") / 1024 / 1024 )) MiB" >&2
  echo "$tag"
}

tools
containers_conf
base_tag=$(base)
if [ "${1:-}" = --base ]; then echo "$base_tag"; exit 0; fi

version=$(node -p "require('./package.json').version")
tag="localhost/exactlyonce:$version"
# The image's inputs: what the Containerfile copies (.dockerignore lists it) and the base.
inputs=$( { echo "$base_tag"; cat deploy/image/Containerfile .dockerignore;
  git ls-files -co --exclude-standard -- package.json package-lock.json tsconfig.json tsconfig.build.json \
    scripts/kafka-client.sh scripts/build.sh deploy/image/probe.sh src bench bin stack monitoring examples docs README.md LICENSE \
    | grep -v '^bench/results/' | sort | xargs -d '\n' sha256sum 2>/dev/null; } | sha256sum | cut -c1-16)
if [ "$(podman image inspect --format '{{ index .Labels "io.exactlyonce.inputs" }}' "$tag" 2>/dev/null || true)" = "$inputs" ]; then
  echo "image $tag is up to date (inputs $inputs)"
  exit 0
fi
t0=$(now)
echo "building $tag FROM $base_tag…"
# --network host: the build stage's npm ci and apt-get reach the registries the way the host does;
# npm's CA file (a TLS-inspecting proxy's CA, where there is one) goes in as a build secret, not a layer.
secret=()
cafile=$(npm config get cafile 2>/dev/null || true)
if [ -n "$cafile" ] && [ "$cafile" != null ] && [ -f "$cafile" ]; then secret=(--secret "id=npm_ca,src=$cafile"); fi
build() { podman build --network host --layers "${secret[@]}" --build-arg BASE="$base_tag" --label "io.exactlyonce.inputs=$inputs" -f deploy/image/Containerfile "$@" .; }
# The build stage gets a tag of its own, so that its layers (the npm packages and the client's build,
# minutes) stay referenced when older builds are pruned below; the second call reuses them.
build --target build -t "localhost/exactlyonce-build:$version" || fail "podman build (the build stage) failed"
build -t "$tag" || fail "podman build failed"
# What earlier builds left untagged (each source change makes a new image): removed, ours only.
podman image prune -f --filter label=io.exactlyonce.inputs >/dev/null || true
size=$(podman image inspect --format '{{.Size}}' "$tag")
echo "built $tag in $(( $(now) - t0 ))s: $(( size / 1024 / 1024 )) MiB"
