#!/usr/bin/env bash
# Makes the base images the Dockerfiles build FROM when no container registry is reachable:
#   brain-base/debian:bookworm-v2   mmdebstrap minbase of this machine's suite, `docker import`ed
#   brain-base/debian:trixie-v2     the same for trixie (postgresql-17 + pgvector 0.8 live there)
#   brain-base/python:3.11-bookworm-v2   Debian's python3 (3.11) + python3-venv on the first
# Prints nothing on success; idempotent (an image that exists is kept, and the rootfs tarballs are
# cached in $BRAIN_CACHE/images-v1/bases, so a fresh Docker data root re-imports without apt).
#
#   bash hack/base-images.sh            # all three
#   MIRROR=http://deb.debian.org/debian bash hack/base-images.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
BASES=$CACHE/images-v1/bases
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY_MIRROR:-http://deb.debian.org/debian-security}
export BASE_TAG=v2  # bump when the recipe changes: new tags, new tarballs
log() { echo "base-images: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
docker version >/dev/null 2>&1 || die "no Docker engine answers; run bash hack/docker-up.sh first"

have() { docker image inspect "$1" >/dev/null 2>&1; }
mkdir -p "$BASES"

debian_base() { # suite
  local suite=$1 ref="brain-base/debian:$1-$BASE_TAG" tar="$BASES/debian-$1-$BASE_TAG.tar"
  have "$ref" && return 0
  if [ ! -s "$tar" ]; then
    if ! command -v mmdebstrap >/dev/null; then
      [ "$(id -u)" = 0 ] || die "mmdebstrap is missing (apt-get install mmdebstrap)"
      # shellcheck source=hack/apt-lib.sh
      source "$ROOT/hack/apt-lib.sh"
      apt_install mmdebstrap || die "apt-get install mmdebstrap failed (is Debian's mirror reachable?)"
    fi
    mkdir -p "$BASES"
    log "mmdebstrap $suite from $MIRROR"
    # minbase + CA certificates; apt lists, docs and caches dropped (the Dockerfiles apt-get update).
    # maybe-merged-usr: /usr merged by mmdebstrap itself, so bookworm gets no usrmerge package
    # (which drags in perl, 40 MB, into every image).
    mmdebstrap --quiet --format=tar --variant=minbase --include=ca-certificates \
      --hook-dir=/usr/share/mmdebstrap/hooks/maybe-merged-usr \
      --aptopt='APT::Install-Recommends "false"' \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*' \
      "$suite" "$tar.part" \
      "deb $MIRROR $suite main" "deb $MIRROR $suite-updates main" "deb $SECURITY $suite-security main" \
      >"$BASES/mmdebstrap-$suite.log" 2>&1 \
      || { tail -n 20 "$BASES/mmdebstrap-$suite.log" >&2; die "mmdebstrap $suite failed (is $MIRROR reachable?)"; }
    mv "$tar.part" "$tar"
  fi
  docker import --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --message "mmdebstrap $suite minbase ($MIRROR)" "$tar" "$ref" >/dev/null
}

SUITE=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
[ "$SUITE" = bookworm ] || log "note: this machine is $SUITE; the Python base stays on bookworm (python3.11)"
debian_base bookworm
debian_base trixie
if ! have "brain-base/python:3.11-bookworm-$BASE_TAG"; then
  log "building brain-base/python:3.11-bookworm-$BASE_TAG"
  docker build -q --network host -f "$ROOT/images/base/python.Dockerfile" \
    --build-arg "DEBIAN_IMAGE=brain-base/debian:bookworm-$BASE_TAG" \
    -t "brain-base/python:3.11-bookworm-$BASE_TAG" "$ROOT/images/base" >"$BASES/python-build.log" 2>&1 \
    || { tail -n 20 "$BASES/python-build.log" >&2; die "building the Python base failed"; }
fi
