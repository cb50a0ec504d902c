#!/usr/bin/env bash
# Build (once per machine) the real node's NetworkPolicy enforcer, kube-router's network-policy
# controller (iptables + ipset), and print the path of the binary on stdout. Progress: stderr.
#
#   kr=$(bash hack/kube-router-build.sh)   # builds only if the versioned cache folder is missing
#
# Why kube-router: the node's bridge CNI plugin ignores NetworkPolicies, and this kernel has no
# CONFIG_NFT_QUEUE, so sigs.k8s.io/kube-network-policies (nfqueue) cannot run; kube-router's
# controller needs only iptables, ipset (CONFIG_IP_SET, NETFILTER_XT_SET) and bridge netfilter
# (docs/control-plane.md, "NetworkPolicies: kube-router on the node").
#
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/kube-router-<version>-<hash>/kube-router, <hash>
# over the version, BUILD_REV and the Go version. `go install ...@$KUBE_ROUTER_VERSION` through the
# Go module proxy (v2.1.0 is the version the proxy serves here), niced, -p KUBE_BUILD_P (default 1).
# Debian's iptables and ipset are installed with apt-get when missing (root).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KUBE_ROUTER_VERSION=v2.1.0
BUILD_REV=1
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

log() { echo "kube-router-build: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

# shellcheck source=hack/build-lib.sh
source "$ROOT/hack/build-lib.sh"
find_go

need_pkgs=()
command -v iptables >/dev/null 2>&1 || need_pkgs+=(iptables)
command -v ipset >/dev/null 2>&1 || need_pkgs+=(ipset)
if ((${#need_pkgs[@]})); then
  [[ $(id -u) == 0 ]] || die "missing ${need_pkgs[*]} and not root, so apt-get cannot install them"
  command -v apt-get >/dev/null || die "missing ${need_pkgs[*]} and no apt-get to install them"
  log "installing Debian's ${need_pkgs[*]}"
  # shellcheck source=hack/apt-lib.sh
  source "$ROOT/hack/apt-lib.sh"
  apt_install "${need_pkgs[@]}" || die "apt-get install ${need_pkgs[*]} failed (is Debian's mirror reachable?)"
fi

hash=$({
  "$GO" env GOVERSION GOOS GOARCH
  echo "$KUBE_ROUTER_VERSION $BUILD_REV"
} | sha256sum | cut -c1-12)
DIR=$CACHE/kube-router-$KUBE_ROUTER_VERSION-$hash
if [[ -x $DIR/kube-router ]]; then
  mark_used "$DIR"
  echo "$DIR/kube-router"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/kube-router-build.lock"
flock 9
if [[ -x $DIR/kube-router ]]; then
  mark_used "$DIR"
  echo "$DIR/kube-router"
  exit 0
fi

log "building kube-router $KUBE_ROUTER_VERSION into $DIR (first run: minutes)"
tmp=$DIR.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
export GOFLAGS="-buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
GOBIN=$tmp nice -n "${KUBE_BUILD_NICE:-10}" "$GO" install -p "${KUBE_BUILD_P:-1}" -trimpath \
  -ldflags="-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$KUBE_ROUTER_VERSION" \
  "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@$KUBE_ROUTER_VERSION"
rm -rf "$DIR"
mkdir -p "$DIR"
mv "$tmp/kube-router" "$DIR/kube-router"
rm -rf "$tmp"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$DIR/kube-router" | cut -f1) in $DIR"
prune_old_builds kube-router-v "$DIR"
echo "$DIR/kube-router"
