#!/usr/bin/env bash
# Install the CloudNativePG operator (CRDs, RBAC, Deployment, webhooks) into the cluster
# $KUBECONFIG points at, from CNPG's own kustomize sources, and wait until its webhook answers.
#
#   bash hack/images.sh cnpg cnpg-postgres       # the two images (cached)
#   eval "$(bash hack/node-up.sh)"               # with BRAIN_NODE_IMAGES including them
#   bash hack/cnpg-install.sh                    # or --render: print the manifest, apply nothing
#
# No registry or release download is reachable here. CNPG's release manifest
# (cnpg-1.27.1.yaml on GitHub) is `kustomize build config/default` with the image set; the Go
# module proxy serves the same config/ folder in the source zip. We render it with `kubectl
# kustomize` (kustomize is built into kubectl) through a two-line overlay: the controller image
# becomes ours, and imagePullPolicy Always (nothing to pull from) becomes IfNotPresent. CNPG makes
# its own webhook certificate at start and patches the caBundle into its webhook configurations,
# so no cert-manager is needed. The rendered file is cached beside the sources' version.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CNPG_VERSION=v1.27.1 # hack/cnpg/go.mod
IMAGE=${CNPG_IMAGE:-$(bash "$ROOT/hack/images.sh" --ref cnpg)}
CACHE=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
log() { echo "cnpg-install: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
command -v kubectl >/dev/null || die "kubectl is not on PATH (eval the exports of hack/node-up.sh first)"
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}

key=$(echo "$CNPG_VERSION $IMAGE" | sha256sum | cut -c1-12)
OUT=$CACHE/cnpg-manifest-$CNPG_VERSION-$key.yaml
if [[ ! -s $OUT ]]; then
  [[ -x $GO ]] || die "needs the go command once, to fetch CNPG's source zip from the module proxy"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  src=$(cd "$tmp" && GOFLAGS=-mod=mod GOTOOLCHAIN=local "$GO" mod download -json \
    "github.com/cloudnative-pg/cloudnative-pg@$CNPG_VERSION" \
    | python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(d.get("Error")) if d.get("Error") else print(d["Dir"])')
  cp -r "$src/config" "$tmp/config"
  chmod -R u+w "$tmp/config"
  mkdir "$tmp/brain"
  name=${IMAGE%:*} tag=${IMAGE##*:}
  cat >"$tmp/brain/kustomization.yaml" <<YAML
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../config/default
images:
- name: controller
  newName: $name
  newTag: $tag
patches:
- patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
  target:
    kind: Deployment
    name: controller-manager
YAML
  kubectl kustomize "$tmp/brain" >"$tmp/out.yaml" 2> >(grep -v "'vars' is deprecated" >&2)
  grep -q "image: $IMAGE" "$tmp/out.yaml" || die "the rendered manifest does not run $IMAGE"
  mkdir -p "$CACHE"
  mv "$tmp/out.yaml" "$OUT"
fi
if [[ ${1:-} == --render ]]; then
  cat "$OUT"
  exit 0
fi
start=$(date +%s)
# Server-side: the CRDs are larger than the 256 KiB last-applied annotation client-side apply writes.
kubectl apply --server-side --force-conflicts -f "$OUT" >/dev/null
kubectl -n cnpg-system rollout status deploy/cnpg-controller-manager --timeout="${CNPG_WAIT:-300s}" >&2 \
  || {
    kubectl -n cnpg-system get pods -o wide >&2
    kubectl -n cnpg-system logs deploy/cnpg-controller-manager --tail=40 >&2 || true
    die "the CloudNativePG operator did not become Available"
  }
log "CloudNativePG $CNPG_VERSION Available in $(($(date +%s) - start)) s ($IMAGE)"
