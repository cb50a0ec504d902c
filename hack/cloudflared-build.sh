#!/usr/bin/env bash
# Build (once per machine) cloudflared, the gateway's tunnel sidecar, from its Go module and print
# the binary's path on stdout. Progress goes to stderr. hack/images.sh puts it in images/cloudflared.
#
#   bin=$(bash hack/cloudflared-build.sh)   # builds only if the versioned cache folder is missing
#
# Why a wrapper module (hack/cloudflared/go.mod): the Go module proxy refuses cloudflared's
# version list but serves exact pseudo-versions, and cloudflared's go.mod has replace directives
# (a quic-go fork among them), which `go install pkg@version` refuses. The wrapper requires the
# release commit, repeats the replaces and commits its go.sum, so the build is locked.
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/cloudflared-<version>-<hash>/bin/cloudflared,
# <hash> over hack/cloudflared/{go.mod,go.sum}, the version, BUILD_REV and the Go version.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/hack/cloudflared
CLOUDFLARED_VERSION=2026.7.1 # the release of the commit pinned in hack/cloudflared/go.mod
BUILD_REV=1
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

log() { echo "cloudflared-build: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
# shellcheck source=hack/build-lib.sh
source "$ROOT/hack/build-lib.sh"
find_go

hash=$(
  {
    "$GO" env GOVERSION GOOS GOARCH
    echo "$CLOUDFLARED_VERSION $BUILD_REV"
    cat "$SRC/go.mod" "$SRC/go.sum"
  } | sha256sum | cut -c1-12
)
DIR=$CACHE/cloudflared-$CLOUDFLARED_VERSION-$hash
OUT=$DIR/bin/cloudflared

if [[ -x $OUT ]]; then
  mark_used "$DIR"
  echo "$OUT"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/cloudflared-build.lock"
flock 9
if [[ -x $OUT ]]; then
  mark_used "$DIR"
  echo "$OUT"
  exit 0
fi

log "building cloudflared $CLOUDFLARED_VERSION into $DIR (first run: minutes)"
tmp=$DIR/tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
# The commit's time as the build time, so two builds of one version report the same.
built=$(sed -n 's/.*github.com\/cloudflare\/cloudflared v0.0.0-\([0-9]\{14\}\)-.*/\1/p' "$SRC/go.mod" | head -1)
built="${built:0:4}-${built:4:2}-${built:6:2}-${built:8:2}${built:10:2} UTC"
(
  cd "$SRC"
  export GOFLAGS="-buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
  nice -n "${KUBE_BUILD_NICE:-10}" "$GO" build -p "${KUBE_BUILD_P:-2}" -trimpath \
    -ldflags="-s -w -X 'main.Version=$CLOUDFLARED_VERSION' -X 'main.BuildTime=$built'" \
    -o "$tmp/cloudflared" github.com/cloudflare/cloudflared/cmd/cloudflared
)
"$tmp/cloudflared" --version >&2 || die "the built cloudflared does not run"
mkdir -p "$DIR/bin"
mv "$tmp/cloudflared" "$OUT"
rm -rf "$tmp"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$OUT" | cut -f1)"
prune_old_builds cloudflared- "$DIR"
echo "$OUT"
