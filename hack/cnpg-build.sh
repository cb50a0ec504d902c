#!/usr/bin/env bash
# Build (once per machine) the CloudNativePG manager from its Go module source and print the
# binary's path on stdout. Progress goes to stderr.
#
#   manager=$(bash hack/cnpg-build.sh)   # builds only if the versioned cache folder is missing
#
# No registry image is reachable here, but the Go module proxy serves CNPG's source. hack/cnpg is
# a wrapper module (go.mod + go.sum committed) whose `tool` line pins cmd/manager; CNPG's own
# go.mod has no `replace` directives, so the wrapper needs none either and MVS picks exactly the
# versions CNPG released with. The one static binary is both the operator (`manager controller`)
# and what CNPG copies into every Postgres pod (`manager instance ...`, via its bootstrap init
# container), so images/cnpg ships it once.
#
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/cnpg-<version>-<hash>/manager, <hash> over
# hack/cnpg/{go.mod,go.sum}, this script's BUILD_REV and the Go version.
# Cold build measured here: see docs/operations.md (High availability).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CNPG_VERSION=v1.27.1 # hack/cnpg/go.mod, hack/foreign-crds.sh
BUILD_REV=1
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
log() { echo "cnpg-build: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

GO=${GO:-}
if [[ -z $GO ]]; then
  if command -v go >/dev/null 2>&1; then GO=$(command -v go)
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "no Go toolchain found (need go >= 1.26 on PATH or at /usr/local/go/bin/go)"
  fi
fi
grep -q "github.com/cloudnative-pg/cloudnative-pg $CNPG_VERSION" "$ROOT/hack/cnpg/go.mod" \
  || die "hack/cnpg/go.mod does not require cloudnative-pg $CNPG_VERSION (CNPG_VERSION here)"

hash=$(
  {
    "$GO" env GOVERSION GOOS GOARCH
    echo "$CNPG_VERSION $BUILD_REV"
    cat "$ROOT/hack/cnpg/go.mod" "$ROOT/hack/cnpg/go.sum"
  } | sha256sum | cut -c1-12
)
DIR=$CACHE/cnpg-$CNPG_VERSION-$hash
if [[ -x $DIR/manager ]]; then
  echo "$DIR/manager"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/cnpg-build.lock"
flock 9
if [[ -x $DIR/manager ]]; then
  echo "$DIR/manager"
  exit 0
fi

log "building the CloudNativePG $CNPG_VERSION manager into $DIR (first run: minutes)"
start=$(date +%s)
tmp=$DIR.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
pkg=github.com/cloudnative-pg/cloudnative-pg/pkg/versions
ldflags="-s -w -X $pkg.buildVersion=${CNPG_VERSION#v} -X $pkg.buildCommit=module-proxy"
ldflags+=" -X $pkg.buildDate=$(date -u +%Y-%m-%d)"
(
  cd "$ROOT/hack/cnpg"
  GOFLAGS="-buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0 \
    nice -n "${KUBE_BUILD_NICE:-10}" "$GO" build -p "${KUBE_BUILD_P:-2}" -trimpath \
    -ldflags="$ldflags" -o "$tmp/manager" github.com/cloudnative-pg/cloudnative-pg/cmd/manager
)
rm -rf "$DIR"
mv "$tmp" "$DIR"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$DIR/manager" | cut -f1)"

for old in "$CACHE"/cnpg-v*; do
  [[ -d $old && $old != "$DIR" && $old != *.tmp.* ]] || continue
  log "removing old build $old"
  rm -rf "$old"
done
echo "$DIR/manager"
