#!/usr/bin/env bash
# Builds the images: operator, gateway, embedder, jobs (Python, from the hashed lock), database
# (Postgres 17 + pgvector) and cloudflared (the tunnel sidecar, its binary from
# hack/cloudflared-build.sh). Starts Docker through hack/docker-up.sh when none answers.
# Two more only on request (the high-availability e2e): cnpg (the CloudNativePG operator, its
# manager built from Go module source by hack/cnpg-build.sh) and cnpg-postgres (its operand image).
#
#   bash hack/images.sh                 # all six, tag :dev
#   bash hack/images.sh cnpg cnpg-postgres
#   bash hack/images.sh gateway jobs    # some
#   IMAGE_TAG=1.2.3 BASES=upstream bash hack/images.sh
#   EMBEDDER_MODEL=BAAI/bge-small-en-v1.5 bash hack/images.sh embedder   # from the hub (needs one)
#
# BASES: upstream = python:3.11-slim-bookworm and debian:trixie-slim from Docker Hub;
#        local    = the Debian-built bases of hack/base-images.sh (no registry needed);
#        auto     = upstream when Docker Hub answers, else local [default].
# Each build's context is a tar of only what the Dockerfile copies (plus this machine's extra CA
# certificates as .build/ca, for pip behind a TLS-inspecting egress), streamed to `docker build
# --network host`. Docker's layer cache (in $BRAIN_CACHE/docker-v1) makes a rebuild with the same
# lock and sources take seconds. Prints one line per image (tab-separated): name, ref, seconds, size, base.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
REG=${IMAGE_REGISTRY:-ghcr.io/brain-operator}
TAG=${IMAGE_TAG:-dev}
BASES=${BASES:-auto}
ALL=(operator gateway embedder jobs database cloudflared)
OPTIONAL=(cnpg cnpg-postgres)
log() { echo "images: $*" >&2; }
die() {
  log "ERROR: $*"
  exit 1
}
ref_of() { # image → reference
  case $1 in
    database) echo "$REG/postgres:17-pgvector-$TAG" ;;
    cnpg) echo "$REG/cloudnative-pg:1.27.1-$TAG" ;;
    cnpg-postgres) echo "$REG/cnpg-postgres:17-pgvector-$TAG" ;; # CNPG reads the major from the tag
    *) echo "$REG/$1:$TAG" ;;
  esac
}
if [ "${1:-}" = --ref ]; then
  ref_of "$2"
  exit 0
fi
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=("${ALL[@]}")
for w in "${wanted[@]}"; do
  [[ " ${ALL[*]} ${OPTIONAL[*]} " == *" $w "* ]] || die "unknown image '$w' (one of: ${ALL[*]} ${OPTIONAL[*]})"
done

# One build at a time per cache (hack/prebuild.sh's background run and a test's fixture, or two
# test workers): the second waits, then finds Docker's layer cache warm and the wheels downloaded.
LOCK_DIR=${BRAIN_CACHE:-$HOME/.cache/brain-operator}
mkdir -p "$LOCK_DIR"
exec 9>"$LOCK_DIR/images-build.lock"
flock 9

bash hack/docker-up.sh || die "no Docker engine (hack/docker-up.sh failed above)"

if [ "$BASES" = auto ]; then
  if docker image inspect docker.io/library/python:3.11-slim-bookworm >/dev/null 2>&1 \
    || timeout 60 docker pull -q docker.io/library/python:3.11-slim-bookworm >/dev/null 2>&1; then
    BASES=upstream
  else
    BASES=local
  fi
fi
case $BASES in
  upstream)
    PY_BASE=docker.io/library/python:3.11-slim-bookworm
    DEB_BASE=docker.io/library/debian:trixie-slim
    ;;
  local)
    bash hack/base-images.sh
    BASE_TAG=v2 # hack/base-images.sh's
    PY_BASE=brain-base/python:3.11-bookworm-$BASE_TAG
    DEB_BASE=brain-base/debian:trixie-$BASE_TAG
    ;;
  *) die "BASES must be auto, upstream or local, not '$BASES'" ;;
esac

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/.build/ca"
cp /usr/local/share/ca-certificates/*.crt "$ctx/.build/ca/" 2>/dev/null || true

# Wheels: downloaded once per lock export into $BRAIN_CACHE/images-v1/wheels (inside the Python
# base, so the platform is the image's), then served on loopback to the builds (--network host)
# with --no-index: a fresh Docker data root rebuilds without PyPI. WHEELS=0 skips this.
WHEELS_DIR=${BRAIN_CACHE:-$HOME/.cache/brain-operator}/images-v1/wheels
WHEEL_PORT=${WHEEL_PORT:-28417} # below the ephemeral range (32768-60999), like the cluster ports
wheel_args=()
py_wanted=()
for w in "${wanted[@]}"; do [[ $w == database || $w == cloudflared || $w == cnpg* ]] || py_wanted+=("$w"); done
if [ "${WHEELS:-1}" = 1 ] && [ ${#py_wanted[@]} -gt 0 ]; then
  mkdir -p "$WHEELS_DIR"
  for w in "${py_wanted[@]}"; do
    reqs=("requirements/$w.txt")
    [ "$w" = embedder ] && reqs+=(images/embedder/model.txt)
    for req in "${reqs[@]}"; do
      stamp="$WHEELS_DIR/.done-$(sha256sum "$req" | cut -c1-16)"
      [ -f "$stamp" ] && continue
      log "downloading the wheels of $req into $WHEELS_DIR"
      docker run --rm --network host --user "$(id -u):$(id -g)" -e HOME=/tmp -e PIP_CERT=/ca.crt \
        -e PIP_DISABLE_PIP_VERSION_CHECK=1 -v /etc/ssl/certs/ca-certificates.crt:/ca.crt:ro \
        -v "$ROOT/$req:/req.txt:ro" -v "$WHEELS_DIR:/wheels" "$PY_BASE" \
        sh -c 'python3 -m venv /tmp/v && /tmp/v/bin/pip download -q --require-hashes --no-deps --only-binary :all: -d /wheels -r /req.txt' \
        || die "downloading the wheels of $req failed (PyPI unreachable?); WHEELS=0 builds without the cache"
      touch "$stamp"
    done
  done
  python3 -m http.server --bind 127.0.0.1 --directory "$WHEELS_DIR" "$WHEEL_PORT" >/dev/null 2>&1 &
  server=$!
  trap 'kill "$server" 2>/dev/null; rm -rf "$ctx"' EXIT
  for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$WHEEL_PORT/" && break
    kill -0 "$server" 2>/dev/null || die "cannot serve the wheel cache on 127.0.0.1:$WHEEL_PORT (in use?): set WHEEL_PORT"
    sleep 0.1
  done
  wheel_args=(--build-arg "WHEELS_URL=http://127.0.0.1:$WHEEL_PORT/")
fi

REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
CREATED=$(git log -1 --format=%cI 2>/dev/null || echo unknown) # reproducible: the commit's time

for image in "${wanted[@]}"; do
  ref=$(ref_of "$image")
  case $image in
    database | cnpg-postgres) files=("images/$image") base=(--build-arg "DEBIAN_IMAGE=$DEB_BASE") from=$DEB_BASE wargs=() ;;
    cnpg)
      manager=$(bash hack/cnpg-build.sh) || die "building the CloudNativePG manager failed (hack/cnpg-build.sh above)"
      mkdir -p "$ctx/.build/cnpg"
      case $(uname -m) in x86_64) goarch=amd64 ;; aarch64) goarch=arm64 ;; *) goarch=$(uname -m) ;; esac
      cp "$manager" "$ctx/.build/cnpg/manager_$goarch" # CNPG looks its instance manager up by GOARCH
      files=(images/cnpg) base=(--build-arg "DEBIAN_IMAGE=$DEB_BASE") from=$DEB_BASE wargs=() ;;
    cloudflared) # a Go build, cached in $BRAIN_CACHE/cloudflared-<version>-<hash> (minutes the first time)
      bin=$(bash hack/cloudflared-build.sh) || die "building cloudflared failed (hack/cloudflared-build.sh above)"
      cp "$bin" "$ctx/.build/cloudflared"
      files=(images/cloudflared) from=$DEB_BASE wargs=()
      base=(--build-arg "DEBIAN_IMAGE=$DEB_BASE" --build-arg "CLOUDFLARED_VERSION=$("$bin" --version | awk '{print $3}')") ;;
    embedder) files=(requirements/embedder.txt operator/brain operator/brain_operator images/embedder)
      base=(--build-arg "PYTHON_IMAGE=$PY_BASE") from=$PY_BASE wargs=("${wheel_args[@]}")
      if [ -n "${EMBEDDER_MODEL:-}" ]; then # the manifest's model from a model hub, not the offline MiniLM
        base+=(--build-arg MODEL_SOURCE=hub --build-arg "EMBEDDING_MODEL=$EMBEDDER_MODEL" --build-arg MODEL_PATH=)
      fi ;;
    *) files=("requirements/$image.txt" operator/brain operator/brain_operator "images/$image")
      base=(--build-arg "PYTHON_IMAGE=$PY_BASE") from=$PY_BASE wargs=("${wheel_args[@]}") ;;
  esac
  start=$(date +%s)
  if ! tar -c --exclude=__pycache__ --exclude='*.pyc' -f - "${files[@]}" -C "$ctx" .build \
    | DOCKER_BUILDKIT=0 nice -n "${BUILD_NICE:-15}" docker build -q --network host -f "images/$image/Dockerfile" -t "$ref" \
      "${base[@]}" "${wargs[@]}" --build-arg "VERSION=$TAG" --build-arg "REVISION=$REVISION" --build-arg "CREATED=$CREATED" \
      - >"$ctx/build.log" 2>&1; then
    tail -n 30 "$ctx/build.log" >&2
    die "building $ref failed"
  fi
  rm -rf "$ctx/.build/cnpg" # only the cnpg image's context carries the manager
  size=$(docker image inspect -f '{{.Size}}' "$ref")
  printf '%s\t%s\t%ss\t%s MB\t%s\n' "$image" "$ref" "$(($(date +%s) - start))" "$((size / 1000000))" "$from"
  rm -f "$ctx/.build/cloudflared" # only cloudflared's context carries it
done
