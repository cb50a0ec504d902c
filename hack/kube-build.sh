#!/usr/bin/env bash
# Build (once per machine) the local Kubernetes control plane binaries from Go module
# sources and print the bin folder on stdout. Progress goes to stderr.
#
#   bin=$(bash hack/kube-build.sh)      # builds only if the versioned cache folder is missing
#
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/kube-<k8s version>-<hash>/bin where
# <hash> covers hack/kube/{go.mod,go.sum,*.go}, this script and the Go version, so any
# change of a pinned version or of the wrapper gives a new folder and an unchanged tree
# never rebuilds. GOMODCACHE/GOCACHE stay the Go defaults (warm rebuilds are incremental).
#
# Contents of bin/: kube (multi-call: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok) + one symlink per name, helm, kind.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/hack/kube
K8S_VERSION=v1.37.2 # keep in step with hack/kube/go.mod (require + replace lines)
HELM_VERSION=v3.22.0
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

log() { echo "kube-build: $*" >&2; }
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
    cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go "${BASH_SOURCE[0]}"
  } | sha256sum | cut -c1-12
)
DIR=$CACHE/kube-$K8S_VERSION-$hash
BIN=$DIR/bin
NAMES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

complete() {
  [[ -x $BIN/kube && -x $BIN/helm && -x $BIN/kind ]] || return 1
  local n
  for n in "${NAMES[@]}"; do [[ -L $BIN/$n ]] || return 1; done
}

if complete; then
  mark_used "$DIR"
  echo "$BIN"
  exit 0
fi

mkdir -p "$CACHE"
exec 9>"$CACHE/kube-build.lock"
flock 9 # another build of the same tree (a parallel test worker) finishes first
if complete; then
  mark_used "$DIR"
  echo "$BIN"
  exit 0
fi

log "building Kubernetes $K8S_VERSION control plane into $BIN (first run on this machine: minutes)"
tmp=$DIR/bin.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ver_ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ver_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ver_ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
done
ver_ldflags+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"

start=$(date +%s)
(
  cd "$SRC"
  export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  nice -n "${KUBE_BUILD_NICE:-10}" "$GO" build -p "${KUBE_BUILD_P:-2}" -trimpath \
    -ldflags="-s -w$ver_ldflags" -o "$tmp/" \
    . helm.sh/helm/v3/cmd/helm sigs.k8s.io/kind
)
for n in "${NAMES[@]}"; do ln -sfn kube "$tmp/$n"; done
rm -rf "$BIN"
mv "$tmp" "$BIN"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$BIN" | cut -f1) in $BIN"

# Drop builds of other versions/trees unless in use (hack/build-lib.sh).
prune_old_builds kube-v "$DIR"
echo "$BIN"
