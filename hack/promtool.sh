#!/usr/bin/env bash
# Print the path of a promtool binary (or, with `prometheus`, of the Prometheus server), fetching
# Debian's `prometheus` package first when needed.
#
#   PROMTOOL=$(bash hack/promtool.sh) && "$PROMTOOL" test rules tests/delivery/rules_test.yaml
#   PROMETHEUS=$(bash hack/promtool.sh prometheus)   # what hack/prometheus.sh does
#
# Order: $PROMTOOL (or $PROMETHEUS), the binary on PATH, the cached copy, then Debian's `prometheus`
# package, downloaded with `apt-get download` and unpacked with `dpkg -x` into the cache, which
# keeps both `usr/bin/promtool` and `usr/bin/prometheus`: nothing is installed system-wide and no
# service is started. Exit 1 (message on stderr) if none can be had.
set -euo pipefail

TOOL=${1:-promtool}
case $TOOL in
  promtool) OVERRIDE=${PROMTOOL:-} ;;
  prometheus) OVERRIDE=${PROMETHEUS:-} ;;
  *)
    echo "usage: $0 [promtool|prometheus]" >&2
    exit 2
    ;;
esac
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/promtool
log() { echo "$(basename "$0"): $*" >&2; }

if [[ -n $OVERRIDE && -x $OVERRIDE ]]; then
  echo "$OVERRIDE"
  exit 0
fi
if command -v "$TOOL" >/dev/null 2>&1; then
  command -v "$TOOL"
  exit 0
fi
if [[ -x $CACHE/usr/bin/$TOOL ]]; then
  echo "$CACHE/usr/bin/$TOOL"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  log "no $TOOL on PATH and no apt-get/dpkg to fetch Debian's prometheus package"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching Debian's prometheus package into $CACHE (once)"
# shellcheck source=hack/apt-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-lib.sh"
if ! (cd "$work" && apt_download prometheus); then
  log "apt-get download prometheus failed (is Debian's mirror reachable? Or put $TOOL on PATH)"
  exit 1
fi
dpkg -x "$work"/prometheus_*.deb "$work/x"
mkdir -p "$CACHE/usr/bin"
# Both binaries, each copied then renamed so that a concurrent run never sees half a file.
for bin in promtool prometheus; do
  cp "$work/x/usr/bin/$bin" "$CACHE/usr/bin/$bin.tmp.$$"
  mv "$CACHE/usr/bin/$bin.tmp.$$" "$CACHE/usr/bin/$bin"
done
echo "$CACHE/usr/bin/$TOOL"
