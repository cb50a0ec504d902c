#!/usr/bin/env bash
# Create a kind cluster, build and load the four images, install the chart and the samples.
# Needs a Docker engine (not available on every dev machine; CI runs it: .github/workflows/e2e-kind.yml).
#
#   bash hack/kind-up.sh            # idempotent: reuses the cluster, rebuilds the images
#   kind delete cluster --name brain
#
# Environment (optional):
#   KIND_CLUSTER   cluster name [brain]
#   IMAGE_TAG      tag for the locally built images [dev]
#   TEAM_NS        namespace for the sample Brain [team]
#   SKIP_BUILD=1   do not build, only load images that already exist locally
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLUSTER=${KIND_CLUSTER:-brain}
TAG=${IMAGE_TAG:-dev}
TEAM_NS=${TEAM_NS:-team}
REG=ghcr.io/brain-operator
IMAGES=(operator gateway embedder jobs)

log() { echo "kind-up: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}

for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || die "$tool is not on PATH"
done
docker info >/dev/null 2>&1 || die "no Docker engine reachable (docker info failed)"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  # kind's node image comes from a registry; say so plainly where none is reachable.
  node_image=${KIND_NODE_IMAGE:-}
  if [ -z "$node_image" ] && [ -z "$(docker image ls -q kindest/node)" ] \
    && ! curl -s -o /dev/null -m 15 https://registry-1.docker.io/v2/; then
    log "no kind node image can be had: none is loaded (docker images kindest/node) and the registry is unreachable"
    exit 3
  fi
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 180s ${node_image:+--image "$node_image"}
fi
kubectl config use-context "kind-$CLUSTER" >/dev/null

cd "$ROOT"
for image in "${IMAGES[@]}"; do
  ref="$REG/$image:$TAG"
  if [[ ${SKIP_BUILD:-0} != 1 ]]; then
    log "building $ref"
    IMAGE_TAG="$TAG" bash hack/images.sh "$image" >/dev/null
  fi
  log "loading $ref into $CLUSTER"
  kind load docker-image --name "$CLUSTER" "$ref"
done

log "installing the chart"
helm upgrade --install brain-operator charts/brain-operator \
  --namespace brain-system --create-namespace \
  --set image.tag="$TAG" \
  --set image.pullPolicy=IfNotPresent \
  --set dataPlaneImages.gateway="$REG/gateway:$TAG" \
  --set dataPlaneImages.embedder="$REG/embedder:$TAG" \
  --set dataPlaneImages.jobs="$REG/jobs:$TAG" \
  --wait --timeout 5m

log "applying the samples to namespace $TEAM_NS"
kubectl create namespace "$TEAM_NS" --dry-run=client -o yaml | kubectl apply -f -
kubectl apply -n "$TEAM_NS" -f samples/brain.yaml -f samples/routingpolicy.yaml -f samples/memorysource-git.yaml

log "waiting for Brain/team to be Ready"
kubectl -n "$TEAM_NS" wait brain/team --for=condition=Ready --timeout=10m
kubectl -n "$TEAM_NS" get brain,deploy,sts,cronjob
log "done: kubectl -n $TEAM_NS port-forward svc/team-gateway 4000:4000"
