#!/usr/bin/env bash
# Print the path of a promtool binary, fetching one first when needed.
#
#   PROMTOOL=$(bash hack/promtool.sh) && "$PROMTOOL" test rules tests/delivery/rules_test.yaml
#
# Order: $PROMTOOL, `promtool` on PATH, the cached copy, then Debian's `prometheus` package,
# downloaded with `apt-get download` and unpacked with `dpkg -x` into the cache: nothing is
# installed system-wide and no service is started. Exit 1 (message on stderr) if none can be had.
set -euo pipefail

CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/promtool
log() { echo "promtool.sh: $*" >&2; }

if [[ -n ${PROMTOOL:-} && -x ${PROMTOOL} ]]; then
  echo "$PROMTOOL"
  exit 0
fi
if command -v promtool >/dev/null 2>&1; then
  command -v promtool
  exit 0
fi
if [[ -x $CACHE/usr/bin/promtool ]]; then
  echo "$CACHE/usr/bin/promtool"
  exit 0
fi
if ! command -v apt-get >/dev/null || ! command -v dpkg >/dev/null; then
  log "no promtool on PATH and no apt-get/dpkg to fetch Debian's prometheus package"
  exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "fetching Debian's prometheus package into $CACHE (once)"
if ! (cd "$work" && apt-get download prometheus >&2 2>/dev/null); then
  log "apt-get download prometheus failed (run \`apt-get update\`, or put promtool on PATH)"
  exit 1
fi
mkdir -p "$CACHE"
dpkg -x "$work"/prometheus_*.deb "$work/x"
mkdir -p "$CACHE/usr/bin"
cp "$work/x/usr/bin/promtool" "$CACHE/usr/bin/promtool.tmp"
mv "$CACHE/usr/bin/promtool.tmp" "$CACHE/usr/bin/promtool"
# The Prometheus server binary comes along (used by e2e to scrape real processes).
cp "$work/x/usr/bin/prometheus" "$CACHE/usr/bin/prometheus" 2>/dev/null || true
echo "$CACHE/usr/bin/promtool"
