#!/usr/bin/env bash
# Build (once per machine) what a real node needs on top of the control plane of
# hack/kube-build.sh, and print the bin folder on stdout. Progress goes to stderr.
#
#   bin=$(bash hack/node-build.sh)     # builds only if the versioned cache folder is missing
#
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/node-<k8s>-<hash>/ where <hash> covers
# hack/kube/{go.mod,go.sum}, hack/node/pause/*, hack/node/coredns/*, hack/node/oci-image.py, the
# pinned versions, the build tags, BUILD_REV and the Go version: only what changes the binaries
# (node-up's config files are not in it, so editing them never rebuilds). Bump BUILD_REV when a
# change here changes what is built. Cold figures: docs/control-plane.md ("Measured").
#
# bin/:    kubelet, kube-proxy (k8s.io/kubernetes/cmd/..., built against a copy of hack/kube's
#          go.mod through -modfile, so the control plane's module and cache hash stay as they are),
#          containerd, containerd-shim-runc-v2, ctr (go install ...@$CONTAINERD_VERSION with
#          $CONTAINERD_TAGS: no devmapper, zfs or OpenTelemetry exporter, which the node never uses),
#          coredns (hack/node/coredns: CoreDNS $COREDNS_VERSION with only the Corefile's five
#          plugins, not upstream's every plugin and cloud SDK), pause (hack/node/pause).
# images/: pause.tar and coredns.tar, OCI archives made here (no registry, no Docker) by
#          hack/node/oci-image.py, ready for `ctr -n k8s.io images import`.
# Debian's runc and containernetworking-plugins are installed with apt-get when missing (root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_VERSION=v1.37.2 # the control plane's (hack/kube/go.mod)
CONTAINERD_VERSION=v2.4.2
COREDNS_VERSION=v1.14.7
# btrfs is already out (it needs cgo); the CRI plugin, overlayfs and runc shim stay.
CONTAINERD_TAGS="no_devmapper no_zfs no_tracing"
BUILD_REV=2
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

log() { echo "node-build: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# shellcheck source=hack/build-lib.sh
source "$ROOT/hack/build-lib.sh"
find_go

# --- Debian packages: runc and the CNI plugins -------------------------------------------
CNI_DIR=/usr/lib/cni
need_pkgs=()
command -v runc >/dev/null 2>&1 || need_pkgs+=(runc)
for p in bridge host-local portmap loopback; do
  [[ -x $CNI_DIR/$p ]] || { need_pkgs+=(containernetworking-plugins); break; }
done
command -v iptables >/dev/null 2>&1 || need_pkgs+=(iptables)
if ((${#need_pkgs[@]})); then
  [[ $(id -u) == 0 ]] || die "missing ${need_pkgs[*]} and not root, so apt-get cannot install them"
  command -v apt-get >/dev/null || die "missing ${need_pkgs[*]} and no apt-get to install them"
  log "installing Debian's ${need_pkgs[*]}"
  # shellcheck source=hack/apt-lib.sh
  source "$ROOT/hack/apt-lib.sh"
  apt_install "${need_pkgs[@]}" || die "apt-get install ${need_pkgs[*]} failed (is Debian's mirror reachable?)"
fi

hash=$(
  {
    "$GO" env GOVERSION GOOS GOARCH
    echo "$K8S_VERSION $CONTAINERD_VERSION $COREDNS_VERSION $CONTAINERD_TAGS $BUILD_REV"
    cat "$ROOT/hack/kube/go.mod" "$ROOT/hack/kube/go.sum" "$ROOT"/hack/node/pause/* "$ROOT"/hack/node/coredns/* \
      "$ROOT/hack/node/oci-image.py"
  } | sha256sum | cut -c1-12
)
DIR=$CACHE/node-$K8S_VERSION-$hash
BIN=$DIR/bin
NAMES=(kubelet kube-proxy containerd containerd-shim-runc-v2 ctr coredns pause)

complete() {
  local n
  for n in "${NAMES[@]}"; do [[ -x $BIN/$n ]] || return 1; done
  [[ -s $DIR/images/pause.tar && -s $DIR/images/coredns.tar ]]
}

if complete; then
  mark_used "$DIR"
  echo "$BIN"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/node-build.lock"
flock 9
if complete; then
  mark_used "$DIR"
  echo "$BIN"
  exit 0
fi

log "building kubelet, kube-proxy ($K8S_VERSION), containerd $CONTAINERD_VERSION, CoreDNS $COREDNS_VERSION into $DIR (first run: minutes)"
tmp=$DIR/tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/images" "$tmp/mod"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
NICE=(nice -n "${KUBE_BUILD_NICE:-10}")
P=${KUBE_BUILD_P:-2}

# kubelet + kube-proxy: the control plane's module graph, its go.mod/go.sum copied so that the
# extra go.sum lines these commands need never touch hack/kube.
cp "$ROOT/hack/kube/go.mod" "$tmp/mod/go.mod"
cp "$ROOT/hack/kube/go.sum" "$tmp/mod/go.sum"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ver=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ver+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ver+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$now"
done
(
  cd "$ROOT/hack/kube"
  "${NICE[@]}" "$GO" build -p "$P" -trimpath -mod=mod -modfile="$tmp/mod/go.mod" \
    -ldflags="-s -w$ver" -o "$tmp/bin/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
)
log "kubelet, kube-proxy built ($(($(date +%s) - start)) s)"

GOBIN=$tmp/bin "${NICE[@]}" "$GO" install -p "$P" -trimpath -tags "$CONTAINERD_TAGS" -ldflags="-s -w" \
  "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION" \
  "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
  "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
log "containerd built ($(($(date +%s) - start)) s)"

# hack/node/coredns's go.mod pins $COREDNS_VERSION; its go.sum is committed (-mod=readonly).
(
  cd "$ROOT/hack/node/coredns"
  grep -q "github.com/coredns/coredns $COREDNS_VERSION\$" go.mod || die "hack/node/coredns/go.mod does not require CoreDNS $COREDNS_VERSION"
  "${NICE[@]}" "$GO" build -p "$P" -trimpath -mod=readonly \
    -ldflags="-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" -o "$tmp/bin/coredns" .
)
log "coredns built ($(($(date +%s) - start)) s)"

(cd "$ROOT/hack/node/pause" && "$GO" build -trimpath -ldflags="-s -w" -o "$tmp/bin/pause" .)

# Images for the two binaries pods run (pause = every pod's sandbox; CoreDNS).
PY=${PYTHON:-python3}
"$PY" "$ROOT/hack/node/oci-image.py" --binary "$tmp/bin/pause" --name registry.k8s.io/pause:3.10 \
  --entrypoint /pause --out "$tmp/images/pause.tar"
"$PY" "$ROOT/hack/node/oci-image.py" --binary "$tmp/bin/coredns" \
  --name "brain-node/coredns:$COREDNS_VERSION" --entrypoint /coredns --user 65532 \
  --out "$tmp/images/coredns.tar"

rm -rf "$tmp/mod" "$BIN" "$DIR/images"
mv "$tmp/bin" "$BIN"
mv "$tmp/images" "$DIR/images"
echo "$COREDNS_VERSION" >"$DIR/coredns.version"
rm -rf "$tmp"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$DIR" | cut -f1) in $DIR"

prune_old_builds node-v "$DIR"
echo "$BIN"
