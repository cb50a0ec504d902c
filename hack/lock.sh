#!/usr/bin/env bash
# Re-resolves uv.lock from pyproject.toml and exports one hashed requirements file per extra
# (requirements/<extra>.txt), which `make install` and every image install with --require-hashes.
#
#   bash hack/lock.sh            # after changing dependencies in pyproject.toml
#   bash hack/lock.sh --check    # exit 1 when uv.lock or requirements/ are out of date
#
# uv is the pinned one of hack/uv.sh (a versioned tool venv in the cache, never in .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
uv=$(bash hack/uv.sh)
export SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt} UV_SYSTEM_CERTS=1
EXTRAS=(operator gateway embedder jobs local dev)
if [ "${1:-}" = --check ]; then
  "$uv" lock --python 3.11 --check -q
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  out=$tmp
else
  "$uv" lock --python 3.11 -q
  out=requirements
fi
mkdir -p "$out"
# Left out of the gateway image: polars (176 MB), which litellm[proxy] requires only for its FOCUS
# cost export, a callback the gateway never configures (the proxy imports and serves without it;
# tests/delivery/test_containers.py runs the gateway image).
declare -A DROP=([gateway]="polars polars-runtime-32")
for extra in "${EXTRAS[@]}"; do
  drop=()
  for pkg in ${DROP[$extra]:-}; do drop+=(--no-emit-package "$pkg"); done
  "$uv" export -q --frozen --format requirements-txt --no-emit-project --no-header --no-dev \
    --extra "$extra" "${drop[@]}" -o "$out/$extra.txt"
done
if [ "${1:-}" = --check ]; then
  diff -r -q requirements "$out" || { echo "lock: requirements/ is stale; run bash hack/lock.sh" >&2; exit 1; }
fi
