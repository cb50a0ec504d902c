#!/usr/bin/env bash
# Build (once per machine) otelcol-brain, a real OpenTelemetry Collector (OTLP receiver over HTTP
# and gRPC, batch processor, debug and file exporters) from its Go modules, and print the binary's
# path on stdout. Progress goes to stderr. tests/otel_fixtures.py runs it on loopback (issue #31).
#
#   bin=$(bash hack/otelcol-build.sh)   # builds only if the versioned cache folder is missing
#   bash hack/otelcol-build.sh --help
#
# Source: hack/otelcol/{main.go,go.mod,go.sum}, a hand-written main around otelcol.NewCommand
# (what the upstream builder, go.opentelemetry.io/collector/cmd/builder, would generate from a
# manifest; written out and committed instead so the build needs no generator step and go.sum
# locks it). All collector modules at one release: core v0.161.0 with the stable v1.67.0 modules,
# contrib's fileexporter v0.161.0.
#
# Cache: ${BRAIN_CACHE:-$HOME/.cache/brain-operator}/otelcol-<version>-<hash>/otelcol-brain, <hash>
# over hack/otelcol/{go.mod,go.sum,*.go}, this script and the Go version. Under the flock
# $CACHE/otelcol-build.lock, so parallel callers (pytest-xdist workers, hack/prebuild.sh) build it
# once and the others wait. Niced (KUBE_BUILD_NICE, default 10), -p KUBE_BUILD_P (default 2).
# Cold, from empty caches: 152 s wall at load ~5, 141 CPU-s (docs/performance.md); a cache hit
# prints the path at once.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SRC=$ROOT/hack/otelcol
OTELCOL_VERSION=v0.161.0 # keep in step with hack/otelcol/go.mod
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}

log() { echo "otelcol-build: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}
case ${1:-} in
  "") ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    log "unknown argument '$1' (accepted: none, --help)"
    exit 2
    ;;
esac

# shellcheck source=hack/build-lib.sh
source "$ROOT/hack/build-lib.sh"
find_go

hash=$(
  {
    "$GO" env GOVERSION GOOS GOARCH
    echo "$OTELCOL_VERSION"
    cat "$SRC/go.mod" "$SRC/go.sum" "$SRC"/*.go "${BASH_SOURCE[0]}"
  } | sha256sum | cut -c1-12
)
DIR=$CACHE/otelcol-$OTELCOL_VERSION-$hash
OUT=$DIR/otelcol-brain

if [[ -x $OUT ]]; then
  mark_used "$DIR"
  echo "$OUT"
  exit 0
fi
mkdir -p "$CACHE"
exec 9>"$CACHE/otelcol-build.lock"
flock 9 # another caller (a test worker, the prebuild) finishes its build first
if [[ -x $OUT ]]; then
  mark_used "$DIR"
  echo "$OUT"
  exit 0
fi

log "building the OpenTelemetry Collector $OTELCOL_VERSION into $DIR (first run: minutes)"
tmp=$DIR.tmp.$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$SRC"
  export GOFLAGS="-buildvcs=false -mod=readonly" GOTOOLCHAIN=local CGO_ENABLED=0
  nice -n "${KUBE_BUILD_NICE:-10}" "$GO" build -p "${KUBE_BUILD_P:-2}" -trimpath \
    -ldflags="-s -w -X 'main.Version=$OTELCOL_VERSION'" -o "$tmp/otelcol-brain" .
) || die "go build failed (see above)"
"$tmp/otelcol-brain" --version >&2 || die "the built otelcol-brain does not run"
rm -rf "$DIR"
mkdir -p "$DIR"
mv "$tmp/otelcol-brain" "$OUT"
rm -rf "$tmp"
trap - EXIT
log "built in $(($(date +%s) - start)) s: $(du -sh "$OUT" | cut -f1) in $DIR"
prune_old_builds otelcol-v "$DIR"
echo "$OUT"
