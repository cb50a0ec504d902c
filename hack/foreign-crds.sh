#!/usr/bin/env bash
# Print a folder holding the real CRDs of the two optional APIs the operator writes to:
# CloudNativePG's `Cluster` and prometheus-operator's `ServiceMonitor` and `PrometheusRule`.
#
#   kubectl apply --server-side -f "$(bash hack/foreign-crds.sh)"
#
# No release download is reachable here, but the Go module proxy serves both projects' source
# zips, which carry the generated CRD YAML. `go mod download` fetches them (no build), and the
# three files are copied into a versioned cache so later runs are offline.
set -euo pipefail

CNPG_VERSION=v1.27.1
PROM_OPERATOR_VERSION=v0.85.0
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/foreign-crds-cnpg${CNPG_VERSION}-promop${PROM_OPERATOR_VERSION}
log() { echo "foreign-crds.sh: $*" >&2; }

if [[ -f $CACHE/.complete ]]; then
  echo "$CACHE"
  exit 0
fi
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
[[ -x $GO ]] || { log "needs the go command (the Go module proxy is where the CRDs come from)"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Prints the module's unpacked source folder (run outside any module, so nothing is added to one).
module_dir() {
  (cd "$tmp" && GOFLAGS=-mod=mod GOTOOLCHAIN=local "$GO" mod download -json "$1" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d.get("Error")) if d.get("Error") else print(d["Dir"])')
}

log "fetching CloudNativePG $CNPG_VERSION and prometheus-operator $PROM_OPERATOR_VERSION sources (once)"
cnpg=$(module_dir "github.com/cloudnative-pg/cloudnative-pg@$CNPG_VERSION")
prom=$(module_dir "github.com/prometheus-operator/prometheus-operator@$PROM_OPERATOR_VERSION")
mkdir -p "$CACHE"
cp "$cnpg/config/crd/bases/postgresql.cnpg.io_clusters.yaml" "$CACHE/"
for kind in servicemonitors prometheusrules; do
  cp "$prom/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$CACHE/"
done
chmod -R u+w "$CACHE"
touch "$CACHE/.complete"
echo "$CACHE"
